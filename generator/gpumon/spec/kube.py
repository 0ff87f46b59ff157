"""The spec's optional ``kubernetes`` section: where dcgm-exporter runs, and how many GPUs each node
should report.

Mapped once by the spec loader (:func:`from_plain`, called from :mod:`gpumon.spec`) into
``Spec.kubernetes``; the schema in ``generator/gpumon/schema/gpumon.schema.json`` checks its shape and
:func:`problems` what a schema cannot. This module does not import the spec module (the spec
imports it). Two sources of the expected GPU count:

* Kubernetes: ``kube_node_status_capacity{resource="nvidia_com_gpu",unit="integer"}`` from
  kube-state-metrics (labels ``node``, ``resource``, ``unit``; kube-state-metrics
  docs/metrics/cluster/node-metrics.md; extended resources get unit ``integer`` and the name
  sanitised, ``nvidia.com/gpu`` -> ``nvidia_com_gpu``), divided by ``units_per_gpu``;
* static (bare metal, Slurm): explicit nodes, node-name patterns, a default.

kube-state-metrics says ``node``; dcgm-exporter says ``Hostname`` (``hostname`` after NVIDIA/dcgm-exporter#655), set
from the ``NODE_NAME`` env var (fieldRef ``spec.nodeName``) in both the Helm chart and the GPU Operator
DaemonSet, so the values are equal unless ``node_join`` maps them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from .. import re2check
from ..durations import parse_duration


@dataclass(frozen=True)
class ExporterPods:
    """The dcgm-exporter DaemonSet and its pods.

    ``pod_regex`` is an RE2 regex, fully anchored as PromQL's ``=~`` is; ``container`` None means
    every container of the pods.
    """

    namespace: str
    daemonset: str
    pod_regex: str
    container: str | None = None


@dataclass(frozen=True)
class NodeJoin:
    """kube-state-metrics node name -> value of dcgm-exporter's node label, as a ``label_replace``:
    ``exporter_label`` := ``replacement`` where ``regex`` matches ``kube_label`` (fully anchored)."""

    kube_label: str
    exporter_label: str
    regex: str = "(.*)"
    replacement: str = "$1"


@dataclass(frozen=True)
class StaticNode:
    """One node listed explicitly: its exporter node-label value, GPUs expected, cluster label value."""

    name: str
    gpus: int
    cluster: str | None = None


@dataclass(frozen=True)
class StaticPattern:
    """Nodes whose exporter node label matches ``match`` (RE2, fully anchored) carry ``gpus`` GPUs."""

    match: str
    gpus: int


@dataclass(frozen=True)
class StaticExpectation:
    """Expected GPUs without Kubernetes; precedence nodes > first matching pattern > default."""

    nodes: tuple[StaticNode, ...] = ()
    patterns: tuple[StaticPattern, ...] = ()
    default: int | None = None


@dataclass(frozen=True)
class Kubernetes:
    """The modelled ``kubernetes`` section.

    ``ksm_job`` is None for fleets without Kubernetes (then ``static`` is set and no pod rules are
    rendered). Durations are seconds.
    """

    ksm_job: str | None
    exporter: ExporterPods | None
    join: NodeJoin
    resource: str = "nvidia_com_gpu"
    units_per_gpu: int = 1
    static: StaticExpectation | None = None
    restart_window: float = 3600.0
    max_restarts: int = 1
    daemonset_for: float = 900.0

    @property
    def expected_source(self) -> str:
        """``static`` when a static expectation is given, else ``capacity``."""
        return "static" if self.static is not None else "capacity"


def from_plain(raw: dict | None, node_label: str) -> Kubernetes | None:
    """Model a ``kubernetes`` section (plain dict, already checked by the schema and
    :func:`problems`); None when the section is absent. ``node_label`` is the exporter's node label
    (``exporter.labels.node``), the target of the node-name join. Defaults are the dataclass
    defaults above."""
    if raw is None:
        return None
    ksm = raw.get("kube_state_metrics")
    exp = raw.get("exporter")
    pods = None
    if exp:
        pods = ExporterPods(namespace=exp["namespace"], daemonset=exp["daemonset"],
                            pod_regex=exp.get("pod_regex") or default_pod_regex(exp["daemonset"]),
                            container=exp.get("container"))
    nj = raw.get("node_join") or {}
    join = NodeJoin(kube_label=nj.get("kube_label", "node"), exporter_label=node_label,
                    regex=nj.get("regex", NodeJoin.regex), replacement=nj.get("replacement", NodeJoin.replacement))
    cap = raw.get("capacity") or {}
    st = raw.get("static")
    static = None
    if st is not None:
        static = StaticExpectation(
            nodes=tuple(StaticNode(n["name"], int(n["gpus"]), n.get("cluster")) for n in st.get("nodes", [])),
            patterns=tuple(StaticPattern(p["match"], int(p["gpus"])) for p in st.get("patterns", [])),
            default=st.get("default"),
        )
    return Kubernetes(
        ksm_job=ksm["job"] if ksm else None, exporter=pods, join=join,
        resource=cap.get("resource", Kubernetes.resource),
        units_per_gpu=int(cap.get("units_per_gpu", Kubernetes.units_per_gpu)),
        static=static,
        restart_window=parse_duration(raw["restart_window"]) if "restart_window" in raw else Kubernetes.restart_window,
        max_restarts=int(raw.get("max_restarts", Kubernetes.max_restarts)),
        daemonset_for=parse_duration(raw["daemonset_for"]) if "daemonset_for" in raw else Kubernetes.daemonset_for,
    )


def default_pod_regex(daemonset: str) -> str:
    """Names the DaemonSet controller gives its pods: ``<daemonset>-`` plus 5 random characters
    (Kubernetes ``generateName``, apiserver ``names.SimpleNameGenerator``)."""
    return re.escape(daemonset).replace("\\-", "-") + "-[a-z0-9]{5}"


def _d(value) -> dict:
    return value if isinstance(value, dict) else {}


def _l(value) -> list:
    return value if isinstance(value, list) else []


def problems(plain: dict, add: Callable[[list, str], None]) -> None:
    """Report what the schema cannot check in ``plain["kubernetes"]`` by calling ``add(path, message)``.

    Checks: a source of truth is given (kube_state_metrics or static); pod rules have an exporter;
    capacity/node_join are not given without kube-state-metrics; regexes are RE2
    (:mod:`gpumon.re2check`); static node names are unique and carry ``cluster`` exactly when
    ``exporter.labels.cluster`` is set; the kube-state-metrics job is not the exporter job.
    """
    raw = plain.get("kubernetes")
    if not isinstance(raw, dict):
        return
    base = ["kubernetes"]
    ksm = _d(raw.get("kube_state_metrics"))
    if not ksm and "static" not in raw:
        add(base, "set kube_state_metrics (Kubernetes: expected GPUs from node capacity, exporter pod "
            "alerts) or static (bare metal: expected GPUs per node), or remove the section")
    if ksm and not raw.get("exporter"):
        add(base, "kube_state_metrics needs exporter (namespace and daemonset of dcgm-exporter) for the pod alerts")
    if not ksm:
        for key in ("exporter", "node_join", "capacity"):
            if key in raw:
                add(base + [key], f"{key} needs kube_state_metrics (its series come from kube-state-metrics)")
    exporter_job = _d(plain.get("exporter")).get("job")
    if ksm and ksm.get("job") == exporter_job:
        add(base + ["kube_state_metrics", "job"], f"{exporter_job!r} is the dcgm-exporter job; "
            "kube-state-metrics is scraped by its own job (usually kube-state-metrics)")
    regexes = [(["exporter", "pod_regex"], _d(raw.get("exporter")).get("pod_regex")),
               (["node_join", "regex"], _d(raw.get("node_join")).get("regex"))]
    static = _d(raw.get("static"))
    regexes += [(["static", "patterns", i, "match"], _d(p).get("match")) for i, p in enumerate(_l(static.get("patterns")))]
    for path, rx in regexes:
        if not isinstance(rx, str):
            continue
        why = re2check.problem(rx)
        if why:
            add(base + path, f"{rx!r}: {why}")
    cluster = _d(_d(plain.get("exporter")).get("labels")).get("cluster")
    seen: dict[tuple, int] = {}
    for i, node in enumerate(_l(static.get("nodes"))):
        if not isinstance(node, dict):
            continue
        key = (str(node.get("cluster")), str(node.get("name")))
        if key in seen:
            add(base + ["static", "nodes", i, "name"], f"duplicate node {node.get('name')!r} "
                f"(first at static.nodes[{seen[key]}])")
        seen.setdefault(key, i)
        if cluster and not node.get("cluster"):
            add(base + ["static", "nodes", i], f"exporter.labels.cluster is {cluster!r}: give the node's cluster")
        if not cluster and node.get("cluster"):
            add(base + ["static", "nodes", i, "cluster"], "exporter.labels.cluster is not set, so no series "
                "carries a cluster label; remove cluster or set exporter.labels.cluster")
