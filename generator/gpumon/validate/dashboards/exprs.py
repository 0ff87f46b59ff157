"""What a panel query reads and how it can hide an absence, from promql-parser's AST.

* :func:`selectors` -- the series selectors it reads (as PromQL text) and their metric names;
* :func:`mask` -- ``X or vector(0)`` / ``X or on() vector(0)``: the part ``X`` a constant stands
  in for when ``X`` is empty (a missing metric then reads as a healthy 0);
* :func:`two_sample_windows` -- the selectors read through ``rate()``-like functions, with their
  window: such a function returns nothing until the window holds two samples (a young server);
* :func:`filters` -- whether the query keeps only some series (a comparison without ``bool``,
  ``unless``, ``and``, ``topk``/``bottomk``/``limitk``, ``absent``): its emptiness or a subset
  of GPUs can be the healthy state, not a missing series.
"""

from __future__ import annotations

from dataclasses import dataclass

import promql_parser as pp

from ...readers import promql

_FILTER_AGGS = ("topk", "bottomk", "limitk", "limit_ratio")
#: range functions that need at least two samples in their window to return a value (Prometheus'
#: extrapolatedRate, instantValue, deriv and predict_linear all return nothing below two)
TWO_SAMPLE_FUNCS = ("rate", "irate", "increase", "delta", "idelta", "deriv", "predict_linear")
_FILTER_FUNCS = ("absent", "absent_over_time")


@dataclass(frozen=True)
class Selector:
    """One vector selector: its PromQL text (matchers as written) and metric name (None for
    ``{__name__=~"..."}`` selectors)."""

    text: str
    metric: str | None


def _op(node) -> str:
    return str(getattr(node, "op", "")).rsplit(".", 1)[-1].lower()


def parse(text: str):
    """(AST, None) or (None, promql-parser's message)."""
    return promql.parse(text)


def selectors(ast) -> list[Selector]:
    """Distinct selectors below ``ast`` in reading order."""
    out: dict[str, Selector] = {}
    for vs, _ in promql.selectors(ast):
        text = _selector_text(vs)
        out.setdefault(text, Selector(text, promql.metric_name(vs)))
    return list(out.values())


def _selector_text(vs) -> str:
    """The selector without offset/@ modifiers (what to ask the server whether it has series)."""
    name = vs.name or ""
    parts = []
    for m in vs.matchers.matchers:
        op = {"equal": "=", "notequal": "!=", "re": "=~", "notre": "!~"}.get(_op(m), "=")
        value = m.value.replace("\\", "\\\\").replace('"', '\\"')
        parts.append(f'{m.name}{op}"{value}"')
    if not name and not parts:
        return str(vs)
    return f"{name}{{{','.join(parts)}}}" if parts else name


def _is_constant_vector(node) -> bool:
    while isinstance(node, pp.ParenExpr):
        node = node.expr
    return isinstance(node, pp.Call) and promql.func_name(node) == "vector" or \
        isinstance(node, pp.NumberLiteral)


def mask(ast) -> object | None:
    """The left side ``X`` of a top-level ``X or vector(c)`` (through parentheses), else None."""
    node = ast
    while isinstance(node, pp.ParenExpr):
        node = node.expr
    if isinstance(node, pp.BinaryExpr) and _op(node) == "or" and _is_constant_vector(node.rhs):
        return node.lhs
    return None


def two_sample_windows(ast) -> list[tuple[Selector, str]]:
    """``(selector, window as written)`` for every ``rate(sel[window])``-like call below ``ast``
    (:data:`TWO_SAMPLE_FUNCS`), distinct, in reading order; subqueries are left out (their samples
    are evaluations, not scrapes)."""
    out: dict[tuple[str, str], tuple[Selector, str]] = {}
    for node, _ in promql.nodes(ast):
        if not (isinstance(node, pp.Call) and promql.func_name(node) in TWO_SAMPLE_FUNCS):
            continue
        for arg in node.args:
            if isinstance(arg, pp.MatrixSelector) and arg.range is not None:
                seconds = arg.range.total_seconds()
                window = f"{int(seconds * 1000)}ms" if seconds != int(seconds) else f"{int(seconds)}s"
                sel = Selector(_selector_text(arg.vector_selector), promql.metric_name(arg.vector_selector))
                out.setdefault((sel.text, window), (sel, window))
    return list(out.values())


def filters(ast) -> bool:
    """True when the query drops series by value or by another query's presence."""
    for node, _ in promql.nodes(ast):
        if isinstance(node, pp.BinaryExpr):
            op = str(node.op).strip().lower()
            returns_bool = bool(getattr(node.modifier, "return_bool", False)) if node.modifier else False
            if op in ("unless", "and") or (op in promql.COMPARISONS and not returns_bool):
                return True
        elif isinstance(node, pp.AggregateExpr) and promql.agg_op(node) in _FILTER_AGGS:
            return True
        elif isinstance(node, pp.Call) and promql.func_name(node) in _FILTER_FUNCS:
            return True
    return False
