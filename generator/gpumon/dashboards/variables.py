"""Template variables: datasource, cluster, node and GPU.

Node and GPU pickers are built from gpumon's inventory recording rule, not from one metric: the
official dashboard lists hosts from ``DCGM_FI_DEV_GPU_TEMP``, so GPUs that lack that field (vGPU,
some MIG modes) vanish from the picker (NVIDIA/dcgm-exporter#236).
"""

from __future__ import annotations

from ..promqltext import matcher

from ..rules import names
from .sdk import db, dm
from ..spec import Spec
from .panels import DATASOURCE


def datasource() -> db.DatasourceVariable:
    """``datasource`` of type prometheus: every panel uses ``${datasource}`` (grafana/grafana#10786)."""
    return db.DatasourceVariable("datasource").label("Data source").type("prometheus")


def _query(name: str, label: str, query: str) -> db.QueryVariable:
    return (db.QueryVariable(name).label(label).datasource(DATASOURCE)
            .query(query)
            .definition(query)
            .refresh(dm.VariableRefresh.ON_TIME_RANGE_CHANGED).sort(dm.VariableSort.ALPHABETICAL_ASC)
            .multi(True).include_all(True).all_value(".*"))


def _inventory(spec: Spec, *extra: str) -> str:
    job = matcher("job", spec.exporter.job)
    return f"{names.INVENTORY}{{{','.join((job,) + extra)}}}"


def cluster(spec: Spec) -> db.QueryVariable | None:
    """``cluster`` from the inventory, or None when the spec has no cluster label."""
    lab = spec.exporter.labels.cluster
    if not lab:
        return None
    return _query("cluster", "Cluster", f"label_values({_inventory(spec)}, {lab})")


def _cluster_matcher(spec: Spec) -> tuple[str, ...]:
    lab = spec.exporter.labels.cluster
    return (f'{lab}=~"$cluster"',) if lab else ()


def node(spec: Spec) -> db.QueryVariable:
    """``node``: values of the node label in the inventory (narrowed by cluster)."""
    lab = spec.exporter.labels
    return _query("node", "Node", f"label_values({_inventory(spec, *_cluster_matcher(spec))}, {lab.node})")


def gpu(spec: Spec) -> db.QueryVariable:
    """``gpu``: GPU UUIDs in the inventory on the chosen nodes."""
    lab = spec.exporter.labels
    inv = _inventory(spec, *_cluster_matcher(spec), f'{lab.node}=~"$node"')
    return _query("gpu", "GPU (UUID)", f"label_values({inv}, {lab.gpu})")


def for_scope(spec: Spec, node_and_gpu: bool) -> list:
    """Variables in display order: datasource, cluster (if any), then node and GPU."""
    out: list = [datasource()]
    c = cluster(spec)
    if c is not None:
        out.append(c)
    if node_and_gpu:
        out += [node(spec), gpu(spec)]
    return out
