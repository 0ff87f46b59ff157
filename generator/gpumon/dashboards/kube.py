"""The layer under the metrics on the dashboards (spec section ``kubernetes``, docs/kubernetes.md):
the monitoring-health row "Exporter and inventory" and the fleet overview's expected-GPU stats.

Expected, reporting and missing GPUs come from the kubernetes recording rules
(``gpumon.rules.names``); exporter pods, restarts and OOM kills from kube-state-metrics through
the selectors of ``gpumon.rules.kubernetes`` (so no series name is spelled twice). Without
kube-state-metrics (a static expectation: bare metal, Slurm) only the expected-vs-reported panels
are shown: there are no pods to count.
"""

from __future__ import annotations

from ..promqltext import matcher
from ..durations import format_duration
from ..spec.kube import Kubernetes
from ..rules import kubernetes as rk, names
from ..rules.promql import by, dur, node_ids, num
from ..spec import Spec
from . import base, queries as q
from .panels import Board, Query, stat_panel, table_panel, threshold_steps, timeseries_panel
from .queries import FLEET
from .units import COUNT, NONE

ROW = "Exporter and inventory"
_MISSING_STEPS = [(None, "green"), (1, "red")]


def _where(spec: Spec) -> str:
    """Extra matcher for kube-state-metrics selectors: the chosen clusters (docs/kubernetes.md: its
    series carry the cluster label too when ``exporter.labels.cluster`` is set)."""
    c = spec.exporter.labels.cluster
    return f'{c}=~"$cluster"' if c else ""


def _cluster(spec: Spec) -> tuple[str, ...]:
    c = spec.exporter.labels.cluster
    return (c,) if c else ()


def _one_per_cluster(spec: Spec, selector: str) -> str:
    """A DaemonSet status value: one per cluster (HA kube-state-metrics replicas report it twice),
    summed over the chosen clusters."""
    if not spec.exporter.labels.cluster:
        return f"max({selector})"
    return f"sum(max by ({spec.exporter.labels.cluster}) ({selector}))"


def _total(spec: Spec, job_rule: str, node_rule: str) -> str:
    """Fleet total of a per-job kubernetes recording rule. The per-job rules carry no cluster
    label, so with a cluster label the per-node rule is summed instead (narrowed by ``$cluster``)."""
    if not spec.exporter.labels.cluster:
        return f'sum({job_rule}{{{matcher("job", spec.exporter.job)}}})'
    return f"sum({q.sel(spec, node_rule, FLEET)})"


def _node_legend(spec: Spec) -> str:
    lab = spec.exporter.labels
    text = f"{{{{{lab.node}}}}}"
    return f"{{{{{lab.cluster}}}}} {text}" if lab.cluster else text


def expected_stats(spec: Spec, fleet: bool = False) -> list:
    """Stat panels "GPUs expected" and "GPUs missing" (fleet overview and the health row);
    ``fleet`` adds a note that the fleet's "GPUs reporting" counts MIG instances."""
    expected = _total(spec, names.GPUS_EXPECTED, names.NODE_GPUS_EXPECTED)
    missing = _total(spec, names.GPUS_MISSING, names.NODE_GPUS_MISSING)
    note = " GPUs reporting counts MIG instances separately." if fleet else ""
    return [
        stat_panel("GPUs expected", [Query(expected, "expected")], COUNT,
                   description="Physical GPUs the nodes should report (node GPU capacity / units_per_gpu, or "
                               "the static expectation; gpumon kubernetes recording rules). MIG instances of "
                               "one GPU count once." + note,
                   no_value=base.no_value(spec, "No node is expected to have GPUs: no GPU capacity (device "
                                          "plugin, kube-state-metrics) or an empty static expectation.",
                                          "GpuNodeCapacityMissing"),
                   links=base.runbook_links(spec, "GpuNodeCapacityMissing")),
        stat_panel("GPUs missing", [Query(missing, "missing")], COUNT,
                   description="Expected minus reporting physical GPUs, summed over nodes (a silent node "
                               "counts all its GPUs); alerts GpuNodeGpusMissing and GpuNodeExporterMissing.",
                   thresholds=threshold_steps(steps=_MISSING_STEPS),
                   no_value=base.no_value(spec, "No node is expected to have GPUs.", "GpuNodeGpusMissing"),
                   links=base.runbook_links(spec, "GpuNodeGpusMissing", "GpuNodeExporterMissing")),
    ]


def _exporter_missing(spec: Spec, k: Kubernetes) -> str:
    """GpuNodeExporterMissing's expression evaluated now (no ``for``), narrowed to the exporter
    job (and chosen clusters); labels: job, node label, ``reason``; value: GPUs expected."""
    return (f"(\n{rk.node_exporter_missing(spec, k).expr}\n)\n"
            f"and on ({by(node_ids(spec))})\n{q.sel(spec, names.NODE_GPUS_EXPECTED, FLEET)}")


def _pod_stats(spec: Spec, k: Kubernetes, b: Board) -> None:
    """DaemonSet ready vs desired, restarts and OOM kills of the exporter containers."""
    w = _where(spec)
    desired = _one_per_cluster(spec, rk.daemonset_status(k, "desired_number_scheduled", w))
    ready = _one_per_cluster(spec, rk.daemonset_status(k, "number_ready", w))
    ds = f"{k.exporter.namespace}/{k.exporter.daemonset}"
    missing_ds = base.no_value(spec, f"kube-state-metrics (job {k.ksm_job}) has no series for DaemonSet {ds}: "
                               "wrong namespace/name in the spec, or kube-state-metrics not scraped with "
                               "honor_labels.", "GpuExporterDaemonSetMissing")
    b.add(stat_panel("Exporter pods ready / desired", [Query(ready, "ready"), Query(desired, "desired")], COUNT,
                     description=f"DaemonSet {ds}: nodes running a ready exporter pod, and nodes that should "
                                 "(kube_daemonset_status_number_ready / desired_number_scheduled).",
                     thresholds=threshold_steps(steps=[(None, "blue")]), no_value=missing_ds,
                     links=base.runbook_links(spec, "GpuExporterDaemonSetNotReady")), 6, 4)
    b.add(stat_panel("Exporter pods not ready", [Query(f"clamp_min({desired} - {ready}, 0)", "not ready")], COUNT,
                     description="Desired minus ready exporter pods; the GpuExporterDaemonSetNotReady alert "
                                 f"fires after {format_duration(k.daemonset_for)}.",
                     thresholds=threshold_steps(steps=_MISSING_STEPS), no_value=missing_ds,
                     links=base.runbook_links(spec, "GpuExporterDaemonSetNotReady")), 6, 4)
    window = format_duration(k.restart_window)
    # max by: HA kube-state-metrics replicas serve the same counter twice
    restarts = rk.restarts_over(k, dur(k.restart_window), w)
    restarts = f"sum(max by ({by(_cluster(spec) + ('namespace', 'pod', 'container'))}) ({restarts})) or vector(0)"
    b.add(stat_panel(f"Exporter restarts in {window}", [Query(restarts, "restarts")], COUNT,
                     description=f"Restarts of the exporter containers within restart_window ({window}); "
                                 f"GpuExporterPodRestarting fires for a container above {num(k.max_restarts)}.",
                     thresholds=threshold_steps(steps=[(None, "green"), (k.max_restarts + 1, "orange")]),
                     links=base.runbook_links(spec, "GpuExporterPodRestarting")), 6, 4)
    ooms = rk.oom_kills_in(spec, k, k.restart_window, w)
    ooms = f"count(group by ({by(_cluster(spec) + ('namespace', 'pod', 'container'))}) (\n{ooms}\n)) or vector(0)"
    b.add(stat_panel(f"Exporter OOM kills in {window}", [Query(ooms, "OOM killed")], COUNT,
                     description="Exporter containers last terminated OOMKilled that restarted within "
                                 f"{window} (alert GpuExporterOOMKilled): exporter memory growth shows up as "
                                 "periodic gaps on a whole node.",
                     thresholds=threshold_steps(steps=_MISSING_STEPS),
                     links=base.runbook_links(spec, "GpuExporterOOMKilled")), 6, 4)


def _restarts_per_node(spec: Spec, k: Kubernetes, b: Board) -> None:
    """Exporter container restarts per interval, by node (pod joined to its node via kube_pod_info)."""
    w = _where(spec)
    lab = spec.exporter.labels
    keys = by(_cluster(spec) + ("namespace", "pod"))
    # max by: HA kube-state-metrics replicas serve the same counter twice
    restarts = f"max by ({keys}, container) ({rk.restarts_over(k, q.RATE_WINDOW, w)})"
    per_node = rk.to_exporter_node(
        k, f"{restarts}\n  * on ({keys}) group_left ({k.join.kube_label})\n  {rk.pod_nodes(spec, k, w)}")
    b.add(timeseries_panel(
        "Exporter restarts per node", [Query(f"sum by ({by(lab.node_identity)}) (\n{per_node}\n) > 0",
                                             _node_legend(spec))], COUNT,
        description="Restarts of the exporter containers per interval, by the node the pod runs on "
                    "(kube_pod_info). Regular restarts (e.g. daily OOM kills) leave periodic gaps in every "
                    "field of that node.",
        no_value=base.no_value(spec, "No exporter container restarted in this time range.",
                               "GpuExporterPodRestarting"),
        min_interval=format_duration(spec.exporter.min_rate_window),
        links=base.runbook_links(spec, "GpuExporterPodRestarting", "GpuExporterOOMKilled"), bars=True), 12, 8)


def _per_node_table(spec: Spec, k: Kubernetes, b: Board) -> None:
    cols = [("expected", names.NODE_GPUS_EXPECTED), ("reporting", names.NODE_GPU_DEVICES_REPORTING),
            ("missing", names.NODE_GPUS_MISSING)]
    if k.ksm_job is not None:
        cols += [("exporter up", names.NODE_EXPORTER_UP), ("exporter pods", names.NODE_EXPORTER_PODS)]
    queries = [Query(q.sel(spec, rule, FLEET), instant=True, table=True) for _, rule in cols]
    rename = {f"Value #{chr(ord('A') + i)}": title for i, (title, _) in enumerate(cols)}
    source = "node GPU capacity" if k.expected_source == "capacity" else "the static expectation"
    desc = (f"Per node: physical GPUs expected ({source}), reporting now (distinct UUIDs, MIG instances "
            "once) and missing")
    if k.ksm_job is not None:
        desc += ("; the best up of the exporter targets on the node (empty: no target) and its Running "
                 "exporter pods")
    desc += ". Largest missing first; a row with reporting but no expected value is a node without GPU " \
            "capacity. Each row links to the GPU detail dashboard."
    b.add(base.link_rows_to_detail(spec, table_panel(
        "Expected vs reported GPUs per node", queries, NONE, description=desc,
        no_value=base.no_value(spec, "No node expects or reports GPUs.", "GpuNodeGpusMissing"),
        links=base.runbook_links(spec, "GpuNodeGpusMissing", "GpuNodeCapacityMissing"),
        hide=("Time", "__name__", "job"), merge=True, rename=rename, sort_desc="missing"), with_gpu=False), 12, 8)


def _without_exporter(spec: Spec, k: Kubernetes, b: Board) -> None:
    """Nodes that should have GPUs but report none and have no exporter target, with the reason
    label of GpuNodeExporterMissing; the alert's expression, evaluated now (no ``for``)."""
    expr = _exporter_missing(spec, k)
    reasons = ("no_exporter_pod (DaemonSet nodeSelector, taints, pod Pending) or pod_not_scraped "
               "(ServiceMonitor selector/namespace)" if k.ksm_job is not None else
               "no_gpu_series (target down or gone)")
    b.add(base.link_rows_to_detail(spec, table_panel(
        "GPU nodes without an exporter target", [Query(expr, instant=True, table=True)], COUNT,
        description="Nodes expected to have GPUs that report none and have no exporter target up, now "
                    f"(alert GpuNodeExporterMissing after its for). Column reason: {reasons}; value: GPUs "
                    "expected.",
        no_value=base.no_value(spec, "Every node expected to have GPUs has an exporter reporting them.",
                               "GpuNodeExporterMissing"),
        links=base.runbook_links(spec, "GpuNodeExporterMissing"), hide=("Time", "__name__", "job"),
        rename={"Value": "expected"}), with_gpu=False), 12, 8)


def exporter_row(spec: Spec, k: Kubernetes, b: Board) -> None:
    """The monitoring-health row "Exporter and inventory": expected vs reported GPUs, nodes without
    an exporter, and (with kube-state-metrics only) the exporter DaemonSet, restarts and OOM kills."""
    b.row(ROW)
    for panel in expected_stats(spec):
        b.add(panel, 6, 4)
    reporting = _total(spec, names.GPU_DEVICES_REPORTING, names.NODE_GPU_DEVICES_REPORTING)
    b.add(stat_panel("Physical GPUs reporting", [Query(reporting, "reporting")], COUNT,
                     description="Distinct GPU UUIDs reporting now (MIG instances of one GPU count once).",
                     no_value=base.no_value(spec, "No GPU reports.", "GpuExporterTargetMissing")), 6, 4)
    b.add(stat_panel("Nodes without an exporter target",
                     [Query(f"count(\n{_exporter_missing(spec, k)}\n) or vector(0)", "nodes")], COUNT,
                     description="Nodes expected to have GPUs with no GPU reported and no exporter target up.",
                     thresholds=threshold_steps(steps=_MISSING_STEPS),
                     links=base.runbook_links(spec, "GpuNodeExporterMissing")), 6, 4)
    if k.ksm_job is not None:
        _pod_stats(spec, k, b)
    _per_node_table(spec, k, b)
    _without_exporter(spec, k, b)
    b.add(timeseries_panel(
        "Missing GPUs per node", [Query(f"{q.sel(spec, names.NODE_GPUS_MISSING, FLEET)} > 0", _node_legend(spec))],
        COUNT, description="Expected minus reporting physical GPUs, nodes with a gap only.",
        no_value=base.no_value(spec, "No node missed GPUs in this time range.", "GpuNodeGpusMissing"),
        links=base.runbook_links(spec, "GpuNodeGpusMissing", "GpuNodeExporterMissing"), min_val=0),
        12 if k.ksm_job is not None else 24, 8)
    if k.ksm_job is not None:
        _restarts_per_node(spec, k, b)
