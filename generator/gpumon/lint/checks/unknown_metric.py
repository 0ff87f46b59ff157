"""``unknown-metric``: a GPU metric name that neither the spec, dcgm-exporter's field lists nor
any known recording rule defines.

What: selectors of names starting with ``DCGM``/``dcgm``, and recording-rule-shaped names
(``level:metric:ops``) mentioning ``dcgm``/``gpumon``, checked against the spec's metrics,
dcgm-exporter's ``default-counters.csv``/``dcp-metrics-included.csv`` (commented fields count:
users enable them), gpumon's recording rules and the recording rules of the linted files.
Old 1.x names (``dcgm_gpu_temp``, exporter ``-o``/``1.x-compatibility-metrics.csv``) are errors
with the current name as hint, unless the same expression also reads the current name (or gpumon's
field-presence series): it then tells the two namings apart on purpose; fields the exporter knows but the spec does not list are ``info``
(gpumon does not check their presence). Other metrics (``up``, node-exporter ...) are not checked.
Why: a typo or a renamed field selects nothing, so the panel says "No data" and the alert never
fires — silently (NVIDIA/gpu-monitoring-tools#143, openobserve/dashboards#30).
Silence: ``# gpumon-lint: ignore unknown-metric`` on the rule, or ``--disable unknown-metric``.
"""

from __future__ import annotations

import difflib
from typing import Iterator

from ...findings import Finding
from ...readers import promql
from ...rules.names import TARGET_NODE
from ._base import make, parsed

ID = "unknown-metric"
ORDER = 30
SEVERITY = "error"


def check(inputs, ctx) -> Iterator[Finding]:
    for query, ast in parsed(inputs):
        seen = set()
        selected = {promql.metric_name(vs) for vs, _ in promql.selectors(ast)}
        for vs, _ in promql.selectors(ast):
            name = promql.metric_name(vs)
            if name in seen or not ctx.is_gpu_metric(name):
                continue
            seen.add(name)
            if name in {s.series for m in ctx.spec.metrics for s in m.sources}:
                continue  # a fallback source the spec declares (issue 13): read on purpose
            if name in ctx.legacy and (ctx.legacy[name] in selected or TARGET_NODE in selected
                                       or ctx.rendered_by_gpumon(query)):
                continue  # compares the 1.x name with the current one on purpose (GpuExporterLegacyNames),
                # or is gpumon's own rule counting GPUs on 1.x names
            if name in ctx.legacy:
                current = ctx.legacy[name]
                hint = f"use {current}" if current else "use the DCGM_FI_* name of this field"
                yield make(ID, "error", query.subject,
                           f"{name} is a dcgm-exporter 1.x name (1.x-compatibility mode); current exporters write "
                           f"{current or 'DCGM_FI_* names'}", hint + "; metric names are case-sensitive",
                           query.where(name),
                           metric=name)
            elif name not in ctx.known:
                close = difflib.get_close_matches(name, sorted(ctx.known), n=1, cutoff=0.8)
                yield make(ID, "error", query.subject,
                           f"{name} is not a field of the spec, of dcgm-exporter's field lists, nor a known "
                           "recording rule: no exporter configuration gpumon knows writes it, so it likely selects "
                           "nothing", f"did you mean {close[0]}?" if close else
                           "check the spelling; if your exporter's field CSV enables this DCGM field, add it to "
                           "the spec's metrics",
                           query.where(name), metric=name)
            elif name not in ctx.spec.metric_names and name not in ctx.records:
                yield make(ID, "info", query.subject,
                           f"{name} is a dcgm-exporter field the spec does not list: gpumon does not check that it "
                           "is collected", "add it to the spec's metrics (presence: optional if not every GPU has it)",
                           query.where(name), metric=name)
