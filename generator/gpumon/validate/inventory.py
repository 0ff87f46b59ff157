"""Check 7: inventory and version matrix — nodes x GPU model x driver version from the series'
labels (``modelName``, ``DCGM_FI_DRIVER_VERSION`` when the exporter sets it), flagging nodes whose
driver differs from the fleet majority or from the version the spec pins. Keeping a driver /
exporter version matrix is the field's advice for fleets where fields come and go with versions
(dcgm-exporter#71, #143, #460). Reads the shared inventory (``ctx.inventory``, the presence check's queries): no extra query.
The ``gpu-inventory`` note lists every node of a fleet of up to 16 nodes; a larger fleet gets one
line per node composition (GPU count, model, driver) with how many nodes have it and the first
names, so a node that differs stands on a line of its own.

Why: Drivers and exporter versions decide which fields exist; a node on another driver is the usual
reason one node lacks a field.
Silence: Set `exporter.driver_version` to the version you run, or leave the check out with --checks;
info and warnings never fail a run.
"""

from __future__ import annotations

from collections import Counter, defaultdict

from ..findings import Finding
from . import hints
from .base import CheckResult, Context, device_in_cluster

CHECK = "inventory"
ORDER = 110
FINDINGS = ("gpu-inventory", "driver-mismatch", "driver-not-pinned-version", "driver-version-unknown")
LOOKS_AT = ('nodes x `modelName` x `DCGM_FI_DRIVER_VERSION`: the version matrix, GPUs counted as devices '
            '(distinct UUID: MIG instances of one GPU, one GPU under two targets or two node names count once; '
            'every GPU count in a finding message does the same); nodes whose driver differs from the majority, '
            'or from `exporter.driver_version` when the spec pins one')
#: nodes up to which the gpu-inventory message lists every node (:func:`_lines`)
LIST_NODES = 16
#: node names shown for a group of nodes of the same composition
EXAMPLES = 3
FINDING_NOTES = {'gpu-inventory': 'info', 'driver-mismatch': 'warning', 'driver-version-unknown': 'info'}


def matrix(ctx: Context) -> tuple[dict[str, tuple], dict[str, int]]:
    """For GPUs reporting now, under current or 1.x names: ``{node: ((model, driver), GPUs) pairs,
    sorted}`` and ``{cluster: GPUs}`` ("" without a cluster label). ``node`` reads ``cluster/node``
    when the spec names a cluster label. GPUs are devices (:func:`~.base.device_in_cluster`): MIG
    instances of one GPU count once; one GPU under two node names counts on each node and once in
    its cluster.
    Nodes of one composition share one tuple, so the table costs a dict entry per node, not a
    set per node and model (those were 12 MiB at 64,000 GPUs)."""
    by_node: dict[tuple[str, str], list[tuple]] = defaultdict(list)
    devices: dict[str, set[str]] = defaultdict(set)
    for key in ctx.inventory.reporting_any_name:
        by_node[(key[5], key[1])].append(key)
        devices[key[5]].add(device_in_cluster(key))
    attrs, lab = ctx.inventory.attrs, ctx.labels
    shared: dict[tuple, tuple] = {}
    table: dict[str, tuple] = {}
    for (cluster, name), keys in by_node.items():
        combos: dict[tuple[str, str], set[str]] = defaultdict(set)
        for key in keys:
            a = attrs(key)
            combos[(a.get(lab.model, ""), a.get(lab.driver_version, ""))].add(device_in_cluster(key))
        row = tuple(sorted((combo, len(gpus)) for combo, gpus in combos.items()))
        name = name or f"(no {lab.node} label)"   # series without the node label: say so, not ": 8 x ..."
        table[f"{cluster}/{name}" if cluster else name] = shared.setdefault(row, row)
    return table, {cluster: len(d) for cluster, d in devices.items()}


def _summary(ctx: Context, table: dict[str, tuple], devices: dict[str, int]) -> str:
    """``8 GPUs on 4 nodes``, and per cluster when the spec names a cluster label
    (``8 GPUs on 4 nodes in 2 clusters (a: 4 GPUs on 2 nodes; b: ...)``). GPUs are distinct
    devices: one UUID under two node names or two driver labels counts once."""
    text = f"{_many(sum(devices.values()), 'GPU')} on {_many(len(table), 'node')}"
    if not ctx.labels.cluster:
        return text
    clusters = Counter(node.rpartition("/")[0] for node in table)
    parts = "; ".join(f"{c or '(no ' + ctx.labels.cluster + ')'}: {_many(devices.get(c, 0), 'GPU')} on {_many(n, 'node')}"
                      for c, n in sorted(clusters.items()))
    return f"{text} in {_many(len(clusters), 'cluster')} ({parts})"


def _many(n: int, noun: str) -> str:
    """``1 node``, ``2 nodes``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _lines(table: dict[str, tuple]) -> list[str]:
    """The matrix as text: ``node: 8 x MODEL, driver D`` per node for up to :data:`LIST_NODES`
    nodes; above, one line per composition (GPU count, model and driver of a node) with how many
    nodes have it and the first :data:`EXAMPLES` of their names, largest group first, so the
    message stays a few lines on a fleet of thousands of identical nodes (listed per node, a
    64,000-GPU fleet's message was over 500 KB) and an odd node stands out on a line of its own."""
    def describe(node: str) -> str:
        return " + ".join(f"{gpus} x {model or 'unknown model'}, driver {driver or 'unknown'}"
                          for (model, driver), gpus in table[node])
    if len(table) <= LIST_NODES:
        return [f"{node}: {describe(node)}" for node in sorted(table)]
    groups: dict[str, list[str]] = defaultdict(list)
    for node in sorted(table):
        groups[describe(node)].append(node)
    ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[1][0]))
    return [f"{nodes[0]}: {text}" if len(nodes) == 1 else
            f"{len(nodes)} nodes ({', '.join(nodes[:EXAMPLES])}{', ...' if len(nodes) > EXAMPLES else ''}): {text}"
            for text, nodes in ordered]


def run(ctx: Context) -> CheckResult:
    """Findings: ``gpu-inventory`` (info, the matrix), ``driver-mismatch`` (warning: differs from
    the majority), ``driver-not-pinned-version`` (error: differs from ``exporter.driver_version``)."""
    cases = [f"{CHECK}/driver-version"]
    if ctx.skip_gpu_checks:
        return CheckResult([], cases)
    table, devices = matrix(ctx)
    case = cases[0]
    if not table:
        return CheckResult([], cases)
    drivers: dict[str, set[str]] = defaultdict(set)
    for node in table:
        drivers[node].update(driver for (_, driver), _ in table[node] if driver)
    findings = [Finding("gpu-inventory", "info", ctx.job, _summary(ctx, table, devices) + ": " + "; ".join(_lines(table)),
                        case=case)]
    pinned = ctx.spec.exporter.driver_version
    votes = Counter(d for ds in drivers.values() for d in ds)
    if not votes:
        findings.append(Finding("driver-version-unknown", "info", ctx.job,
                                f"no series carries {ctx.labels.driver_version}: the version matrix has no driver column",
                                "add `DCGM_FI_DRIVER_VERSION, label, Driver Version` to the collectors CSV "
                                "(the Helm chart's ConfigMap lacks it)", case=case))
        return CheckResult(findings, cases)
    majority = votes.most_common(1)[0][0]
    for node, ds in sorted(drivers.items()):
        cluster, _, name = node.rpartition("/") if ctx.labels.cluster else ("", "", node)
        labels = (("job", ctx.job),) + (((ctx.labels.cluster, cluster),) if ctx.labels.cluster else ()) + \
            ((ctx.labels.node, name),)
        if pinned and ds != {pinned}:
            findings.append(Finding("driver-not-pinned-version", "error", node,
                                    f"node {node} runs driver {', '.join(sorted(ds))}; the spec pins {pinned}",
                                    hints.DRIVER_MISMATCH, labels=labels, case=case))
        elif not pinned and ds != {majority} and len(votes) > 1:
            findings.append(Finding("driver-mismatch", "warning", node,
                                    f"node {node} runs driver {', '.join(sorted(ds))}; most nodes run {majority} "
                                    f"({votes[majority]} of {len(drivers)} nodes)", hints.DRIVER_MISMATCH,
                                    labels=labels, case=case))
    return CheckResult(findings, cases)
