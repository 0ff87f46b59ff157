"""Check 3: every required metric exists now on every GPU that reports, and if not, why.

Queries per spec'd metric, never per GPU (``group by`` the identity labels; never a regex over
metric names, measured 15x slower at 160k series): which GPUs carry it now, and which carried it
within the lookback (``last_over_time``). The GPU inventory is the union over all tracked
metrics; it is a shared fact (``ctx.inventory``, queried in :mod:`gpumon.validate.facts`). Only for metrics with gaps, a second query per metric finds when each missing GPU was
last seen (``max_over_time(timestamp(m)[lookback:step])``, limited to the affected nodes): that
subquery is the costly part (measured 60 s at 320 GPUs, 1 h, 1 s steps, over every series), so
a healthy fleet never pays for it. Gaps are classified with evidence: never seen /
disappeared at T; whole fleet, whole node or some GPUs; legacy 1.x names instead; MIG instances
that cannot report the field; GPUs lost altogether; identity label renamed.

Why: A series that is gone does not alert by itself: a threshold alert such as DCGM_FI_DEV_GPU_TEMP
> 85 goes quiet when the series disappears (fields change between dcgm-exporter versions and
collector lists, dcgm-exporter#571, #655).
Silence: Mark the metric `presence: optional` (reported by the optional check, never an error) or
`presence: sparse` (never checked) in the spec, or leave the check out with --checks.
"""

from __future__ import annotations

from collections import defaultdict

from .. import redact
from ..durations import format_duration
from ..findings import Finding
from ..promapi import Answer, PromError
from ..promqltext import matcher
from ..rules.names import FIELD_LABEL
from ..spec import VOLATILE_LABELS, Metric
from . import hints
from .base import CheckResult, Context, ago, device_id, gpu_count, gpu_list, other_spelling, partial, query_failed, utc
from .facts import Inventory

CHECK = "presence"
ORDER = 30
FINDINGS = ("series-missing", "legacy-metric-names", "field-unsupported-on-mig", "gpu-lost", "node-lost",
            "identity-label-renamed", "identity-label-missing", "skipped", CHECK)
LOOKS_AT = ("the GPU inventory (union of all spec'd metrics over `--lookback`) against each required metric now; "
            'gaps classified: never seen / last seen at T, whole fleet / whole node / some GPUs, 1.x names '
            '(`dcgm_gpu_temp`) present instead, MIG instances that cannot report the field, `Hostname` renamed '
            '`hostname`. Sparse metrics are never checked.')
FINDING_NOTES = {'field-unsupported-on-mig': 'warning', 'node-lost': 'warning'}


def run(ctx: Context) -> CheckResult:
    """Findings: series-missing, legacy-metric-names, field-unsupported-on-mig, gpu-lost,
    identity-label-renamed / identity-label-missing. Sparse metrics are never checked."""
    required = ctx.spec.required_metrics
    cases = [f"{CHECK}/{m.name}" for m in required] + [f"{CHECK}/gpu-inventory", f"{CHECK}/identity-labels"]
    if ctx.skip_gpu_checks:
        return CheckResult([Finding("skipped", "info", ctx.job, "no targets: series presence not checked",
                                    case=f"{CHECK}/gpu-inventory")], cases)
    inv = ctx.inventory
    answers = inv.answers
    findings: list[Finding] = []
    expected: dict[bool, set[tuple]] = {}  # GPUs expected to carry a metric, with and without MIG
    for m in required:
        case = f"{CHECK}/{m.name}"
        failed = [a for k, a in answers.items() if k.split("|")[1] == m.name and isinstance(a, PromError)]
        if failed:
            findings.append(query_failed(failed[0], CHECK, m.name, case))
            continue
        own = [a for k, a in answers.items() if k.split("|")[1] == m.name]
        warned = next((a for a in own if isinstance(a, Answer) and a.partial), None)
        mig = m.mig != "unsupported"
        if mig not in expected:
            expected[mig] = _checked(ctx, inv, m)
        findings += partial(_metric(ctx, inv, m, case, expected[mig]), warned, case, CHECK, m.name)
    findings += _lost(ctx, inv)
    findings += _identity(ctx, inv)
    return CheckResult(findings, cases)


def _checked(ctx: Context, inv: Inventory, m: Metric) -> set[tuple]:
    """GPUs expected to carry ``m`` now: reporting (or on legacy names), target up, MIG-aware."""
    keys = {k for k in inv.reporting_any_name if not ctx.target_down(inv.instance(k))}
    if m.mig == "unsupported":
        keys = {k for k in keys if not k[4]}
    return keys


def _node(key: tuple) -> tuple[str, str]:
    """(cluster, node) of a GPU key: node names repeat across clusters under a global view."""
    return (key[5], key[1])


def _evidence(ctx: Context, inv: Inventory, m: Metric, keys: set[tuple]) -> str:
    seen = keys & inv.seen[m.name]
    times = [inv.last_seen[m.name][k] for k in seen if k in inv.last_seen[m.name]]
    if not seen:
        return f"never seen in {ctx.window_text()}"
    text = f"last seen {utc(max(times))} ({ago(ctx.now - max(times))})" if times else \
        f"seen within the last {format_duration(ctx.lookback)}"
    return text if len(seen) == len(keys) else f"{len(keys) - len(seen)} never seen in {ctx.window_text()}, others {text}"


def _metric(ctx: Context, inv: Inventory, m: Metric, case: str, expected: set[tuple]) -> list[Finding]:
    """``m``'s findings; ``expected`` is :func:`_checked` (the same for every metric of one MIG
    support: built once per run, not once per metric)."""
    missing = expected - inv.now[m.name]
    if m.sources and missing:
        # a GPU a fallback source serves is the sources check's warning (fallback-serving), not an error
        served = ctx.sources.fallback(m.name)
        missing = {k for k in missing if (k[5], k[2]) not in served}
    if not missing:
        return []
    out: list[Finding] = []
    legacy = {k for k in missing if k in inv.legacy[m.name]}
    if legacy:
        names = sorted({inv.legacy[m.name][k] for k in legacy})
        gpus = [inv.gpu(k) for k in legacy]
        out.append(Finding("legacy-metric-names", "error", m.name,
                           f"{m.name} absent but its 1.x name {', '.join(names)} is present on {len(legacy)} GPU(s): "
                           f"{gpu_list(gpus)}", hints.LEGACY,
                           labels=((FIELD_LABEL, m.name), ("job", ctx.job)), case=case))
    rest = missing - legacy
    mig = {k for k in rest if k[4]}
    if mig and mig == rest and inv.now[m.name]:
        out.append(Finding("field-unsupported-on-mig", "warning", m.name,
                           f"{m.name} is missing on {len(mig)} MIG instance(s) and present on non-MIG GPUs: "
                           f"{gpu_list([inv.gpu(k) for k in mig])}", hints.MIG,
                           labels=((FIELD_LABEL, m.name), ("job", ctx.job)), case=case))
        return out
    if not rest:
        return out
    # under a global view each cluster is a fleet of its own: a field gone from every GPU of
    # cluster b is one finding for cluster b, as GpuMetricAbsent pages once per cluster
    clusters = sorted({k[5] for k in expected})
    for cluster in clusters:
        in_cluster = expected if len(clusters) == 1 else {k for k in expected if k[5] == cluster}
        out += _tiers(ctx, inv, m, in_cluster, rest & in_cluster, case, cluster)
    return out


def _tiers(ctx: Context, inv: Inventory, m: Metric, expected: set[tuple], rest: set[tuple], case: str,
           cluster: str) -> list[Finding]:
    """Missing GPUs of one fleet (one cluster, or all GPUs without a cluster label) as findings:
    one for the whole fleet when none reports ``m``, else one per node."""
    if not rest:
        return []
    out: list[Finding] = []
    labels = ((FIELD_LABEL, m.name), ("job", ctx.job)) + (((ctx.labels.cluster, cluster),) if ctx.labels.cluster else ())
    if not (expected & inv.now[m.name]):
        targets = sorted({inv.instance(k) for k in rest})
        scope = f" of cluster {cluster}" if ctx.labels.cluster else ""
        out.append(Finding("series-missing", "error", f"{m.name} in {cluster}" if ctx.labels.cluster else m.name,
                           f"{m.name} is absent on all {gpu_count(rest)} GPUs{scope} of {len(targets)} healthy target(s) "
                           f"({', '.join(targets[:5])}{' ...' if len(targets) > 5 else ''}); {_evidence(ctx, inv, m, rest)}. "
                           f"GPUs: {gpu_list([inv.gpu(k) for k in rest])}",
                           hints.METRIC_ABSENT + (f"; {hints.DISAPPEARED}" if rest & inv.seen[m.name] else ""),
                           labels=labels + ((("instance", targets[0]),) if len(targets) == 1 else ()), case=case))
        return out
    by_node: dict[tuple[str, str], set[tuple]] = defaultdict(set)
    for k in rest:
        by_node[_node(k)].add(k)
    for (_, name), keys in sorted(by_node.items()):
        node_gpus = {k for k in expected if _node(k) == _node(next(iter(keys)))}
        one = inv.gpu(next(iter(keys)))
        node = one.where
        targets = sorted({inv.instance(k) for k in keys})
        where = f"node {node or '?'} (target {', '.join(targets)})"
        node_labels = labels + one.node_labels(ctx.labels) + ((("instance", targets[0]),) if len(targets) == 1 else ())
        listed = f"{gpu_list([inv.gpu(k) for k in keys])}; {_evidence(ctx, inv, m, keys)}"
        if keys == node_gpus and len(keys) > 1:
            msg = f"{m.name} is missing on all {gpu_count(keys)} GPUs of {where}; other nodes report it. Missing on: {listed}"
            hint = hints.NODE_MISSING
        else:
            msg = f"{m.name} is missing on {gpu_count(keys)} of {gpu_count(node_gpus)} GPUs of {where}: {listed}"
            hint = hints.GPU_MISSING
        if len(keys) == 1:
            node_labels += ((ctx.labels.gpu, next(iter(keys))[2]),)
        if keys & inv.seen[m.name]:
            hint += f"; {hints.DISAPPEARED}"
        out.append(Finding("series-missing", "error", f"{m.name} on {node or '?'}", msg, hint,
                           labels=tuple(sorted(node_labels)), case=case))
    return out


def _lost(ctx: Context, inv: Inventory) -> list[Finding]:
    """GPUs seen in the lookback that report nothing now, on a target that is not down. A GPU
    whose UUID reports now under another node name (an exporter pod replaced, its series labelled
    with the new pod's host name) is not lost: it is the same device."""
    case = f"{CHECK}/gpu-inventory"
    reporting = inv.reporting_any_name
    gone = [k for k in inv.sites if k not in reporting and not ctx.target_down(inv.instance(k))]
    # the devices of the few gone keys that report now under another key (not a set of the fleet)
    wanted = {device_id(k) for k in gone}
    alive = {d for d in map(device_id, reporting) if d in wanted} if wanted else set()
    # a label set without any node name (neither spelling: a relabelling dropped it) names no node
    # that could be lost; while it lasted it was identity-label-missing's
    lost = [k for k in gone if device_id(k) not in alive and inv.gpu(k).node]
    out = []
    nodes_now = {_node(k) for k in reporting}
    by_node: dict[tuple[str, str], list[tuple]] = defaultdict(list)
    for k in lost:
        by_node[_node(k)].append(k)
    for pair, keys in sorted(by_node.items()):
        last = max((t for m in inv.last_seen.values() for k, t in m.items() if k in keys), default=None)
        when = f"last seen {utc(last)} ({ago(ctx.now - last)})" if last else "seen earlier"
        gpus = [inv.gpu(k) for k in keys]
        node, node_labels = gpus[0].where, gpus[0].node_labels(ctx.labels)
        if pair in nodes_now:
            out.append(Finding("gpu-lost", "error", f"{node}", f"{gpu_count(keys)} GPU(s) of node {node} report nothing now "
                               f"while the node reports other GPUs; {when}: {gpu_list(gpus)}", hints.GPU_LOST,
                               labels=(("job", ctx.job),) + node_labels, case=case))
        else:
            out.append(Finding("node-lost", "warning", f"{node}", f"node {node} ({gpu_count(keys)} GPUs) reports nothing now "
                               f"and its target is not listed as down; {when}", "a node removed on purpose is fine; "
                               "otherwise check that the exporter pod still runs there (DaemonSet tolerations, node "
                               "labels)", labels=(("job", ctx.job),) + node_labels, case=case))
    return out


def _identity(ctx: Context, inv: Inventory) -> list[Finding]:
    """Series that carry the other spelling of the node/UUID label, or none at all."""
    case = f"{CHECK}/identity-labels"
    lab = ctx.labels
    by_target: dict[tuple[str, str], set[str]] = defaultdict(set)
    for k in inv.reporting:
        g = inv.gpu(k)
        inst = inv.instance(k)
        if g.node_label != lab.node:
            by_target[(inst, "node")].add(g.node)
        if g.uuid_label != lab.gpu:
            by_target[(inst, "uuid")].add(g.uuid)
    out = []
    lacking = {which for (_, which), values in by_target.items() if not any(values)}
    carried = _uuid_like(ctx) if "uuid" in lacking else []
    node_like = _node_like(ctx) if "node" in lacking else []
    for (inst, which), values in sorted(by_target.items()):
        want = lab.node if which == "node" else lab.gpu
        other = other_spelling(want)
        if any(values):
            out.append(Finding("identity-label-renamed", "error", inst,
                               f"series of target {inst} carry `{other}` instead of `{want}` "
                               f"({redact.clip(', '.join(sorted(values)), 200)}); rules and dashboards keyed on `{want}` do not see them",
                               hints.RENAMED if which == "node" else hints.LEGACY,
                               labels=(("instance", inst), ("job", ctx.job)), case=case))
            continue
        # the other spelling only where exporters really use it (Hostname/hostname, UUID/uuid):
        # for a label of the user's own naming it is noise
        names = f"neither `{want}` nor `{other}`" if want in _SPELLINGS else f"no `{want}` label"
        hint = "check relabeling (labeldrop) in the scrape config and the exporter's flags"
        msg = f"series of target {inst} have {names}: GPUs cannot be told apart"
        if which == "uuid" and carried:
            listed = ", ".join(f"`{name}`" for name in carried)
            msg += f"; they carry {listed} with GPU UUIDs (GPU-…/MIG-…)"
            hint = f"set exporter.labels.gpu to {listed.split(', ')[0]} in the spec, or {hint}"
        if which == "node":
            named = f" (they carry {', '.join(f'`{name}`' for name in node_like)})" if node_like else ""
            hint = (f"set exporter.labels.node in the spec to the label that names the node on your series{named} "
                    f"and re-render, or {hint}")
        out.append(Finding("identity-label-missing", "error", inst, msg, hint,
                           labels=(("instance", inst), ("job", ctx.job)), case=case))
    return out


#: the identity label names dcgm-exporter versions really spell two ways (NVIDIA/dcgm-exporter#655,
#: the 1.x ``uuid``)
_SPELLINGS = {"Hostname", "hostname", "UUID", "uuid"}
#: a GPU or MIG UUID as NVML writes it (``GPU-6f2e...``, ``MIG-4a1c...``)
_UUID_VALUE = ("GPU-", "MIG-")


def _uuid_like(ctx: Context) -> list[str]:
    """Label names whose values look like GPU UUIDs on a series of the job that lacks the spec's
    UUID label (both spellings): what to set ``exporter.labels.gpu`` to. One instant query for one
    series (``topk(1, ...)``), asked only when some target lacks the label; [] when it fails."""
    labels = _one_series_lacking(ctx, ctx.labels.gpu, "uuid-like")
    return sorted(k for k, v in labels.items() if isinstance(v, str) and v.startswith(_UUID_VALUE))


#: labels of a dcgm-exporter series that never name the node (its GPU, model, driver and XID
#: labels, Prometheus' own), besides the spec's other identity labels and the volatile ones
_NOT_NODE = {"__name__", "job", "UUID", "uuid", "gpu", "device", "pci_bus_id", "modelName", "DCGM_FI_DRIVER_VERSION",
             "GPU_I_ID", "GPU_I_PROFILE", "err_code", "err_msg"}


def _node_like(ctx: Context) -> list[str]:
    """Label names on a series of the job that lacks the spec's node label (both spellings) that
    may name the node (``Hostname``, a relabelled ``kubernetes_node``, ...): what to set
    ``exporter.labels.node`` to. One instant query, asked only when some target lacks the label."""
    lab = ctx.labels
    skip = _NOT_NODE | set(VOLATILE_LABELS) | {lab.gpu, lab.gpu_index, lab.mig_instance, lab.model,
                                               lab.driver_version, lab.cluster}
    labels = _one_series_lacking(ctx, lab.node, "node-like")
    return sorted(k for k, v in labels.items() if k not in skip and not k.startswith("exported_") and v)


def _one_series_lacking(ctx: Context, label: str, key: str) -> dict:
    """The labels of one series of the job's first tracked metric carried now without ``label``
    (either spelling); {} when there is none or the query fails."""
    metric = ctx.spec.tracked_metrics[0].name if ctx.spec.tracked_metrics else ""
    if not metric:
        return {}
    recent = format_duration(3 * max(1.0, ctx.scrape_interval))
    sel = ctx.sel(metric, matcher(label, ""), matcher(other_spelling(label), ""))
    ans = ctx.queries_at_now({key: f"topk(1, last_over_time({sel}[{recent}]))"})[key]
    if isinstance(ans, PromError) or not ans.data:
        return {}
    return ans.data[0]["metric"]
