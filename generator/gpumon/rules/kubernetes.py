"""The layer under the metrics: exporter pods, and how many GPUs each node should report.

Rendered only when the spec has a ``kubernetes`` section (:mod:`gpumon.spec.kube`). Series and label
names are kube-state-metrics' (docs/metrics/workload/pod-metrics.md, daemonset-metrics.md,
cluster/node-metrics.md): ``kube_node_status_capacity{node,resource,unit}``,
``kube_pod_info{namespace,pod,node,created_by_kind,created_by_name,...}``,
``kube_pod_status_phase{namespace,pod,phase}``,
``kube_pod_container_status_restarts_total{namespace,pod,container}``,
``kube_pod_container_status_last_terminated_reason{namespace,pod,container,reason}``,
``kube_daemonset_status_{desired_number_scheduled,number_ready,number_unavailable}{namespace,daemonset}``.

Everything per node is written in the exporter's terms (``job`` = the dcgm-exporter job, its node
label, ``cluster`` when set), so it lines up with ``job_node:gpumon_gpu_devices_reporting:count``.
``up`` has no node label: a target is tied to its node through its ``namespace``/``pod`` target
labels (set by ServiceMonitor/PodMonitor and the usual kubernetes_sd relabelling) and
``kube_pod_info``; a node that reports GPUs in the inventory has a target in any case, which keeps
static scrape configs (no pod label) from paging.

MIG and sharing: the expected count is of physical GPUs; the reported count is distinct ``UUID``s
(MIG instances carry their parent's UUID, so they count once). ``nvidia.com/gpu`` capacity counts
physical GPUs only without sharing: time-slicing/MPS multiply it by the replica count, MIG strategy
single makes it the number of MIG devices, MIG strategy mixed leaves MIG GPUs out of it (they are
``nvidia.com/mig-<profile>``). ``capacity.units_per_gpu`` divides the first two; use ``static`` for
mixed MIG (see docs/kubernetes.md).
"""

from __future__ import annotations

from ..promqltext import literal_replacement, quote
from ..durations import format_duration
from ..spec.kube import Kubernetes
from ..spec import Spec
from . import names
from .common import alert, record
from .model import Rule
from .promql import by, dur, node_ids, num, selector


def _cluster(spec: Spec) -> tuple[str, ...]:
    c = spec.exporter.labels.cluster
    return (c,) if c else ()


def _pod_keys(spec: Spec) -> str:
    """Labels that identify a pod across both worlds: ``cluster`` (when set), namespace, pod."""
    return by(_cluster(spec) + ("namespace", "pod"))


def _ksm(k: Kubernetes, metric: str, where: str = "", **matchers: str) -> str:
    """``metric{job="<kube-state-metrics job>",<matchers>}``; ``where`` is extra matcher text added
    as is (dashboards narrow by ``cluster=~"$cluster"``)."""
    sel = selector(metric, job=k.ksm_job, **matchers)
    return sel[:-1] + f",{where}}}" if where else sel


def _pods(k: Kubernetes, metric: str, where: str = "", **matchers: str) -> str:
    """``metric`` for the exporter pods (and container, when the spec names one)."""
    sel = _ksm(k, metric, where, namespace=k.exporter.namespace, **matchers)
    sel = sel[:-1] + f',pod=~{quote(k.exporter.pod_regex)}'
    if k.exporter.container and metric.startswith("kube_pod_container_"):
        sel += f',container={quote(k.exporter.container)}'
    return sel + "}"


def pods_selector(k: Kubernetes, metric: str) -> str:
    """The selector of kube-state-metrics' ``metric`` for the exporter pods (namespace, pod regex,
    container when the spec names one), e.g. for validate's pod-to-node map."""
    return _pods(k, metric)


def _to_exporter_node(k: Kubernetes, expr: str) -> str:
    """Write the kube-state-metrics node name into the exporter's node label (``node_join``)."""
    j = k.join
    return (f'label_replace(\n  {expr},\n  "{j.exporter_label}", {quote(j.replacement)}, '
            f'"{j.kube_label}", {quote(j.regex)}\n)')


def _set_job(spec: Spec, expr: str) -> str:
    return f'label_replace({expr}, "job", {literal_replacement(spec.exporter.job)}, "", "")'


def _node_matcher(k: Kubernetes) -> str:
    """Keep only node names the join regex maps (label_replace leaves the others unlabelled), and
    drop the empty node of a pod not scheduled yet."""
    if k.join.regex in ("(.*)", ".*", "(.+)", ".+"):
        return f'{k.join.kube_label}!=""'
    return f'{k.join.kube_label}=~{quote(k.join.regex)},{k.join.kube_label}!=""'


def hold(spec: Spec) -> float:
    """Seconds a kube-state-metrics reading is held while kube-state-metrics is not scraped: twice
    ``alerts.for``. A failed scrape marks every kube-state-metrics series stale at once, and its pod
    restarting (a large cluster's kube-state-metrics is often OOM-killed) leaves them gone for a
    minute or more: read at the instant, the expected GPUs, the exporter pods and the DaemonSet
    status vanish that long, every alert on them ends and pages again ``for`` later, two pages for
    one cause. While kube-state-metrics answers, the rules read the instant (a node that left the
    cluster is gone at once); while it does not, its last readings within this window."""
    return 2 * spec.alerts.for_


def _per_cluster(cluster: str, expr: str) -> str:
    """``group by (<cluster>) (expr)``, or ``group (expr)`` without a cluster label."""
    return f"group{f' by ({cluster})' if cluster else ''} ({expr})"


def _ksm_up(spec: Spec, cluster: str) -> str:
    """kube-state-metrics' last scrape succeeded (per cluster)."""
    return _per_cluster(cluster, f"{_ksm(spec.kubernetes, 'up')} == 1")


def _held(spec: Spec, sel: str) -> str:
    """``sel`` now, or while kube-state-metrics' last scrape failed (no ``up == 1`` of it, per
    cluster), its newest sample within :func:`hold` (range selections skip staleness markers)."""
    cluster = spec.exporter.labels.cluster or ""
    return (f"(\n  {sel}\n  or\n  (last_over_time({sel}[{dur(hold(spec))}]) unless on ({cluster}) "
            f"{_ksm_up(spec, cluster)})\n)")


def _ksm_seen(spec: Spec, k: Kubernetes) -> str:
    """One series per cluster (without a cluster label: one) whose kube-state-metrics was scraped
    successfully within :func:`hold`: alerts on what kube-state-metrics does *not* show need it."""
    return _per_cluster(spec.exporter.labels.cluster, f"max_over_time({_ksm(k, 'up')}[{dur(hold(spec))}]) == 1")


# --------------------------------------------------------------------------- recording rules


def expected_from_capacity(spec: Spec, k: Kubernetes) -> str:
    """``kube_node_status_capacity`` of the GPU resource / ``units_per_gpu``, per exporter node,
    held over a failed kube-state-metrics scrape (:func:`hold`). ``max by`` drops
    kube-state-metrics' own job/instance and de-duplicates HA replicas."""
    cap = _ksm(k, "kube_node_status_capacity", resource=k.resource, unit="integer")
    cap = _held(spec, cap[:-1] + "," + _node_matcher(k) + "}")
    expr = f"max by ({by(node_ids(spec))}) (\n  {_set_job(spec, _to_exporter_node(k, cap + ' > 0'))}\n)"
    if k.units_per_gpu != 1:
        expr = f"{expr}\n/ {k.units_per_gpu}"
    return expr


def expected_from_static(spec: Spec, k: Kubernetes) -> str:
    """Explicit nodes, then patterns in order, then the default, joined with ``or`` (which keeps
    the left side where both have the node, so earlier entries take precedence). Patterns and the
    default see nodes present in the inventory within ``alerts.inventory_lookback``."""
    lab = spec.exporter.labels
    parts = []
    for n in k.static.nodes:
        expr = _set_job(spec, f"vector({n.gpus})")
        expr = f'label_replace({expr}, "{lab.node}", {literal_replacement(n.name)}, "", "")'
        if lab.cluster:
            expr = f'label_replace({expr}, "{lab.cluster}", {literal_replacement(n.cluster)}, "", "")'
        parts.append(expr)
    lookback = dur(spec.alerts.inventory_lookback)
    nodes = by(node_ids(spec))
    for p in k.static.patterns:
        seen = f'{names.INVENTORY}{{{lab.node}=~{quote(p.match)}}}'
        parts.append(f"group by ({nodes}) (max_over_time({seen}[{lookback}])) * {p.gpus}")
    if k.static.default is not None:
        parts.append(f"group by ({nodes}) (max_over_time({names.INVENTORY}[{lookback}])) * {k.static.default}")
    return "\nor\n".join(parts) if parts else "vector(0) == 1"  # an empty static section expects nothing


def expected(spec: Spec, k: Kubernetes) -> list[Rule]:
    """Expected GPUs per node and per job, and the missing GPUs per node (0 when complete; a node
    reporting nothing counts all its GPUs as missing) and per job."""
    src = expected_from_static(spec, k) if k.expected_source == "static" else expected_from_capacity(spec, k)
    nodes = by(node_ids(spec))
    missing = (f"clamp_min(\n  {names.NODE_GPUS_EXPECTED}\n  - on ({nodes})\n"
               f"  ({names.NODE_GPU_DEVICES_REPORTING} or {names.NODE_GPUS_EXPECTED} * 0),\n  0\n)")
    return [
        record(names.NODE_GPUS_EXPECTED, src),
        record(names.GPUS_EXPECTED, f"sum by (job) ({names.NODE_GPUS_EXPECTED})"),
        record(names.NODE_GPUS_MISSING, missing),
        record(names.GPUS_MISSING, f"sum by (job) ({names.NODE_GPUS_MISSING})"),
    ]


def exporter_targets(spec: Spec, k: Kubernetes) -> list[Rule]:
    """Running exporter pods per node (kube_pod_info and kube_pod_status_phase: a Pending pod, or
    an evicted one whose object lingers, does not count) and the best ``up`` of the targets on each
    node (``up`` joined to kube_pod_info on namespace and pod). The ``max by`` steps de-duplicate:
    HA kube-state-metrics replicas, and a pod scraped through two endpoints of the job. The
    kube-state-metrics readings are held (:func:`hold`): a failed scrape of it must not flip a
    node's ``reason`` between a pod that exists and none."""
    keys = _pod_keys(spec)
    info = pod_nodes(spec, k, held=_held)
    running = f"max by ({keys}) ({_held(spec, _pods(k, 'kube_pod_status_phase', phase='Running'))}) == 1"
    pods = _set_job(spec, _to_exporter_node(k, f"{info}\n  and on ({keys})\n  {running}"))
    up = f"max by (job, {keys}) ({selector('up', job=spec.exporter.job)})"
    joined = f"{up}\n  * on ({keys}) group_left ({k.join.kube_label})\n  {info}"
    nodes = by(node_ids(spec))
    return [
        record(names.NODE_EXPORTER_PODS, f"count by ({nodes}) (\n  {pods}\n)"),
        record(names.NODE_EXPORTER_UP, f"max by ({nodes}) (\n  {_to_exporter_node(k, joined)}\n)"),
    ]


def pod_nodes(spec: Spec, k: Kubernetes, where: str = "", held=None) -> str:
    """One series per exporter pod scheduled on a node, labelled ``cluster`` (when set),
    ``namespace``, ``pod`` and kube-state-metrics' node label, value 1 (``max by`` de-duplicates HA
    kube-state-metrics replicas). Join it ``on (namespace, pod)`` to name a pod's node. ``where``:
    extra matcher text for the selector; ``held(spec, selector)``: what to read of it (the rules
    hold it over a failed scrape, dashboards read the instant)."""
    info = _pods(k, "kube_pod_info", where)
    info = info[:-1] + "," + _node_matcher(k) + "}"
    if held is not None:
        info = held(spec, info)
    return f"max by ({_pod_keys(spec)}, {k.join.kube_label}) ({info})"


def to_exporter_node(k: Kubernetes, expr: str) -> str:
    """``expr`` with the kube-state-metrics node name written into the exporter's node label
    (``node_join``), for dashboards and validate."""
    return _to_exporter_node(k, expr)


def daemonset_status(k: Kubernetes, field: str, where: str = "") -> str:
    """Selector of ``kube_daemonset_status_<field>`` (``desired_number_scheduled``,
    ``number_ready``, ``number_unavailable``) for the exporter DaemonSet; ``where``: extra matchers."""
    return _ksm(k, f"kube_daemonset_status_{field}", where, namespace=k.exporter.namespace,
                daemonset=k.exporter.daemonset)


# --------------------------------------------------------------------------- alerts


def node_exporter_missing(spec: Spec, k: Kubernetes) -> Rule:
    """A node that should have GPUs but has no exporter target and reports no GPU. With
    kube-state-metrics the ``reason`` label says whether an exporter pod exists on the node
    (``pod_not_scraped``: a Running pod, but the ServiceMonitor/scrape config misses it) or not
    (``no_exporter_pod``: DaemonSet nodeSelector/taints keep it off the node, or it is not Running,
    e.g. Pending on resources); statically ``no_gpu_series``."""
    nodes = by(node_ids(spec))
    base = f"{names.NODE_GPUS_EXPECTED} > 0\nunless on ({nodes}) {names.NODE_GPU_DEVICES_REPORTING}"
    if k.ksm_job is None:
        expr = f'label_replace(\n  {base},\n  "reason", "no_gpu_series", "", ""\n)'
    else:
        base = f"{base}\nunless on ({nodes}) {names.NODE_EXPORTER_UP}"
        expr = (f'label_replace(\n  ({base})\n  unless on ({nodes}) {names.NODE_EXPORTER_PODS},\n'
                f'  "reason", "no_exporter_pod", "", ""\n)\nor\n'
                f'label_replace(\n  ({base})\n  and on ({nodes}) {names.NODE_EXPORTER_PODS},\n'
                f'  "reason", "pod_not_scraped", "", ""\n)')
    return alert(spec, "GpuNodeExporterMissing", expr, severity="critical", for_=spec.alerts.for_,
                 kind="node_exporter_missing", source=k.expected_source, kube=k.ksm_job is not None)


def node_gpus_missing(spec: Spec, k: Kubernetes) -> Rule:
    """A node whose exporter works (target up, or GPUs reported) but reports fewer physical GPUs
    than expected: a GPU off the bus, a GPU DCGM cannot read, an exporter limited to the GPUs
    allocated to pods. Nodes without a working target are left to GpuNodeExporterMissing and
    GpuExporterDown, so one cause pages once."""
    nodes = by(node_ids(spec))
    works = names.NODE_GPU_DEVICES_REPORTING
    if k.ksm_job is not None:
        works = f"({names.NODE_EXPORTER_UP} == 1 or {names.NODE_GPU_DEVICES_REPORTING})"
    expr = f"{names.NODE_GPUS_MISSING} > 0\nand on ({nodes})\n{works}"
    return alert(spec, "GpuNodeGpusMissing", expr, severity="warning", for_=spec.alerts.for_,
                 kind="node_gpus_missing", source=k.expected_source)


def capacity_missing(spec: Spec, k: Kubernetes) -> Rule:
    """A node whose GPUs report telemetry while Kubernetes advertises none of the GPU resource:
    the device plugin is not running or not registered (the kubelet drops a resource whose plugin
    is gone), so pods cannot get these GPUs, and the capacity expectation does not see the node.
    Also fires for every node when ``node_join`` does not map node names to the exporter's.
    Not once kube-state-metrics has not been scraped for :func:`hold`."""
    nodes = by(node_ids(spec))
    # no capacity seen is no capacity only while kube-state-metrics answers: down for longer than
    # the hold, its readings are gone and every node would page here (GpuKubeStateMetricsMissing
    # is that one cause's page)
    cluster = spec.exporter.labels.cluster or ""
    expr = (f"(\n  {names.NODE_GPU_DEVICES_REPORTING}\n  unless on ({nodes})\n  {names.NODE_GPUS_EXPECTED}\n)\n"
            f"and on ({cluster})\n{_ksm_seen(spec, k)}")
    return alert(spec, "GpuNodeCapacityMissing", expr, severity="warning", for_=spec.alerts.for_,
                 kind="node_capacity_missing", resource=k.resource)


def restarts_in(k: Kubernetes, seconds: float) -> str:
    """Restarts of each exporter container within the last ``seconds``, as a whole number
    (labels: kube-state-metrics' job/instance, namespace, pod, uid, container). ``increase``
    extrapolates to the window edges (one restart can read 1.05), hence ``round``. For validate
    and dashboards as well as the alerts."""
    return restarts_over(k, dur(seconds))


def restarts_over(k: Kubernetes, window: str, where: str = "") -> str:
    """:func:`restarts_in` with a PromQL window as text, e.g. Grafana's ``$__rate_interval``;
    ``where``: extra matcher text for the selector."""
    return f"round(increase({_pods(k, 'kube_pod_container_status_restarts_total', where)}[{window}]))"


def oom_kills_in(spec: Spec, k: Kubernetes, seconds: float, where: str = "", held=None) -> str:
    """Exporter containers whose last termination was OOMKilled and that restarted within the last
    ``seconds`` (value 1; labels as :func:`restarts_in` plus ``reason``). ``where``: extra matcher
    text for both selectors; ``held``: as :func:`pod_nodes`'."""
    keys = by(_cluster(spec) + ("namespace", "pod", "container"))
    reason = _pods(k, "kube_pod_container_status_last_terminated_reason", where, reason="OOMKilled")
    if held is not None:
        reason = held(spec, reason)
    return f"{reason} == 1\nand on ({keys})\n{restarts_over(k, dur(seconds), where)} > 0"


def pod_restarting(spec: Spec, k: Kubernetes) -> Rule:
    """An exporter container restarted more than ``max_restarts`` times in ``restart_window``."""
    w = dur(k.restart_window)
    expr = f"{restarts_in(k, k.restart_window)} > {k.max_restarts}"
    return alert(spec, "GpuExporterPodRestarting", expr, own_namespace=True, severity="warning", for_=0.0,
                 kind="exporter_pod_restarting", window=w, max_restarts=num(k.max_restarts))


def oom_killed(spec: Spec, k: Kubernetes) -> Rule:
    """An exporter container whose last termination was OOMKilled and that restarted within
    ``restart_window``. ``last_terminated_reason`` stays 1 until the next termination, so the
    restart condition keeps a days-old kill from firing forever."""
    w = dur(k.restart_window)
    expr = oom_kills_in(spec, k, k.restart_window, held=_held)
    return alert(spec, "GpuExporterOOMKilled", expr, own_namespace=True, severity="warning", for_=0.0,
                 kind="exporter_oom_killed", window=w)


def daemonset_not_ready(spec: Spec, k: Kubernetes) -> Rule:
    """Exporter DaemonSet with fewer ready than desired pods, or unavailable pods, for
    ``daemonset_for`` (rolling updates make it briefly true); held over a failed kube-state-metrics
    scrape (:func:`hold`), which would start that wait again."""
    desired, ready, unavailable = (_held(spec, daemonset_status(k, f)) for f in
                                   ("desired_number_scheduled", "number_ready", "number_unavailable"))
    expr = f"(\n  {desired}\n  - {ready}\n) > 0\nor\n{unavailable} > 0"
    return alert(spec, "GpuExporterDaemonSetNotReady", expr, own_namespace=True, severity="warning", for_=k.daemonset_for,
                 kind="exporter_daemonset_not_ready", for_text=format_duration(k.daemonset_for))


def daemonset_missing(spec: Spec, k: Kubernetes) -> Rule:
    """kube-state-metrics is up but knows no exporter DaemonSet by that namespace and name
    (uninstalled, renamed, or the spec is wrong). ``absent`` keeps the equality matchers as labels.

    A failed kube-state-metrics scrape says nothing about the DaemonSet: while its last scrape
    failed, the alert keeps its own state (its ``ALERTS`` series, pending or firing), so a page
    goes on through the outage and a pending one keeps counting its ``for``, instead of ending
    and paging again ``for`` after kube-state-metrics returns."""
    name = "GpuExporterDaemonSetMissing"
    m = {"namespace": k.exporter.namespace, "daemonset": k.exporter.daemonset}
    ds = _ksm(k, 'kube_daemonset_status_desired_number_scheduled', **m)
    expr = f"absent({ds})\nand on ()\n{_ksm_up(spec, '')}"
    cluster = spec.exporter.labels.cluster
    if cluster:
        # per cluster (a global ruler sees several): absent() would keep only the matchers
        expr = (f'label_replace(label_replace(\n  {_ksm_up(spec, cluster)}\n'
                f"  unless on ({cluster})\n  group by ({cluster}) ({ds}),\n"
                f'  "namespace", {literal_replacement(k.exporter.namespace)}, "", ""), '
                f'"daemonset", {literal_replacement(k.exporter.daemonset)}, "", "")')
    own = selector("ALERTS", alertname=name, **m)
    keep = by((cluster or "job", "namespace", "daemonset"))
    expr += f"\nor\n(\n  group by ({keep}) ({own})\n  unless on ({cluster or ''})\n  {_ksm_up(spec, cluster or '')}\n)"
    return alert(spec, name, expr, own_namespace=True, severity="critical", for_=spec.alerts.for_,
                 kind="exporter_daemonset_missing", namespace=k.exporter.namespace, daemonset=k.exporter.daemonset)


def ksm_missing(spec: Spec, k: Kubernetes) -> Rule:
    """No successful kube-state-metrics scrape: every alert of this group is blind without it."""
    up = _ksm(k, "up")
    expr = f"absent({up})\nor\nmax by (job) ({up}) == 0"
    cluster = spec.exporter.labels.cluster
    if cluster:
        # per cluster: a cluster whose kube-state-metrics vanished (seen within the lookback) or is down
        keep = by(("job", cluster))
        seen = f"max_over_time({up}[{dur(spec.alerts.inventory_lookback)}])"
        expr = (f"group by ({keep}) ({seen})\nunless on ({keep})\ngroup by ({keep}) ({up})\n"
                f"or\nmax by ({keep}) ({up}) == 0\n"
                f"or\n(\n  absent({up})\n  unless on (job)\n  group by (job) ({seen})\n)")
    return alert(spec, "GpuKubeStateMetricsMissing", expr, severity="warning", for_=spec.alerts.for_,
                 kind="kube_state_metrics_missing", ksm_job=k.ksm_job)


def device_plugin_unhealthy(spec: Spec, k: Kubernetes) -> Rule:
    """Allocatable GPUs below capacity: the kubelet counts every device the NVIDIA device plugin
    registered in capacity but only the healthy ones in allocatable (kubelet devicemanager
    ``GetCapacity``), so the plugin marked GPUs unhealthy (its XID health check)."""
    m = {"resource": k.resource, "unit": "integer"}
    expr = (f"{_held(spec, _ksm(k, 'kube_node_status_allocatable', **m))}\n"
            f"< {_held(spec, _ksm(k, 'kube_node_status_capacity', **m))}")
    return alert(spec, "GpuDevicePluginUnhealthy", expr, severity="warning", for_=spec.alerts.for_,
                 kind="device_plugin_unhealthy", resource=k.resource)


def rules(spec: Spec) -> list[Rule]:
    """The kubernetes rule group's rules (recording rules first), or [] without the section."""
    k = spec.kubernetes
    if k is None:
        return []
    out = expected(spec, k)   # physical GPUs reporting: generator/gpumon/rules/inventory.py counts()
    if k.ksm_job is not None:
        out += exporter_targets(spec, k)
    out += [node_exporter_missing(spec, k), node_gpus_missing(spec, k)]
    if k.expected_source == "capacity":
        out.append(capacity_missing(spec, k))
    if k.ksm_job is not None:
        out += [pod_restarting(spec, k), oom_killed(spec, k), daemonset_not_ready(spec, k),
                daemonset_missing(spec, k), ksm_missing(spec, k), device_plugin_unhealthy(spec, k)]
    return out
