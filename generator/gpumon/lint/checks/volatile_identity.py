"""``volatile-identity``: GPUs or nodes identified by labels that change on restarts.

What: aggregations ``by (...)`` and vector matching ``on (...)`` over GPU series that keep
``instance``, ``pod``, ``namespace``, ``container``, ``service``, ``endpoint`` or ``exported_*``
but none of the stable labels (node label, UUID, cluster); dashboard template variables listing
such a label; legends (``legendFormat``) naming series by one and by no stable label. Aggregations joined with
target-level series (``up``, ``scrape_*``), which really are per target, are fine, and so is a
legend such as ``{{Hostname}} {{instance}}``.
Why: ``instance`` is the exporter pod's address: it changes when the DaemonSet pod restarts, so
alerts resolve and re-fire, ``for`` restarts, and history splits; with ``honor_labels`` the pod
labels become ``exported_*`` (Prometheus honor_labels). Identify GPUs by
``UUID`` and nodes by the node label (``Hostname``/``hostname``).
Silence: ``# gpumon-lint: ignore volatile-identity`` on the rule, or ``--disable volatile-identity``.
"""

from __future__ import annotations

import re
from typing import Iterator

import promql_parser as pp

from ...findings import Finding
from ...readers import promql
from ._base import make, parsed

ID = "volatile-identity"
ORDER = 100
SEVERITY = "warning"
_LEGEND = re.compile(r"\{\{\s*([A-Za-z_]\w*)\s*\}\}")


def _reads_gpu(node, ctx) -> bool:
    return any(ctx.is_gpu_metric(promql.metric_name(vs)) for vs, _ in promql.selectors(node))


def _reads_target_level(node, ctx) -> bool:
    names = [promql.metric_name(vs) for vs, _ in promql.selectors(node)]
    return any(n and not ctx.is_gpu_metric(n) for n in names)


def _joined_to_targets(ancestors, ctx) -> bool:
    """True when the aggregation feeds a binary operation with target-level series (``up``,
    ``scrape_*``): grouping by ``job, instance`` there maps targets to nodes, which is right."""
    return any(isinstance(a, pp.BinaryExpr) and (_reads_target_level(a.lhs, ctx) or _reads_target_level(a.rhs, ctx))
               for a in ancestors)


def _selects_unlabelled(node, stable) -> bool:
    """True when every selector asks for series *without* a stable label (``UUID=""``): then
    the volatile label is all there is to name them (gpumon's GpuIdentityLabelMissing)."""
    found = list(promql.selectors(node))
    return bool(found) and all(any(m.name in stable and m.op == pp.MatchOp.Equal and m.value == ""
                                   for m in promql.matchers(vs)) for vs, _ in found)


def check(inputs, ctx) -> Iterator[Finding]:
    stable = ctx.stable_labels
    for query, ast in parsed(inputs):
        for node, ancestors in promql.nodes(ast):
            labels = None
            if isinstance(node, pp.AggregateExpr) and node.modifier is not None \
                    and node.modifier.type == pp.AggModifierType.By and _reads_gpu(node.expr, ctx) \
                    and not _joined_to_targets(ancestors, ctx):
                labels, how = list(node.modifier.labels), "by"
            elif isinstance(node, pp.BinaryExpr) and node.modifier is not None and node.modifier.matching is not None \
                    and node.modifier.matching.type == pp.LabelModifierType.Include \
                    and _reads_gpu(node.lhs, ctx) and _reads_gpu(node.rhs, ctx) \
                    and not _reads_target_level(node.lhs, ctx) and not _reads_target_level(node.rhs, ctx):
                labels, how = list(node.modifier.matching.labels), "on"
            if not labels:
                continue
            volatile = [lab for lab in labels if ctx.volatile(lab)]
            if volatile and not set(labels) & stable and not _selects_unlabelled(node, stable):
                yield make(ID, SEVERITY, query.subject,
                           f"{how} ({', '.join(labels)}) identifies GPUs by {', '.join(volatile)}, which changes "
                           "when the exporter pod restarts", f"use {ctx.labels.node} and {ctx.labels.gpu} instead",
                           query.where(volatile[0]), label=volatile[0])
    for dash in inputs.dashboards:
        for var in dash.variables:
            if var.label and ctx.volatile(var.label):
                yield make(ID, SEVERITY, f"{dash.subject} {var.subject}",
                           f"template variable ${var.name} lists values of {var.label}, which changes when the "
                           "exporter pod restarts (and is the exporter's address, not the GPU node)",
                           f"list {ctx.labels.node} (nodes) or {ctx.labels.gpu} (GPUs) instead",
                           dash.at(var.pointer + "/name"), label=var.label)
        for panel in dash.panels:
            for j, target in panel.targets:
                legend = target.get("legendFormat")
                if not isinstance(legend, str):
                    continue
                named = _LEGEND.findall(legend)
                used = [lab for lab in named if ctx.volatile(lab)]
                if used and not set(named) & stable:
                    yield make(ID, SEVERITY, f"{dash.subject} {panel.subject}",
                               f"legend {legend!r} names series by {used[0]}, which changes when the exporter pod "
                               "restarts", f"use {{{{{ctx.labels.node}}}}} and {{{{{ctx.labels.gpu_index}}}}}",
                               dash.at(f"{panel.pointer}/targets/{j}/legendFormat"), label=used[0])
