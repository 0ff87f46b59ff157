"""Scenarios for the kubernetes group's alerts (only with the spec's ``kubernetes`` section): a
healthy cluster keeps every one of them quiet, and each fires alone on its own cause.

kube-state-metrics series carry its label sets (kube-state-metrics ``docs/metrics``: node
capacity/allocatable with ``node``, ``resource``, ``unit``; pods with ``namespace``, ``pod``,
``uid``; containers add ``container``; DaemonSet status with ``namespace``, ``daemonset``). The
exporter targets carry the pod's ``namespace``/``pod`` as target labels, as a ServiceMonitor
writes them. Scenarios are generated only where the section can be modelled from the spec alone:
an identity ``node_join`` (kube-state-metrics' node name is the exporter's node label value) and
a pod name the spec's ``pod_regex`` accepts; the static expectation's explicit nodes.
"""

from __future__ import annotations

import math

from .. import re2check
from ..spec.kube import Kubernetes
from ..rules import kubernetes as krules
from ..rules.model import Rule
from ..spec import Spec
from . import fleet
from .fleet import add_gpu, add_target, node_ids, steps
from .model import Firing, Scenario, increase_value, test_step
from .series import MISSING, STALE

#: kube-state-metrics' own target
KSM_INSTANCE = "10.0.1.5:8080"
#: the container name of the GPU Operator's and the Helm chart's exporter DaemonSet
CONTAINER = "nvidia-dcgm-exporter"


def _modelable(k: Kubernetes) -> bool:
    identity = k.join.regex in ("(.*)", "(.+)") and k.join.replacement == "$1"
    return identity and k.exporter is not None and re2check.fullmatch(k.exporter.pod_regex, _pod(k, 1))


def _pod(k: Kubernetes, n: int) -> str:
    return f"{k.exporter.daemonset}-{n:05d}"[:253] if k.exporter else ""


def _ksm_labels(spec: Spec, k: Kubernetes, **labels: str) -> dict[str, str]:
    out = {"job": k.ksm_job, "instance": KSM_INSTANCE}
    if spec.exporter.labels.cluster:
        out[spec.exporter.labels.cluster] = fleet.CLUSTER
    out.update(labels)
    return out


class Cluster:
    """Nodes ``1..nodes`` with ``gpus`` GPUs each, an exporter pod per node and kube-state-metrics,
    written into one scenario; ``skip_*`` and the overrides break one thing at a time."""

    def __init__(self, sc: Scenario, spec: Spec, k: Kubernetes, nodes: int = 2, gpus: int = 2,
                 ksm_fails: tuple[int, ...] = (), ksm_down_from: int | None = None):
        self.sc, self.spec, self.k, self.nodes, self.gpus = sc, spec, k, nodes, gpus
        self.container = k.exporter.container or CONTAINER
        #: steps whose kube-state-metrics scrape fails, and the step from which every one does: its
        #: ``up`` is 0 then and each of its series gets a staleness marker (then no sample), as
        #: Prometheus writes them when a scrape fails
        self.ksm_fails, self.ksm_down_from = set(ksm_fails), ksm_down_from

    def _down(self, at: int) -> bool:
        return at in self.ksm_fails or (self.ksm_down_from is not None and at >= self.ksm_down_from)

    def _ksm_samples(self, value) -> list:
        """``value`` at every step kube-state-metrics is scraped; STALE at the first failed scrape of
        each run of them, no sample at the others."""
        return [(STALE if at == 0 or not self._down(at - 1) else MISSING) if self._down(at) else value
                for at in range(self.sc.length)]

    def ksm(self, up: list | None = None) -> None:
        up = up if up is not None else [0 if self._down(at) else 1 for at in range(self.sc.length)]
        self.sc.add("up", _ksm_labels(self.spec, self.k), up)

    def capacity(self, n: int, capacity: int | None = None, allocatable: int | None = None) -> None:
        res = {"node": fleet.node_name(n), "resource": self.k.resource, "unit": "integer"}
        cap = self.gpus * self.k.units_per_gpu if capacity is None else capacity
        self.sc.add("kube_node_status_capacity", _ksm_labels(self.spec, self.k, **res), self._ksm_samples(cap))
        alloc = cap if allocatable is None else allocatable
        self.sc.add("kube_node_status_allocatable", _ksm_labels(self.spec, self.k, **res), self._ksm_samples(alloc))

    def pod(self, n: int, restarts: list | None = None, oom: bool = False) -> None:
        k = self.k
        pod = {"namespace": k.exporter.namespace, "pod": _pod(k, n), "uid": f"uid-{n}"}
        info = {**pod, "node": fleet.node_name(n), "created_by_kind": "DaemonSet", "created_by_name": k.exporter.daemonset}
        self.sc.add("kube_pod_info", _ksm_labels(self.spec, k, **info), self._ksm_samples(1))
        self.sc.add("kube_pod_status_phase", _ksm_labels(self.spec, k, **pod, phase="Running"), self._ksm_samples(1))
        self.sc.add("kube_pod_container_status_restarts_total", _ksm_labels(self.spec, k, **pod, container=self.container),
                    restarts if restarts is not None else self._ksm_samples(0))
        if oom:
            self.sc.add("kube_pod_container_status_last_terminated_reason",
                        _ksm_labels(self.spec, k, **pod, container=self.container, reason="OOMKilled"), self._ksm_samples(1))

    def exporter(self, n: int, gpus: int | None = None) -> None:
        target = {"namespace": self.k.exporter.namespace, "pod": _pod(self.k, n)}
        add_target(self.sc, self.spec, fleet.instance_of(n), extra=target)
        for gpu in fleet.gpus(1, self.gpus if gpus is None else gpus, first_node=n):
            add_gpu(self.sc, self.spec, gpu, self.spec.required_metrics, extra=target)

    def daemonset(self, desired: int | None = None, ready: int | None = None) -> None:
        ds = {"namespace": self.k.exporter.namespace, "daemonset": self.k.exporter.daemonset}
        desired = self.nodes if desired is None else desired
        for field, value in (("desired_number_scheduled", desired), ("number_ready", self.nodes if ready is None else ready),
                             ("number_unavailable", 0)):
            self.sc.add(f"kube_daemonset_status_{field}", _ksm_labels(self.spec, self.k, **ds), self._ksm_samples(value))

    def healthy(self, skip: tuple[int, ...] = ()) -> None:
        """Every node healthy except those in ``skip`` (whose parts the caller adds)."""
        for n in range(1, self.nodes + 1):
            if n not in skip:
                self.capacity(n)
                self.pod(n)
                self.exporter(n)


def _alerts(spec: Spec, k: Kubernetes) -> list[str]:
    return [r.alert for r in krules.rules(spec) if r.alert]


def _firing(sc: Scenario, at: int, rule, firing: list[Firing], others: list[str]) -> None:
    """``rule`` fires as ``firing`` at step ``at``; every other kubernetes alert stays quiet."""
    sc.expect(at, rule.alert, firing)
    sc.quiet(at, *[a for a in others if a != rule.alert])


def _one_alert(spec: Spec, k: Kubernetes, step: float, names: list[str], rule: Rule, title: str, setup,
               labels: dict[str, str], value, nodes: int = 2, **cluster) -> Scenario:
    """A cluster of ``nodes`` that ``setup(cluster)`` writes, broken in one place: ``rule`` alone fires
    with ``labels`` and ``value`` (a number, or a function of the cluster) three steps after its
    ``for``. ``setup`` calls the :class:`Cluster` methods in the order the series are written;
    ``cluster``: :class:`Cluster`'s kube-state-metrics failures."""
    hold = steps(rule.for_, step)
    sc = Scenario(title, hold + 5, step)
    c = Cluster(sc, spec, k, nodes=nodes, **cluster)
    setup(c)
    _firing(sc, hold + 3, rule, [Firing(rule, labels, value(c) if callable(value) else value)], names)
    return sc


def _healthy_scenario(spec: Spec, k: Kubernetes, step: float, names: list[str]) -> Scenario:
    hold = steps(spec.alerts.for_, step)
    sc = Scenario("kubernetes: a healthy cluster (pods running and scraped, capacity = GPUs reporting, "
                  "DaemonSet ready) fires no kubernetes alert", steps(k.daemonset_for, step) + hold + 4, step)
    c = Cluster(sc, spec, k)
    c.ksm()
    c.healthy()
    c.daemonset()
    for at in (hold + 2, sc.length - 2):
        sc.quiet(at, *names)
    return sc


def _node_scenarios(spec: Spec, k: Kubernetes, step: float, names: list[str]) -> list[Scenario]:
    """One node without its exporter pod, GPUs, capacity or allocatable GPUs."""
    node2 = node_ids(spec, fleet.node_name(2))
    res = {"node": fleet.node_name(2), "resource": k.resource, "unit": "integer"}
    return [
        _one_alert(spec, k, step, names, krules.node_exporter_missing(spec, k),
                   "kubernetes: a GPU node without an exporter pod -> GpuNodeExporterMissing (no_exporter_pod)",
                   lambda c: (c.ksm(), c.healthy(skip=(3,)), c.capacity(3), c.daemonset(desired=2, ready=2)),
                   {**node_ids(spec, fleet.node_name(3)), "reason": "no_exporter_pod"}, lambda c: c.gpus, nodes=3),
        _one_alert(spec, k, step, names, krules.node_gpus_missing(spec, k),
                   "kubernetes: a node reports 1 of its 2 GPUs -> GpuNodeGpusMissing",
                   lambda c: (c.ksm(), c.healthy(skip=(2,)), c.capacity(2), c.pod(2), c.exporter(2, gpus=1),
                              c.daemonset()), node2, 1),
        _through_a_blip(spec, k, step, names, krules.node_gpus_missing(spec, k),
                        "kubernetes: a node reports 1 of its 2 GPUs, then one kube-state-metrics scrape fails -> "
                        "GpuNodeGpusMissing goes on firing through it",
                        lambda c: (c.ksm(), c.healthy(skip=(2,)), c.capacity(2), c.pod(2), c.exporter(2, gpus=1),
                                   c.daemonset()), node2, 1),
        _one_alert(spec, k, step, names, krules.capacity_missing(spec, k),
                   "kubernetes: a node reports GPUs but advertises no GPU capacity -> GpuNodeCapacityMissing",
                   lambda c: (c.ksm(), c.healthy(skip=(2,)), c.pod(2), c.exporter(2), c.daemonset()),
                   node2, lambda c: c.gpus),
        _one_alert(spec, k, step, names, krules.device_plugin_unhealthy(spec, k),
                   "kubernetes: allocatable GPUs below capacity -> GpuDevicePluginUnhealthy",
                   lambda c: (c.ksm(), c.healthy(skip=(2,)), c.capacity(2, allocatable=c.gpus * k.units_per_gpu - 1),
                              c.pod(2), c.exporter(2), c.daemonset()),
                   _ksm_labels(spec, k, **res), lambda c: c.gpus * k.units_per_gpu - 1),
    ]


def _through_a_blip(spec: Spec, k: Kubernetes, step: float, names: list[str], rule: Rule, title: str, setup,
                    labels: dict[str, str], value) -> Scenario:
    """``rule`` pages for what ``setup(cluster)`` broke; then one kube-state-metrics scrape fails
    (``up`` 0, every series of it stale for a step): the page goes on through that step and the
    next, not ended and paged again ``for`` later (one page for one cause)."""
    hold = steps(rule.for_, step)
    sc = Scenario(title, hold + 5, step)
    c = Cluster(sc, spec, k, ksm_fails=(hold + 2,))
    setup(c)
    for at in (hold + 1, hold + 2, hold + 3):
        _firing(sc, at, rule, [Firing(rule, labels, value)], names)
    return sc


def _restart_scenarios(spec: Spec, k: Kubernetes, step: float, names: list[str]) -> list[Scenario]:
    """The exporter container restarting, and restarting after an OOM kill."""
    # the counter jumps by max_restarts + 2 in one step, evaluated one step later: the window
    # (at least 3 steps, model.test_step) holds the zero before the jump whatever restart_window
    # and max_restarts are; the alert's value is increase() as Prometheus extrapolates it, rounded
    jump = k.max_restarts + 2
    restarts = [0, 0, 0, jump]
    at = len(restarts)
    seen = math.floor(increase_value(restarts + [jump], at, steps(k.restart_window, step)) + 0.5)
    pod = {"namespace": k.exporter.namespace, "pod": _pod(k, 2), "uid": "uid-2"}
    out = []
    for rule, oom, value in ((krules.pod_restarting(spec, k), False, seen), (krules.oom_killed(spec, k), True, 1)):
        sc = Scenario(f"kubernetes: the exporter container restarts {jump} times"
                      + (", last terminated OOMKilled -> GpuExporterOOMKilled" if oom else " -> GpuExporterPodRestarting"),
                      at + 2, step)
        c = Cluster(sc, spec, k)
        c.ksm()
        c.healthy(skip=(2,))
        c.capacity(2)
        c.pod(2, restarts=restarts + [restarts[-1]] * (sc.length - len(restarts)), oom=oom)
        c.exporter(2)
        c.daemonset()
        labels = _ksm_labels(spec, k, **pod, container=c.container, **({"reason": "OOMKilled"} if oom else {}))
        expected = [Firing(rule, labels, value)]
        sc.expect(at, rule.alert, expected)
        if not oom:     # the OOM scenario restarts too: its restart alert may fire with it
            sc.quiet(at, *[a for a in names if a != rule.alert])
        out.append(sc)
    return out


def _daemonset_scenarios(spec: Spec, k: Kubernetes, step: float, names: list[str]) -> list[Scenario]:
    """The exporter DaemonSet not ready or unknown, and kube-state-metrics not scraped."""
    ds = {"namespace": k.exporter.namespace, "daemonset": k.exporter.daemonset}
    # per cluster where the spec has a cluster label (a global ruler sees several): those two
    # alerts carry the cluster, and the DaemonSet's has no job (rules/kubernetes.py)
    cluster = spec.exporter.labels.cluster
    per = {cluster: fleet.CLUSTER} if cluster else {}
    return [
        _one_alert(spec, k, step, names, krules.daemonset_not_ready(spec, k),
                   "kubernetes: DaemonSet 1 of 2 pods ready for daemonset_for -> GpuExporterDaemonSetNotReady",
                   lambda c: (c.ksm(), c.healthy(), c.daemonset(ready=1)), _ksm_labels(spec, k, **ds), 1),
        _one_alert(spec, k, step, names, krules.daemonset_missing(spec, k),
                   "kubernetes: kube-state-metrics knows no exporter DaemonSet -> GpuExporterDaemonSetMissing",
                   lambda c: (c.ksm(), c.healthy()), {**per, **ds} if cluster else {"job": k.ksm_job, **ds}, 1),
        _through_a_blip(spec, k, step, names, krules.daemonset_missing(spec, k),
                        "kubernetes: kube-state-metrics knows no exporter DaemonSet, then one of its scrapes fails -> "
                        "GpuExporterDaemonSetMissing goes on firing through it",
                        lambda c: (c.ksm(), c.healthy()), {**per, **ds} if cluster else {"job": k.ksm_job, **ds}, 1),
        _one_alert(spec, k, step, names, krules.ksm_missing(spec, k),
                   "kubernetes: kube-state-metrics scrapes fail from step 2 on (its series go stale while the "
                   "GPUs still report) -> GpuKubeStateMetricsMissing only, not a missing capacity on every node",
                   lambda c: (c.ksm(), c.healthy(), c.daemonset()), {"job": k.ksm_job, **per}, 0, ksm_down_from=2),
    ]


def _capacity_scenarios(spec: Spec, k: Kubernetes, step: float) -> list[Scenario]:
    names = _alerts(spec, k)
    return ([_healthy_scenario(spec, k, step, names)] + _node_scenarios(spec, k, step, names)
            + _restart_scenarios(spec, k, step, names) + _daemonset_scenarios(spec, k, step, names))


def _static_scenarios(spec: Spec, k: Kubernetes, step: float) -> list[Scenario]:
    """Nodes the static expectation lists that report nothing fire GpuNodeExporterMissing
    (``no_gpu_series``), each with its expected count; a node listed with 0 GPUs stays quiet
    (every listed node is expected: a spec with several used to fail its own test, issue #15)."""
    if not k.static or not k.static.nodes:
        return []
    node = k.static.nodes[0]
    rule = krules.node_exporter_missing(spec, k)
    hold = steps(rule.for_, step)
    lab = spec.exporter.labels
    missing = Scenario(f"kubernetes (static): node {node.name} expects {node.gpus} GPUs and reports none -> "
                       "GpuNodeExporterMissing (no_gpu_series)", hold + 5, step)
    missing.add("up", {"job": spec.exporter.job, "instance": "10.0.9.9:9400"}, missing.const(1))
    firing = [Firing(rule, {"job": spec.exporter.job, **({lab.cluster: n.cluster} if lab.cluster else {}),
                            lab.node: n.name, "reason": "no_gpu_series"}, n.gpus)
              for n in k.static.nodes if n.gpus > 0]
    if firing:
        missing.expect(hold + 3, rule.alert, firing)
    else:
        missing.quiet(hold + 3, rule.alert)
    return [missing]


def scenarios(spec: Spec, rules: list[Rule]) -> list[Scenario]:
    """Scenarios for the spec's kubernetes section ([] without one, or when it cannot be modelled:
    see the module docstring)."""
    k = spec.kubernetes
    if k is None:
        return []
    step = test_step(spec)
    if k.ksm_job is None:
        return _static_scenarios(spec, k, step)
    if k.expected_source != "capacity" or not _modelable(k):
        return []
    return _capacity_scenarios(spec, k, step)
