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

    def __init__(self, sc: Scenario, spec: Spec, k: Kubernetes, nodes: int = 2, gpus: int = 2):
        self.sc, self.spec, self.k, self.nodes, self.gpus = sc, spec, k, nodes, gpus
        self.container = k.exporter.container or CONTAINER

    def ksm(self, up: list | None = None) -> None:
        self.sc.add("up", _ksm_labels(self.spec, self.k), up if up is not None else self.sc.const(1))

    def capacity(self, n: int, capacity: int | None = None, allocatable: int | None = None) -> None:
        res = {"node": fleet.node_name(n), "resource": self.k.resource, "unit": "integer"}
        cap = self.gpus * self.k.units_per_gpu if capacity is None else capacity
        self.sc.add("kube_node_status_capacity", _ksm_labels(self.spec, self.k, **res), self.sc.const(cap))
        alloc = cap if allocatable is None else allocatable
        self.sc.add("kube_node_status_allocatable", _ksm_labels(self.spec, self.k, **res), self.sc.const(alloc))

    def pod(self, n: int, restarts: list | None = None, oom: bool = False) -> None:
        k = self.k
        pod = {"namespace": k.exporter.namespace, "pod": _pod(k, n), "uid": f"uid-{n}"}
        info = {**pod, "node": fleet.node_name(n), "created_by_kind": "DaemonSet", "created_by_name": k.exporter.daemonset}
        self.sc.add("kube_pod_info", _ksm_labels(self.spec, k, **info), self.sc.const(1))
        self.sc.add("kube_pod_status_phase", _ksm_labels(self.spec, k, **pod, phase="Running"), self.sc.const(1))
        self.sc.add("kube_pod_container_status_restarts_total", _ksm_labels(self.spec, k, **pod, container=self.container),
                    restarts if restarts is not None else self.sc.const(0))
        if oom:
            self.sc.add("kube_pod_container_status_last_terminated_reason",
                        _ksm_labels(self.spec, k, **pod, container=self.container, reason="OOMKilled"), self.sc.const(1))

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
            self.sc.add(f"kube_daemonset_status_{field}", _ksm_labels(self.spec, self.k, **ds), self.sc.const(value))

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


def _capacity_scenarios(spec: Spec, k: Kubernetes, step: float) -> list[Scenario]:
    names = _alerts(spec, k)
    hold = steps(spec.alerts.for_, step)
    out = []

    sc = Scenario("kubernetes: a healthy cluster (pods running and scraped, capacity = GPUs reporting, "
                  "DaemonSet ready) fires no kubernetes alert", steps(k.daemonset_for, step) + hold + 4, step)
    c = Cluster(sc, spec, k)
    c.ksm()
    c.healthy()
    c.daemonset()
    for at in (hold + 2, sc.length - 2):
        sc.quiet(at, *names)
    out.append(sc)

    rule = krules.node_exporter_missing(spec, k)
    hold = steps(rule.for_, step)
    sc = Scenario("kubernetes: a GPU node without an exporter pod -> GpuNodeExporterMissing (no_exporter_pod)",
                  hold + 5, step)
    c = Cluster(sc, spec, k, nodes=3)
    c.ksm()
    c.healthy(skip=(3,))
    c.capacity(3)
    c.daemonset(desired=2, ready=2)
    labels = {**node_ids(spec, fleet.node_name(3)), "reason": "no_exporter_pod"}
    _firing(sc, hold + 3, rule, [Firing(rule, labels, c.gpus)], names)
    out.append(sc)

    rule = krules.node_gpus_missing(spec, k)
    hold = steps(rule.for_, step)
    sc = Scenario("kubernetes: a node reports 1 of its 2 GPUs -> GpuNodeGpusMissing", hold + 5, step)
    c = Cluster(sc, spec, k)
    c.ksm()
    c.healthy(skip=(2,))
    c.capacity(2)
    c.pod(2)
    c.exporter(2, gpus=1)
    c.daemonset()
    _firing(sc, hold + 3, rule, [Firing(rule, node_ids(spec, fleet.node_name(2)), 1)], names)
    out.append(sc)

    rule = krules.capacity_missing(spec, k)
    hold = steps(rule.for_, step)
    sc = Scenario("kubernetes: a node reports GPUs but advertises no GPU capacity -> GpuNodeCapacityMissing",
                  hold + 5, step)
    c = Cluster(sc, spec, k)
    c.ksm()
    c.healthy(skip=(2,))
    c.pod(2)
    c.exporter(2)
    c.daemonset()
    _firing(sc, hold + 3, rule, [Firing(rule, node_ids(spec, fleet.node_name(2)), c.gpus)], names)
    out.append(sc)

    rule = krules.device_plugin_unhealthy(spec, k)
    hold = steps(rule.for_, step)
    sc = Scenario("kubernetes: allocatable GPUs below capacity -> GpuDevicePluginUnhealthy", hold + 5, step)
    c = Cluster(sc, spec, k)
    c.ksm()
    c.healthy(skip=(2,))
    c.capacity(2, allocatable=c.gpus * k.units_per_gpu - 1)
    c.pod(2)
    c.exporter(2)
    c.daemonset()
    res = {"node": fleet.node_name(2), "resource": k.resource, "unit": "integer"}
    _firing(sc, hold + 3, rule, [Firing(rule, _ksm_labels(spec, k, **res), c.gpus * k.units_per_gpu - 1)], names)
    out.append(sc)

    # the counter jumps by max_restarts + 2 in one step, evaluated one step later: the window
    # (at least 3 steps, model.test_step) holds the zero before the jump whatever restart_window
    # and max_restarts are; the alert's value is increase() as Prometheus extrapolates it, rounded
    jump = k.max_restarts + 2
    restarts = [0, 0, 0, jump]
    at = len(restarts)
    seen = math.floor(increase_value(restarts + [jump], at, steps(k.restart_window, step)) + 0.5)
    pod = {"namespace": k.exporter.namespace, "pod": _pod(k, 2), "uid": "uid-2"}
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

    rule = krules.daemonset_not_ready(spec, k)
    ds_hold = steps(rule.for_, step)
    sc = Scenario("kubernetes: DaemonSet 1 of 2 pods ready for daemonset_for -> GpuExporterDaemonSetNotReady",
                  ds_hold + 5, step)
    c = Cluster(sc, spec, k)
    c.ksm()
    c.healthy()
    c.daemonset(ready=1)
    ds = {"namespace": k.exporter.namespace, "daemonset": k.exporter.daemonset}
    _firing(sc, ds_hold + 3, rule, [Firing(rule, _ksm_labels(spec, k, **ds), 1)], names)
    out.append(sc)

    rule = krules.daemonset_missing(spec, k)
    hold = steps(rule.for_, step)
    sc = Scenario("kubernetes: kube-state-metrics knows no exporter DaemonSet -> GpuExporterDaemonSetMissing",
                  hold + 5, step)
    c = Cluster(sc, spec, k)
    c.ksm()
    c.healthy()
    _firing(sc, hold + 3, rule, [Firing(rule, {"job": k.ksm_job, **ds}, 1)], names)
    out.append(sc)

    rule = krules.ksm_missing(spec, k)
    hold = steps(rule.for_, step)
    sc = Scenario("kubernetes: kube-state-metrics scrapes fail -> GpuKubeStateMetricsMissing only", hold + 5, step)
    c = Cluster(sc, spec, k)
    c.ksm(up=sc.const(0))
    c.healthy()
    c.daemonset()
    _firing(sc, hold + 3, rule, [Firing(rule, {"job": k.ksm_job}, 0)], names)
    out.append(sc)
    return out


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
