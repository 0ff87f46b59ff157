"""The gpumon spec: YAML on disk -> validated, immutable model every renderer and check uses.

A spec file is checked against the JSON Schema shipped in ``generator/gpumon/schema/gpumon.schema.json``
and then against rules a schema cannot express (duplicate metrics, ranges, intervals). Every
problem is reported at once as ``FILE:LINE:COL: path.to.key: message``; loading never raises
anything but :class:`SpecError`.

The package: :mod:`.model` (the dataclasses), :mod:`.load` (file -> model), :mod:`.positions`
(where a problem is), :mod:`.schemacheck` (the JSON Schema), :mod:`.semantic` (checks a schema cannot express), :mod:`.build` (the model
from a checked document), :mod:`.problems`; the sections' own models :mod:`.kube`, :mod:`.sidecar`,
:mod:`.presets` (source presets) and :mod:`.bounds` (what a plausible spec is).
"""

from __future__ import annotations

from .problems import Problem, SpecError
from .model import VOLATILE_LABELS, DCGM_BLANK_MIN, Threshold, XID_CRITICAL, XID_INFO, XidPolicy, Source, Metric, Labels, Exporter, AlertSettings, PrometheusRuleMeta, DashboardSettings, Spec
from .schemacheck import schema, schema_text
from .load import MAX_SPEC_BYTES, MAX_NODES, MAX_DEPTH, default_spec_path, load_spec, parse_spec

__all__ = [
    "Problem",
    "SpecError",
    "VOLATILE_LABELS",
    "DCGM_BLANK_MIN",
    "Threshold",
    "XID_CRITICAL",
    "XID_INFO",
    "XidPolicy",
    "Source",
    "Metric",
    "Labels",
    "Exporter",
    "AlertSettings",
    "PrometheusRuleMeta",
    "DashboardSettings",
    "Spec",
    "MAX_SPEC_BYTES",
    "MAX_NODES",
    "MAX_DEPTH",
    "default_spec_path",
    "load_spec",
    "parse_spec",
    "schema",
    "schema_text",
]
