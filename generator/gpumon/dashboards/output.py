"""Dashboard files: deterministic JSON and Grafana-sidecar ConfigMaps."""

from __future__ import annotations

import json

from ..applysize import BUDGET, applied_size
from ..spec import DashboardSettings, Spec
from .sdk import JSONEncoder
from ..writer import DASHBOARD_FIELD
from ..yamlout import dump, generated_header

JSON_PATH = "dashboards/{name}.json"
CONFIGMAP_PATH = "kubernetes/grafana-dashboard-{name}.yaml"


def to_json(dashboard, spec_path: str | None = None) -> str:
    """A built foundation-sdk dashboard as JSON text: keys sorted, 2-space indent, trailing
    newline, non-ASCII kept (``°C``), so the same spec gives byte-identical files. With
    ``spec_path``, the top-level ``gpumon`` field says gpumon generated it from that spec (the
    writer removes a dashboard it no longer renders only when it carries it:
    :func:`gpumon.writer.carries_mark`; Grafana ignores the field)."""
    if spec_path is not None:
        dashboard = json.loads(json.dumps(dashboard, cls=JSONEncoder))
        dashboard[DASHBOARD_FIELD] = {"generated": generated_header(spec_path).replace("\n", " ")}
    return json.dumps(dashboard, cls=JSONEncoder, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def configmap_doc(spec: Spec, s: DashboardSettings, name: str, text: str) -> dict:
    """A v1 ConfigMap carrying one dashboard for the Grafana sidecar of kube-prometheus-stack:
    labelled ``<label>: <label_value>``, with the folder annotation when a folder is set.
    ``data`` holds the same text as the JSON file; when that would make the object too big for
    ``kubectl apply`` (:mod:`gpumon.applysize`: a spec with many fields), the same dashboard as
    compact JSON (the indentation, escaped in the last-applied annotation, takes a third of it;
    a dashboard still too big is split first: :mod:`gpumon.dashboards.split`)."""
    meta: dict = {
        "name": f"grafana-dashboard-{name}",
        "namespace": s.namespace,
        "labels": {s.label: s.label_value, "app.kubernetes.io/managed-by": "gpumon"},
    }
    if s.folder:
        meta["annotations"] = {s.folder_annotation: s.folder}
    doc = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {f"{name}.json": text}}
    if applied_size(doc) > BUDGET:
        compact = json.dumps(json.loads(text), separators=(",", ":"), sort_keys=True, ensure_ascii=False)
        doc["data"] = {f"{name}.json": compact + "\n"}
    return doc


def configmap(spec: Spec, s: DashboardSettings, name: str, text: str) -> str:
    """:func:`configmap_doc` as the YAML file."""
    return dump(configmap_doc(spec, s, name, text), header=generated_header(spec.path))


def compact_size(spec: Spec, name: str, dashboard: dict) -> int:
    """Bytes the ConfigMap of ``dashboard`` (a model as JSON) takes in the last-applied annotation
    with the dashboard as compact JSON (what :func:`configmap_doc` falls back to)."""
    compact = json.dumps(dashboard, separators=(",", ":"), sort_keys=True, ensure_ascii=False) + "\n"
    doc = configmap_doc(spec, spec.dashboards, name, "{}")
    doc["data"] = {f"{name}.json": compact}
    return applied_size(doc)
