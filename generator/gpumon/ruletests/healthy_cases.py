"""A healthy fleet: every alert stays quiet, through the longest window in the spec. The sparse
XID field is absent on every GPU (NVIDIA/DCGM#227, it only exists after an event) and nothing fires."""

from __future__ import annotations

from ..promqltext import matcher
from ..rules import kubernetes, names
from ..rules.model import Rule
from ..spec import Spec
from . import fleet
from .fleet import Gpu, add_gpu, add_target, as_token, steps
from .model import Scenario, selector, test_step
from .series import MISSING, STALE, Token


def checked_alerts(spec: Spec, rules: list[Rule]) -> list[str]:
    """Alert names a healthy fleet asserts quiet: all of ``rules`` (the spec's built rules) but the
    kubernetes group's, whose inputs (kube-state-metrics series) these scenarios do not model yet."""
    kube = {r.alert for r in kubernetes.rules(spec) if r.alert}
    return sorted({r.alert for r in rules if r.alert} - kube)


def _hold(rules: list[Rule], step: float) -> int:
    """The longest ``for`` of any alerting rule, in steps."""
    return max([steps(r.for_ or 0, step) for r in rules if r.alert] + [0])


def _windows(spec: Spec, step: float) -> list[int]:
    """The history windows of the rules, in steps: gap window, inventory lookback, flapping
    window, frozen window (at least 10 collect intervals, as generator/gpumon/rules/values.py renders it)."""
    a = spec.alerts
    frozen = max(a.frozen_window, 10 * spec.exporter.collect_interval)
    return [steps(w, step) for w in (a.gap_window, a.inventory_lookback, a.flapping_window, frozen)]


def scenarios(spec: Spec, rules: list[Rule]) -> list[Scenario]:
    """A healthy fleet with every required and optional field and no sparse field, as one test
    group: an exporter pod replaced (nodes 1-2), the fleet running past every window before a node
    joins it (nodes 3-4, node 5 joins), and workload labels changing (nodes 6-7). ``rules`` are the
    spec's built rules.

    The three share one group because they only assert quiet and their nodes never meet (a node's
    alerts name it; the fleet-wide ones must stay quiet through all three): promtool evaluates every
    rule at every step of every group, so a group's steps are what its test costs."""
    step = test_step(spec)
    length = max(pod_replaced_length(spec, rules, step), node_joined_length(spec, rules, step),
                 workload_labels_length(spec, rules, step))
    sc = Scenario("healthy fleet: an exporter pod replaced (nodes 1-2, two steps of overlap), sparse XID absent "
                  "then a node joins (nodes 3-5; first scrape empty, fields arrive over two scrapes), workload "
                  "labels change (nodes 6-7; honor_labels false: exported_pod/exported_namespace/exported_container; "
                  "true: pod/namespace/container): no alert fires, coverage and sample ratios stay 1", length, step)
    pod_replaced(spec, rules, sc, first_node=1)
    node_joined(spec, rules, sc, first_node=3)
    workload_labels(spec, rules, sc, first_node=6)
    return [sc]


#: the step at which :func:`pod_replaced` starts the new pod
_SWAP = 4


def pod_replaced_length(spec: Spec, rules: list[Rule], step: float) -> int:
    """Steps :func:`pod_replaced` needs: the swap, a gap window and the longest ``for`` after it."""
    return _SWAP + steps(spec.alerts.gap_window, step) + _hold(rules, step) + 4


def pod_replaced(spec: Spec, rules: list[Rule], sc: Scenario, first_node: int) -> None:
    """A DaemonSet rolling update on nodes ``first_node`` and the next: the second node's exporter
    pod is replaced and comes back under a new address (``instance``); old and new pod are both
    scraped for two steps. Nothing fires, and field coverage stays 1 (each GPU counted once) during
    the overlap."""
    step, length, swap = sc.step, sc.length, _SWAP
    hold = _hold(rules, step)
    moved = first_node + 1
    old_gpus, new_gpus = fleet.gpus(2, 2, first_node=first_node), []
    for g in old_gpus:
        if g.node == fleet.node_name(moved):
            new_gpus.append(Gpu(g.node, g.index, g.uuid, f"10.0.1.{moved}:{fleet.EXPORTER_PORT}"))
    for inst in sorted({g.instance for g in old_gpus}):
        up = sc.const(1) if inst != fleet.instance_of(moved) else [1] * (swap + 2) + [STALE]
        add_target(sc, spec, inst, up=up)
    add_target(sc, spec, new_gpus[0].instance, up=["_"] * swap + [1] * (length - swap))
    for g in old_gpus:
        over = None
        if g.instance == fleet.instance_of(moved):
            over = {m.name: fleet.lost_from(fleet.healthy(m, length, step), swap + 2) for m in spec.tracked_metrics}
        add_gpu(sc, spec, g, spec.tracked_metrics, over)
    for g in new_gpus:
        add_gpu(sc, spec, g, spec.tracked_metrics,
                {m.name: ["_"] * swap + fleet.healthy(m, length, step)[swap:] for m in spec.tracked_metrics})
    names_ = checked_alerts(spec, rules)
    for at in sorted({swap + 1, swap + 3, swap + hold + 2, length - 2}):
        sc.quiet(at, *names_)
    if spec.required_metrics:
        m = spec.required_metrics[0]
        job = fleet.fleet_labels(spec)
        cov = f'{names.COVERAGE}{{{matcher(names.FIELD_LABEL, m.name)}}}'
        sc.expect_expr(swap + 1, cov, [(selector(names.COVERAGE, {**job, names.FIELD_LABEL: m.name}), 1)])


def _joined_at(spec: Spec, rules: list[Rule], step: float) -> tuple[int, list[int], list[int]]:
    """:func:`node_joined`'s join step, the steps after the first windows and after the join."""
    hold, windows = _hold(rules, step), _windows(spec, step)
    join = max(windows) + 2
    settled = sorted({hold + 2} | {w + hold + 2 for w in windows})
    after = sorted({join + w + hold + 2 for w in windows})
    return join, settled, after


def node_joined_length(spec: Spec, rules: list[Rule], step: float) -> int:
    """Steps :func:`node_joined` needs: every window twice, the longest ``for`` after each."""
    return _joined_at(spec, rules, step)[2][-1] + 2


def node_joined(spec: Spec, rules: list[Rule], sc: Scenario, first_node: int) -> None:
    """Nodes ``first_node`` and the next (2 GPUs each) run past every window (gap window, inventory
    lookback, flapping, frozen) with the sparse XID field absent on every GPU (NVIDIA/DCGM#227: it
    only exists after an event); nothing fires one longest ``for`` after each window. Then a third
    node joins: its exporter's first scrape is empty (dcgm-exporter serves an empty page while it
    initialises), the required fields appear one step later, the optional ones another step later
    (issue 2: "a node that joined a minute ago"). Nothing fires at any step of the longest ``for``
    after its first scrape, nor one longest ``for`` after each window."""
    step, length = sc.step, sc.length
    hold = _hold(rules, step)
    join, settled, after = _joined_at(spec, rules, step)
    old, new = fleet.gpus(2, 2, first_node=first_node), fleet.gpus(1, 2, first_node=first_node + 2)
    for inst in sorted({g.instance for g in old}):
        add_target(sc, spec, inst)
    for g in old:
        add_gpu(sc, spec, g, spec.tracked_metrics)
    before = [MISSING] * join
    live = length - join
    add_target(sc, spec, new[0].instance, up=before + [1] * live,
               samples_scraped=before + [0] + [120] * (live - 1),
               duration=before + [as_token(round(spec.exporter.scrape_timeout * 0.1, 3))] * live)
    for g in new:
        over = {}
        for m in spec.tracked_metrics:
            first = join + (1 if m.presence == "required" else 2)
            over[m.name] = [MISSING] * first + fleet.healthy(m, length, step)[first:]
        add_gpu(sc, spec, g, spec.tracked_metrics, over)
    names_ = checked_alerts(spec, rules)
    for at in sorted(set(settled) | set(range(join, join + hold + 3)) | set(after)):
        sc.quiet(at, *names_)


def _exporter_pod(node: int) -> dict[str, str]:
    """Target labels Kubernetes service discovery (ServiceMonitor) puts on every series of the
    exporter pod of node ``node``."""
    return {"namespace": "gpu-operator", "pod": f"nvidia-dcgm-exporter-{node:05x}",
            "container": "nvidia-dcgm-exporter"}


def _workload(name: str | None, honor: bool, node: int) -> dict[str, str]:
    """The workload labels one GPU's series carry while pod ``name`` (None: no pod) uses it.
    dcgm-exporter exposes ``pod``/``namespace``/``container``; with ``honor_labels: false``
    Prometheus renames them ``exported_*`` and keeps the exporter pod's target labels; with
    ``honor_labels: true`` the exposed values replace the target labels (prometheus/prometheus#7887)."""
    target = _exporter_pod(node)
    if name is None:
        return target
    exposed = {"namespace": "ml-team", "pod": name, "container": "trainer"}
    if honor:
        return exposed
    return {**target, **{f"exported_{k}": v for k, v in exposed.items()}}


def split_series(samples: list[Token], phases: list[tuple[int, int]], count: int) -> list[list[Token]]:
    """Distribute one GPU field's ``samples`` over ``count`` label sets: from each phase's start
    step the samples go to that phase's label set (index); a label set that stops receiving them
    goes ``stale`` at that step, as when a series vanishes from a successful scrape.

    Args:
        samples: one token per step.
        phases: (start step, label-set index), starts ascending, the first at 0.
    Returns:
        ``count`` token lists (trailing missing samples removed)."""
    owner = [0] * len(samples)
    for (start, idx), (end, _) in zip(phases, phases[1:] + [(len(samples), 0)]):
        owner[start:end] = [idx] * (end - start)
    out = []
    for idx in range(count):
        toks: list[Token] = []
        for i, v in enumerate(samples):
            if owner[i] == idx:
                toks.append(v)
            elif i and owner[i - 1] == idx:
                toks.append(STALE)
            else:
                toks.append(MISSING)
        while toks and toks[-1] == MISSING:
            toks.pop()
        out.append(toks)
    return out


def _changes(spec: Spec, step: float) -> tuple[int, int, int]:
    """The steps at which :func:`workload_labels` changes the labels: after a gap window, then
    every three steps."""
    c1 = steps(spec.alerts.gap_window, step) + 2
    return c1, c1 + 3, c1 + 6


def workload_labels_length(spec: Spec, rules: list[Rule], step: float) -> int:
    """Steps :func:`workload_labels` needs: the changes, then the windows that read a GPU's series
    (gap ratio, frozen increase; the inventory lookback only reads the label-free inventory) and
    the longest ``for``."""
    windows = _windows(spec, step)
    return _changes(spec, step)[2] + max(steps(spec.alerts.gap_window, step), windows[3]) + _hold(rules, step) + 4


def workload_labels(spec: Spec, rules: list[Rule], sc: Scenario, first_node: int) -> None:
    """One GPU of each of nodes ``first_node`` and the next changes its workload labels (issue 2):
    no pod, then pod ``train-a``, then ``train-b``, then no pod again, after the fleet ran a gap
    window (so the gap alert is armed while its window holds every change); the first node's as
    ``honor_labels: false`` renders them (``exported_*`` beside the exporter pod's target labels),
    the second's as ``honor_labels: true``. Old series go stale and new ones continue the same
    readings (the energy counter keeps counting). Nothing fires (presence, gaps, frozen counter,
    thresholds), field coverage and the GPUs' sample ratios stay 1."""
    step, length = sc.step, sc.length
    hold, windows = _hold(rules, step), _windows(spec, step)
    c1, c2, c3 = _changes(spec, step)
    gpus = fleet.gpus(2, 2, first_node=first_node)
    node_of = {fleet.instance_of(n): n for n in (first_node, first_node + 1)}
    victims = {gpus[1]: False, gpus[3]: True}   # the second GPU of each node: honor_labels
    for inst in sorted({g.instance for g in gpus}):
        add_target(sc, spec, inst, extra=_exporter_pod(node_of[inst]))
    for g in gpus:
        if g not in victims:
            add_gpu(sc, spec, g, spec.tracked_metrics, extra=_exporter_pod(node_of[g.instance]))
    phases = [(0, 0), (c1, 1), (c2, 2), (c3, 0)]
    for victim, honor in victims.items():
        n = node_of[victim.instance]
        label_sets = [_workload(None, honor, n), _workload("train-a", honor, n), _workload("train-b", honor, n)]
        for m in spec.tracked_metrics:
            parts = split_series(fleet.healthy(m, length, step), phases, len(label_sets))
            for labels, toks in zip(label_sets, parts):
                sc.add(m.name, {**fleet.series_labels(spec, victim), **labels}, toks)
    names_ = checked_alerts(spec, rules)
    for at in sorted({c1, c1 + 1, c2, c2 + 1, c3, c3 + 1, c1 + hold + 2, c3 + hold + 2,
                      *(c3 + w + 1 for w in windows if c3 + w + 1 < length - 2), length - 2}):
        sc.quiet(at, *names_)
    if spec.required_metrics:
        m = spec.required_metrics[0]
        job = fleet.fleet_labels(spec)
        cov = f'{names.COVERAGE}{{{matcher(names.FIELD_LABEL, m.name)}}}'
        ratio = names.sample_ratio(fleet.fmt_seconds(spec.alerts.gap_window))
        for at in (c1, c3 + 1):
            sc.expect_expr(at, cov, [(selector(names.COVERAGE, {**job, names.FIELD_LABEL: m.name}), 1)])
        # the ratio is recorded only below 1 (issue 16): no series = no gap across the churn
        for victim in victims:
            ids = {**fleet.gpu_ids(spec, victim, instance=True), names.FIELD_LABEL: m.name}
            sc.expect_expr(c3 + 1, selector(ratio, ids), [])
