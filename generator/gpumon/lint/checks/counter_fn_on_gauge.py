"""``counter-fn-on-gauge``: ``rate``/``irate``/``increase``/``resets`` on a gauge.

What: those functions applied to a metric whose kind is ``gauge`` — by the spec's ``kind`` first,
else by dcgm-exporter's field list. The spec wins over the exporter's ``# TYPE``:
``DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL`` is typed counter but goes down (dcgm-exporter#417).
Why: these functions treat every drop as a counter reset. On ``DCGM_FI_DEV_XID_ERRORS``, whose value
is the code of the last XID rather than a count (NVIDIA/DCGM#227), ``rate()`` is meaningless; on a
gauge that goes down it produces spikes. Use ``max_over_time``, ``changes`` or the value itself.
``delta``/``idelta``/``deriv``/``predict_linear`` are reported too on fields whose spec unit is
``code`` or ``state`` (the XID code, row-remap failure flag, vGPU licence status): their change
over time is meaningless (NVIDIA/DCGM#227).
Silence: ``# gpumon-lint: ignore counter-fn-on-gauge`` on the rule, or ``--disable counter-fn-on-gauge``.
"""

from __future__ import annotations

from typing import Iterator

from ...findings import Finding
from ...readers import promql
from ._base import make, parsed

ID = "counter-fn-on-gauge"
ORDER = 40
SEVERITY = "error"
#: Spec units of fields whose value is an identifier, not an amount (XID code, state flags).
CODE_UNITS = ("code", "state")


def check(inputs, ctx) -> Iterator[Finding]:
    for query, ast in parsed(inputs):
        for node, _ in promql.nodes(ast):
            fn = promql.func_name(node)
            if fn not in promql.COUNTER_FUNCS and fn not in promql.GAUGE_DELTA_FUNCS:
                continue
            for vs, _ in promql.selectors(node):
                name = promql.metric_name(vs)
                if name and fn in promql.GAUGE_DELTA_FUNCS:
                    metric = ctx.spec.metric(name)
                    if metric is not None and metric.unit in CODE_UNITS:
                        yield make(ID, SEVERITY, query.subject,
                                   f"{fn}() on {name}, whose value is a {metric.unit} ({metric.description or 'a code'})"
                                   ", not a quantity: its change over time means nothing",
                                   "compare the value (== / != / > 0) or use changes()", query.where(fn + "("),
                                   metric=name)
                elif name and ctx.kinds.get(name) == "gauge":
                    extra = (" (its value is the code of the last XID, not a count: NVIDIA/DCGM#227)"
                             if name == "DCGM_FI_DEV_XID_ERRORS" else "")
                    yield make(ID, SEVERITY, query.subject, f"{fn}() on {name}, a gauge{extra}",
                               "use the value, max_over_time() or changes(); rate/increase read every drop as a reset",
                               query.where(fn + "("), metric=name)
