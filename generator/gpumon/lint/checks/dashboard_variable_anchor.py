"""``dashboard-variable-anchor``: a template variable that takes its values from one DCGM field.

What: a query variable such as ``label_values(DCGM_FI_DEV_GPU_TEMP, Hostname)`` whose PromQL reads
raw DCGM field series only.
Why: no single field exists on every GPU: vGPU guests do not collect DCGM_FI_DEV_GPU_TEMP
(NVIDIA/dcgm-exporter#236: the bundled dashboard was empty on vGPU), MIG instances do not report
DCGM_FI_DEV_GPU_UTIL (spec ``mig: unsupported``), profiling fields need the profiling module
(dcgm-exporter#571). When the anchor field is missing the variable is empty and so is every
panel filtered by it — exactly when the dashboard is needed. Anchor variables on gpumon's GPU
inventory ``job_gpu:gpumon_inventory:group`` (built from all required fields) or on ``up{job=...}``.
Silence: ``--disable dashboard-variable-anchor``.
"""

from __future__ import annotations

import re
from typing import Iterator

from ...findings import Finding
from ...promqltext import matcher
from ...readers import promql
from ...rules import names
from ._base import make

ID = "dashboard-variable-anchor"
ORDER = 230
SEVERITY = "warning"


def _why(name: str, ctx) -> str:
    metric = ctx.spec.metric(name)
    if metric is not None and metric.mig == "unsupported":
        return "MIG instances do not report it"
    if metric is not None and metric.presence != "required":
        return f"the spec marks it {metric.presence}"
    if name == "DCGM_FI_DEV_GPU_TEMP":
        return "vGPU guests do not collect it (dcgm-exporter#236)"
    if name.startswith("DCGM_FI_PROF_"):
        return "it needs DCGM's profiling module"
    return "any one field can be missing on a GPU model, MIG or vGPU mode, or exporter field list"


def check(inputs, ctx) -> Iterator[Finding]:
    for dash in inputs.dashboards:
        for var in dash.variables:
            if var.query is None or var.query.ast is None:
                continue
            metrics = {promql.metric_name(vs) for vs, _ in promql.selectors(var.query.ast)}
            if metrics and all(m and m.lower().startswith("dcgm") for m in metrics):
                anchor = sorted(metrics)[0]
                yield make(ID, SEVERITY, f"{dash.subject} {var.subject}",
                           f"${var.name} takes its values from {anchor} only; {_why(anchor, ctx)}, and then the "
                           "variable and every panel filtered by it are empty",
                           f"use {_anchor(var.label or ctx.labels.node, ctx)}", var.query.location, metric=anchor)


def _anchor(label: str, ctx) -> str:
    """A ``label_values()`` that lists ``label`` on every GPU: gpumon's GPU inventory where the
    record keeps the label (job and the GPU identity labels), for ``instance`` the node label first
    (as ``volatile-identity`` advises) then ``up``, else
    a selector of every required field (a series query takes no ``or``)."""
    job = matcher("job", ctx.spec.exporter.job)
    if label in ("job",) + ctx.identity_labels:
        return f"label_values({names.INVENTORY}, {label})"
    if label == "instance":
        # the same advice as volatile-identity's: a node variable first, instance changes with the pod
        return (f"label_values({names.INVENTORY}, {ctx.labels.node}) for a node variable (instance changes when "
                f"the exporter pod restarts), or label_values(up{{{job}}}, instance)")
    required = matcher("__name__", "|".join(re.escape(m.name) for m in ctx.spec.required_metrics), "=~")
    return f"label_values({{{required},{job}}}, {label})"
