"""``absent-no-selector``: ``absent()``/``absent_over_time()`` without an equality matcher on the
job or an identity label.

What: the selector inside absent has no ``job="..."`` and no ``<node>/UUID/gpu/GPU_I_ID/cluster="..."``
matcher, or absent wraps something other than a selector (``absent(sum(x))``).
Why: absent() returns nothing while *any* matching series exists anywhere, so an unfiltered
absent never fires when one node or one GPU goes missing (prometheus/prometheus#9407); and its
result carries only the equality-matched labels, so without them the alert cannot say what is
missing (prometheus/prometheus#9407, verified with promtool). Use one absent per job/entity, or gpumon's
per-GPU lost-series rules.
Silence: ``# gpumon-lint: ignore absent-no-selector`` on the rule, or ``--disable absent-no-selector``.
"""

from __future__ import annotations

from typing import Iterator

import promql_parser as pp

from ...findings import Finding
from ...readers import promql
from ._base import make, parsed

ID = "absent-no-selector"
ORDER = 60
SEVERITY = "error"


def selector_of(call):
    """The vector selector inside an absent()/absent_over_time() call, or None."""
    arg = call.args[0] if call.args else None
    while isinstance(arg, pp.ParenExpr):
        arg = arg.expr
    if isinstance(arg, pp.MatrixSelector):
        return arg.vector_selector
    return arg if isinstance(arg, pp.VectorSelector) else None


def absent_calls(inputs) -> Iterator[tuple]:
    """``(query, function name, selector or None)`` for every absent()/absent_over_time() call in
    the parsed queries of ``inputs`` (shared by the absent checks)."""
    for query, ast in parsed(inputs):
        for node, _ in promql.nodes(ast):
            fn = promql.func_name(node)
            if fn in ("absent", "absent_over_time"):
                yield query, fn, selector_of(node)


def check(inputs, ctx) -> Iterator[Finding]:
    wanted = ("job",) + ctx.identity_labels
    for query, fn, vs in absent_calls(inputs):
        if vs is None:
            yield make(ID, SEVERITY, query.subject, f"{fn}() of an expression that is not a series selector "
                       "returns {} and never says what is missing",
                       f"put the selector itself inside {fn}(), with job=\"...\" and an identity label",
                       query.where(fn + "("))
            continue
        equal = {m.name for m in promql.matchers(vs) if m.op == pp.MatchOp.Equal and m.value}
        if not equal & set(wanted):
            yield make(ID, SEVERITY, query.subject,
                       f"{fn}({vs.prettify()}) has no equality matcher on {', '.join(wanted)}: it stays silent "
                       "while any such series exists anywhere, and its alert carries no labels",
                       f"add job=\"{ctx.spec.exporter.job}\" (and an identity label per entity), or alert on "
                       "gpumon's per-GPU lost-series rules", query.where(fn + "("),
                       metric=promql.metric_name(vs) or "")
