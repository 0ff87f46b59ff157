"""A stand-in for kube-state-metrics' ``/metrics``: the series gpumon's kubernetes rules read, with
kube-state-metrics' real metric names, types and label sets (HELP texts paraphrase the docs'
descriptions; kube-state-metrics
docs/metrics/cluster/node-metrics.md, workload/pod-metrics.md, workload/daemonset-metrics.md;
extended resources are sanitised, ``nvidia.com/gpu`` -> ``nvidia_com_gpu`` with unit ``integer``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

HELP = {
    "kube_node_status_capacity": ("The total amount of resources available for a node.", "gauge"),
    "kube_node_status_allocatable": ("The amount of resources allocatable for pods (after reserving some for "
                                     "system daemons).", "gauge"),
    "kube_pod_info": ("[STABLE] Information about pod.", "gauge"),
    "kube_pod_status_phase": ("[STABLE] The pods current phase.", "gauge"),
    "kube_pod_container_status_restarts_total": ("[STABLE] The number of container restarts per container.",
                                                 "counter"),
    "kube_pod_container_status_last_terminated_reason": ("Describes the last reason the container was in "
                                                         "terminated state.", "gauge"),
    "kube_daemonset_status_desired_number_scheduled": ("[STABLE] The number of nodes that should be running "
                                                       "the daemon pod.", "gauge"),
    "kube_daemonset_status_number_ready": ("[STABLE] The number of nodes that should be running the daemon pod "
                                           "and have one or more of the daemon pod running and ready.", "gauge"),
    "kube_daemonset_status_number_unavailable": ("[STABLE] The number of nodes that should be running the "
                                                 "daemon pod and have none of the daemon pod running and "
                                                 "available", "gauge"),
}


@dataclass
class Node:
    """A node: name, GPUs of capacity (None = no nvidia.com/gpu resource), allocatable GPUs."""

    name: str
    gpus: int | None
    allocatable: int | None = None
    cpus: int = 96


@dataclass
class Pod:
    """An exporter pod of the DaemonSet on ``node``; ``oom`` sets last_terminated_reason OOMKilled;
    ``phase`` as kube_pod_status_phase reports it (one series per phase, 1 for the current one)."""

    name: str
    node: str
    uid: str
    restarts: int = 0
    oom: bool = False
    container: str = "nvidia-dcgm-exporter"
    phase: str = "Running"


@dataclass
class Cluster:
    """What the stand-in serves; tests change it between scrapes."""

    nodes: list[Node] = field(default_factory=list)
    pods: list[Pod] = field(default_factory=list)
    namespace: str = "gpu-operator"
    daemonset: str = "nvidia-dcgm-exporter"
    desired: int = 0
    ready: int = 0

    def exposition(self) -> str:
        """The text kube-state-metrics would serve for this state."""
        lines: dict[str, list[str]] = {name: [] for name in HELP}
        for n in self.nodes:
            for metric, gpus in (("kube_node_status_capacity", n.gpus),
                                 ("kube_node_status_allocatable", n.gpus if n.allocatable is None else n.allocatable)):
                lines[metric].append(f'{metric}{{node="{n.name}",resource="cpu",unit="core"}} {n.cpus}')
                if gpus is not None:
                    lines[metric].append(f'{metric}{{node="{n.name}",resource="nvidia_com_gpu",unit="integer"}} {gpus}')
        for i, p in enumerate(self.pods):
            pod = f'namespace="{self.namespace}",pod="{p.name}",uid="{p.uid}"'
            lines["kube_pod_info"].append(
                f'kube_pod_info{{{pod},host_ip="10.0.0.{11 + i}",pod_ip="10.244.{i}.7",node="{p.node}",'
                f'created_by_kind="DaemonSet",created_by_name="{self.daemonset}",'
                f'priority_class="system-node-critical",host_network="false"}} 1')
            for phase in ("Pending", "Running", "Succeeded", "Failed", "Unknown"):
                lines["kube_pod_status_phase"].append(
                    f'kube_pod_status_phase{{{pod},phase="{phase}"}} {int(phase == p.phase)}')
            lines["kube_pod_container_status_restarts_total"].append(
                f'kube_pod_container_status_restarts_total{{{pod},container="{p.container}"}} {p.restarts}')
            if p.oom:
                lines["kube_pod_container_status_last_terminated_reason"].append(
                    f'kube_pod_container_status_last_terminated_reason{{{pod},container="{p.container}",'
                    f'reason="OOMKilled"}} 1')
        ds = f'namespace="{self.namespace}",daemonset="{self.daemonset}"'
        lines["kube_daemonset_status_desired_number_scheduled"].append(
            f"kube_daemonset_status_desired_number_scheduled{{{ds}}} {self.desired}")
        lines["kube_daemonset_status_number_ready"].append(f"kube_daemonset_status_number_ready{{{ds}}} {self.ready}")
        lines["kube_daemonset_status_number_unavailable"].append(
            f"kube_daemonset_status_number_unavailable{{{ds}}} {self.desired - self.ready}")
        out = []
        for metric, (text, kind) in HELP.items():
            out += [f"# HELP {metric} {text}", f"# TYPE {metric} {kind}"] + lines[metric]
        return "\n".join(out) + "\n"
