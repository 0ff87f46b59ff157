"""Grafana dashboards from the spec: fleet overview, node/GPU detail and monitoring health.

Built with grafana-foundation-sdk (classic dashboard model, schemaVersion 42). Each dashboard
module has ``KEY`` (uid and file-name suffix) and ``dashboard(spec)``; :func:`files` is the
renderer registered in ``gpumon.render.RENDERERS``.
"""

from __future__ import annotations

import json

from ..rules import RuleGroup
from ..spec import Spec
from . import base, detail, fleet, health, split
from .output import CONFIGMAP_PATH, JSON_PATH, compact_size, configmap, to_json

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
    recording-rule names from ``groups`` (:func:`gpumon.rules.build_groups`). A dashboard whose
    ConfigMap would be too big for ``kubectl apply`` is rendered as parts ``<name>``,
    ``<name>-2``, ... (:mod:`gpumon.dashboards.split`), as JSON files and ConfigMaps alike."""
    s = spec.dashboards
    out: dict[str, str] = {}
    keys = {file_name(spec, mod): mod.KEY for mod in DASHBOARDS}
    for name, model in build_all(spec, groups).items():
        for part_name, text in parts(spec, name, keys[name], to_json(model, spec.path)):
            out[JSON_PATH.format(name=part_name)] = text
            if s.configmaps:
                out[CONFIGMAP_PATH.format(name=part_name)] = configmap(spec, s, part_name, text)
    return out


def parts(spec: Spec, name: str, key: str, text: str) -> list[tuple[str, str]]:
    """[(file name, JSON text)] of dashboard ``name`` (JSON ``text``, dashboard module ``key``):
    itself, or its parts when its ConfigMap would be over the apply budget."""
    model = json.loads(text)
    pieces = split.split(model, lambda k: base.uid(spec, f"{key}-{k}"), lambda d: compact_size(spec, name, d))
    if len(pieces) == 1:
        return [(name, text)]
    return [(name if k == 1 else f"{name}-{k}", to_json(part)) for k, part in enumerate(pieces, start=1)]
