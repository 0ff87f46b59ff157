"""``delta-on-counter``: ``delta``/``idelta``/``deriv``/``predict_linear`` or ``x - x offset d`` on a counter.

What: gauge functions, or a raw subtraction of an offset copy of the same series, applied to a
metric whose kind (spec first, else dcgm-exporter's field list) is ``counter``, e.g.
``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`` (mJ since boot).
Why: counters reset when the driver reloads or the GPU resets; ``delta`` then goes hugely
negative (-17,999,000 mJ in aitra-ai/aitra-meter#59) while ``rate``/``increase`` compensate the reset.
Silence: ``# gpumon-lint: ignore delta-on-counter`` on the rule, or ``--disable delta-on-counter``.
"""

from __future__ import annotations

from typing import Iterator

import promql_parser as pp

from ...findings import Finding
from ...readers import promql
from ._base import make, parsed

ID = "delta-on-counter"
ORDER = 50
SEVERITY = "error"


def check(inputs, ctx) -> Iterator[Finding]:
    for query, ast in parsed(inputs):
        for node, _ in promql.nodes(ast):
            fn = promql.func_name(node)
            if fn in promql.GAUGE_DELTA_FUNCS:
                for vs, _ in promql.selectors(node):
                    name = promql.metric_name(vs)
                    if name and ctx.kinds.get(name) == "counter":
                        yield make(ID, SEVERITY, query.subject, f"{fn}() on {name}, a counter: a reset makes it "
                                   "jump negative", "use rate() or increase(), which compensate counter resets",
                                   query.where(fn + "("), metric=name)
            elif isinstance(node, pp.BinaryExpr) and str(node.op) == "-":
                name = _offset_pair(node)
                if name and ctx.kinds.get(name) == "counter":
                    yield make(ID, SEVERITY, query.subject, f"{name} - {name} offset ...: a raw difference of a "
                               "counter goes negative across a reset", "use increase(x[window])",
                               query.where(name), metric=name)


def _strip(node):
    while isinstance(node, pp.ParenExpr):
        node = node.expr
    return node


def _offset_pair(node) -> str | None:
    lhs, rhs = _strip(node.lhs), _strip(node.rhs)
    if isinstance(lhs, pp.VectorSelector) and isinstance(rhs, pp.VectorSelector):
        a, b = promql.metric_name(lhs), promql.metric_name(rhs)
        if a and a == b and (lhs.offset is not None) != (rhs.offset is not None):
            return a
    return None
