"""Grafana dashboards from the spec: fleet overview, node/GPU detail and monitoring health.

Built with grafana-foundation-sdk (classic dashboard model, schemaVersion 42). Each dashboard
module has ``KEY`` (uid and file-name suffix) and ``dashboard(spec)``; :func:`files` is the
renderer registered in ``gpumon.render.RENDERERS``.
"""

from __future__ import annotations

from ..rules import RuleGroup
from ..spec import Spec
from . import detail, fleet, health
from .output import CONFIGMAP_PATH, JSON_PATH, configmap, to_json

#: dashboard modules in render order
DASHBOARDS = (fleet, detail, health)


def file_name(spec: Spec, module) -> str:
    """``<spec name>-<key>``: the JSON file name (without ``.json``) and ConfigMap suffix."""
    return f"{spec.name}-{module.KEY}"


def build_all(spec: Spec, groups: list[RuleGroup]) -> dict[str, dict]:
    """{file name: dashboard model} for every dashboard (empty when ``dashboards.enabled`` is false),
    reading alert and recording-rule names from the ``groups`` built from ``spec``
    (:func:`gpumon.rules.build_groups`)."""
    if not spec.dashboards.enabled:
        return {}
    return {file_name(spec, mod): mod.dashboard(spec, groups).build() for mod in DASHBOARDS}


def files(spec: Spec, groups: list[RuleGroup]) -> dict[str, str]:
    """Renderer: ``dashboards/<name>.json`` and, unless disabled in the spec,
    ``kubernetes/grafana-dashboard-<name>.yaml`` for each dashboard. Panels read alert and
    recording-rule names from ``groups`` (:func:`gpumon.rules.build_groups`)."""
    s = spec.dashboards
    out: dict[str, str] = {}
    for name, model in build_all(spec, groups).items():
        text = to_json(model, spec.path)
        out[JSON_PATH.format(name=name)] = text
        if s.configmaps:
            out[CONFIGMAP_PATH.format(name=name)] = configmap(spec, s, name, text)
    return out
