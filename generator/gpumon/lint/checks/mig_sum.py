"""``mig-sum-without-uuid``: ``sum``/``avg``/``count`` of a device-wide field without first
de-duplicating MIG instances by UUID.

What: an aggregation over a field the spec marks ``mig: device`` (the default: power, energy,
temperature, clocks — values of the whole GPU that dcgm-exporter repeats on every MIG instance
series) with no inner ``max/min/avg by (..., UUID, ...)`` (without the MIG instance label) and no
``<mig label>=""`` matcher.
Why: on a GPU split into 7 MIG instances the same 300 W appears 7 times; a node power sum reads
2,100 W, an average temperature weights MIG GPUs 7x, a count counts instances, not GPUs.
Write ``sum by (Hostname) (max by (Hostname, UUID) (DCGM_FI_DEV_POWER_USAGE))`` or use gpumon's
``job_node:DCGM_FI_DEV_POWER_USAGE:sum``.
Silence: ``# gpumon-lint: ignore mig-sum-without-uuid`` on the rule, or ``--disable mig-sum-without-uuid``.
"""

from __future__ import annotations

from typing import Iterator

import promql_parser as pp

from ...findings import Finding
from ...readers import promql
from ._base import make, parsed

ID = "mig-sum-without-uuid"
ORDER = 110
SEVERITY = "warning"
_SUMS = ("sum", "avg", "count")
_DEDUP = ("max", "min", "avg", "group", "quantile")


def _dedups(node, ctx) -> bool:
    if not isinstance(node, pp.AggregateExpr) or str(node.op) not in _DEDUP or node.modifier is None:
        return False
    labels = set(node.modifier.labels)
    mig, gpu = ctx.labels.mig_instance, ctx.labels.gpu
    if node.modifier.type == pp.AggModifierType.By:
        return gpu in labels and mig not in labels
    return mig in labels and gpu not in labels


def _undeduped(node, ctx):
    """Device-wide selectors under ``node`` not passing through a de-duplicating aggregation."""
    if _dedups(node, ctx):
        return []
    if isinstance(node, pp.VectorSelector):
        name = promql.metric_name(node)
        mig_pinned = any(m.name == ctx.labels.mig_instance and m.op == pp.MatchOp.Equal
                         for m in promql.matchers(node))
        return [name] if name and ctx.device_wide(name) and not mig_pinned else []
    out = []
    for child in promql.children(node):
        out.extend(_undeduped(child, ctx))
    return out


def check(inputs, ctx) -> Iterator[Finding]:
    for query, ast in parsed(inputs):
        for node, ancestors in promql.nodes(ast):
            op = promql.agg_op(node)
            if op not in _SUMS:
                continue
            if any(promql.agg_op(a) in _SUMS for a in ancestors):
                continue  # report the outermost sum only
            if node.modifier is not None and node.modifier.type == pp.AggModifierType.By \
                    and ctx.labels.mig_instance in node.modifier.labels:
                continue  # grouped per MIG instance: nothing is added across instances
            names = sorted(set(_undeduped(node.expr, ctx)))
            if names:
                yield make(ID, SEVERITY, query.subject,
                           f"{op}() over {', '.join(names)}, a device-wide field every MIG instance repeats: MIG GPUs "
                           "are counted once per instance",
                           f"aggregate max by (..., {ctx.labels.gpu}) first, e.g. {op} by ({ctx.labels.node}) "
                           f"(max by ({ctx.labels.node}, {ctx.labels.gpu}) ({names[0]}))",
                           query.where(op), metric=names[0])
