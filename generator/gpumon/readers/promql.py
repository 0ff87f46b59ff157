"""PromQL helpers for the lint checks, all on promql-parser's AST (never on the text).

- :func:`parse` caches parsed expressions; a syntax error comes back as a string.
- :func:`nodes` walks an AST depth-first, yielding each node with its ancestors.
- :func:`selectors` / :func:`metric_name` find the series an expression reads.
- :func:`output_labels` works out which labels an expression's result can carry (used for
  ``$labels.X`` in annotations and for recording rules read by other rules).

Semantics follow Prometheus' ``promql/engine.go`` (``resultMetric``, aggregations, ``absent``)
and ``docs/querying/functions.md``.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Iterator

import promql_parser as pp

#: Functions that read a range vector as a counter (they compensate resets).
COUNTER_FUNCS = ("rate", "irate", "increase", "resets")
#: Functions that read a range vector as a gauge (a counter reset looks like a huge drop).
GAUGE_DELTA_FUNCS = ("delta", "idelta", "deriv", "predict_linear")
#: Functions that need at least two samples inside their window to return anything.
TWO_SAMPLE_FUNCS = COUNTER_FUNCS + GAUGE_DELTA_FUNCS
#: Comparison operators (a binary expression with one of these and no ``bool`` filters series).
COMPARISONS = ("==", "!=", ">", "<", ">=", "<=")


#: Caps checked before promql-parser sees a query. The parser's memory grows with the square of
#: the operator count (``up or up ...``: 500 operators 50 MB, 2,000 operators 630 MB, 5,000 abort
#: the process) and its time with nesting (5,000 parentheses: 7 s, 1.7 GB); the AST walkers here
#: recurse once per level. Real queries stay far below: across gpumon's rendered outputs and its
#: lint corpus of public mixins (2,756 queries) the largest has 2,042 characters, 15 operators and
#: brackets 7 deep. Length alone costs little (a 240,000-character query with 200 operators parses
#: in 0.04 s), so the length cap is the API server's annotation limit, which no Kubernetes object
#: gpumon renders can pass: a spec with every catalogued field renders a 68,000-character per-node
#: coverage rule (a regex of field names). Queries validate *sends* keep to
#: :data:`MAX_SENT_QUERY_CHARS`: they travel in a GET URL, which proxies cut far sooner.
MAX_QUERY_CHARS = 262144
MAX_SENT_QUERY_CHARS = 16384
MAX_QUERY_OPERATORS = 200
MAX_QUERY_DEPTH = 64
_STRINGS = re.compile(r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'|`[^`]*`')
_OPERATORS = re.compile(r"\b(?:or|and|unless)\b|==|!=|>=|<=|[-+*/%^<>]", re.I)
_OPEN, _CLOSE = "([{", ")]}"


def too_complex(text: str, max_chars: int = MAX_QUERY_CHARS) -> str | None:
    """Why ``text`` is refused before parsing (over ``max_chars`` characters, :data:`MAX_QUERY_OPERATORS`
    binary operators or :data:`MAX_QUERY_DEPTH` nested brackets), or None. Linear in the text;
    string literals and label matchers are not counted as operators. Pass
    :data:`MAX_SENT_QUERY_CHARS` for a query that is to be sent to a server."""
    if len(text) > max_chars:
        return f"query of {len(text)} characters, over gpumon's cap of {max_chars}"
    bare = _STRINGS.sub('""', text)
    steps = [1 if c in _OPEN else -1 for c in bare if c in _OPEN or c in _CLOSE]
    depth = max(itertools.accumulate(steps, initial=0))
    if depth > MAX_QUERY_DEPTH:
        return f"query nested {depth} brackets deep, over gpumon's cap of {MAX_QUERY_DEPTH}"
    operators = len(_OPERATORS.findall(re.sub(r"\{[^{}]*\}", "{}", bare)))
    if operators > MAX_QUERY_OPERATORS:
        return f"query with {operators} operators, over gpumon's cap of {MAX_QUERY_OPERATORS}"
    return None


@lru_cache(maxsize=4096)
def _parse_cached(text: str):
    refused = too_complex(text)
    if refused:
        return None, refused
    try:
        return pp.parse(text), None
    except (ValueError, TypeError) as exc:
        return None, str(exc) or "parse error"


def parse(text: str) -> tuple[object | None, str | None]:
    """Parse ``text`` with promql-parser.

    Returns:
        ``(ast, None)`` on success, ``(None, message)`` on a syntax error (promql-parser's own
        message, e.g. ``unclosed left parenthesis``) or a query refused by :func:`too_complex`
        (never handed to the parser).
    """
    return _parse_cached(text)


def normalize(text: str) -> str:
    """Canonical form of an expression for comparisons (whitespace, duration spelling and
    grouping placement removed); the text itself when it does not parse."""
    ast, _ = parse(text)
    return ast.prettify() if ast is not None else " ".join(text.split())


def children(node) -> list:
    """Direct sub-expressions of an AST node, left to right."""
    if isinstance(node, pp.AggregateExpr):
        out = [node.param] if node.param is not None else []
        return out + [node.expr]
    if isinstance(node, pp.BinaryExpr):
        return [node.lhs, node.rhs]
    if isinstance(node, (pp.ParenExpr, pp.UnaryExpr, pp.SubqueryExpr)):
        return [node.expr]
    if isinstance(node, pp.Call):
        return list(node.args)
    if isinstance(node, pp.MatrixSelector):
        return [node.vector_selector]
    return []


def nodes(node, ancestors: tuple = ()) -> Iterator[tuple[object, tuple]]:
    """Depth-first ``(node, ancestors)`` pairs; ``ancestors`` is outermost first."""
    yield node, ancestors
    for child in children(node):
        yield from nodes(child, ancestors + (node,))


def func_name(node) -> str | None:
    """The function name of a :class:`Call` node, else None."""
    return node.func.name if isinstance(node, pp.Call) else None


def agg_op(node) -> str | None:
    """``sum``, ``max`` ... for an aggregation node, else None."""
    return str(node.op) if isinstance(node, pp.AggregateExpr) else None


def metric_name(vs) -> str | None:
    """The metric name a vector selector reads: ``x{}`` or ``{__name__="x"}``; None for regex names."""
    if vs.name:
        return vs.name
    for m in vs.matchers.matchers:
        if m.name == "__name__" and m.op == pp.MatchOp.Equal:
            return m.value
    return None


def selectors(node) -> Iterator[tuple[object, tuple]]:
    """Every vector selector below ``node`` (also those inside range selectors), with ancestors."""
    for n, anc in nodes(node):
        if isinstance(n, pp.VectorSelector):
            yield n, anc


def matchers(vs) -> list:
    """All label matchers of a selector (``or`` alternatives included)."""
    out = list(vs.matchers.matchers)
    for alt in vs.matchers.or_matchers or []:
        out.extend(alt)
    return out


def range_seconds(node) -> float | None:
    """Window of a range selector or subquery in seconds, else None."""
    if isinstance(node, (pp.MatrixSelector, pp.SubqueryExpr)) and node.range is not None:
        return node.range.total_seconds()
    return None


# --------------------------------------------------------------------------- label inference


@dataclass(frozen=True)
class LabelSet:
    """Labels an expression's result may carry.

    ``open`` means "every label of the input series" (not known statically) except ``removed``;
    otherwise exactly ``known``.
    """

    open: bool = False
    known: frozenset = frozenset()
    removed: frozenset = frozenset()

    def may_have(self, label: str) -> bool:
        """True when a result series can carry ``label``."""
        return label not in self.removed if self.open else label in self.known

    def keep(self, labels) -> "LabelSet":
        labels = frozenset(labels)
        if self.open:
            return LabelSet(False, labels - self.removed)
        return LabelSet(False, self.known & labels)

    def drop(self, labels) -> "LabelSet":
        labels = frozenset(labels)
        if self.open:
            return LabelSet(True, frozenset(), self.removed | labels)
        return LabelSet(False, self.known - labels)

    def add(self, labels) -> "LabelSet":
        labels = frozenset(labels)
        if self.open:
            return LabelSet(True, frozenset(), self.removed - labels)
        return LabelSet(False, self.known | labels)

    def union(self, other: "LabelSet") -> "LabelSet":
        """Labels either side may carry (``or``)."""
        if self.open and other.open:
            return LabelSet(True, frozenset(), self.removed & other.removed)
        if self.open or other.open:
            opened, closed = (self, other) if self.open else (other, self)
            return LabelSet(True, frozenset(), opened.removed - closed.known)
        return LabelSet(False, self.known | other.known)


ANY = LabelSet(open=True)
NONE = LabelSet()

#: Resolves a metric name (e.g. a recording rule) to the labels its series carry, or None.
Resolver = Callable[[str], "LabelSet | None"]


def output_labels(node, resolve: Resolver = lambda name: None) -> LabelSet:
    """Labels the result of ``node`` may carry.

    Args:
        node: a promql-parser AST node.
        resolve: maps a metric name to its known labels (recording rules), None = unknown (open).
    Returns:
        a :class:`LabelSet`; raw series are open (any label), aggregations and ``on()`` narrow it.
    """
    if isinstance(node, pp.VectorSelector):
        name = metric_name(node)
        known = resolve(name) if name else None
        return known if known is not None else ANY
    if isinstance(node, (pp.MatrixSelector, pp.ParenExpr, pp.UnaryExpr, pp.SubqueryExpr)):
        return output_labels(children(node)[0], resolve)
    if isinstance(node, (pp.NumberLiteral, pp.StringLiteral)):
        return NONE
    if isinstance(node, pp.AggregateExpr):
        inner = output_labels(node.expr, resolve)
        op = str(node.op)
        if op in ("topk", "bottomk", "limitk", "limit_ratio"):
            return inner
        mod = node.modifier
        if mod is None:
            out = NONE
        elif mod.type == pp.AggModifierType.By:
            out = inner.keep(mod.labels)
        else:
            out = inner.drop(mod.labels)
        if op == "count_values" and isinstance(node.param, pp.StringLiteral):
            out = out.add([node.param.val])
        return out
    if isinstance(node, pp.Call):
        name = node.func.name
        args = list(node.args)
        if name in ("absent", "absent_over_time"):
            arg = args[0] if args else None
            if isinstance(arg, pp.MatrixSelector):
                arg = arg.vector_selector
            if isinstance(arg, pp.VectorSelector):
                return LabelSet(False, frozenset(m.name for m in arg.matchers.matchers
                                                 if m.op == pp.MatchOp.Equal and m.name != "__name__"))
            return NONE
        if name in ("vector", "time", "scalar", "pi") or not args:
            return NONE
        if name in ("label_replace", "label_join") and len(args) > 1 and isinstance(args[1], pp.StringLiteral):
            return output_labels(args[0], resolve).add([args[1].val])
        if name == "histogram_quantile" and len(args) > 1:
            return output_labels(args[1], resolve).drop(["le"])
        for arg in args:
            if not isinstance(arg, (pp.NumberLiteral, pp.StringLiteral)):
                return output_labels(arg, resolve)
        return NONE
    if isinstance(node, pp.BinaryExpr):
        return _binary_labels(node, resolve)
    return ANY


def _binary_labels(node, resolve: Resolver) -> LabelSet:
    lhs, rhs = output_labels(node.lhs, resolve), output_labels(node.rhs, resolve)
    op = str(node.op)
    scalar_l = _is_scalar(node.lhs)
    scalar_r = _is_scalar(node.rhs)
    if scalar_l and scalar_r:
        return NONE
    if scalar_r:
        return lhs
    if scalar_l:
        return rhs
    mod = node.modifier
    if op in ("and", "unless"):
        return lhs
    if op == "or":
        return lhs.union(rhs)
    matching = mod.matching if mod is not None else None
    card = mod.card if mod is not None else pp.VectorMatchCardinality.OneToOne
    include = list(mod.group_labels or []) if mod is not None else []
    if card == pp.VectorMatchCardinality.OneToMany:
        base, other = rhs, lhs
    else:
        base, other = lhs, rhs
    if card == pp.VectorMatchCardinality.OneToOne and matching is not None:
        if matching.type == pp.LabelModifierType.Include:
            base = base.keep(matching.labels)
        else:
            base = base.drop(matching.labels)
    if include:
        base = base.add([lab for lab in include if other.may_have(lab)])
    return base


def _is_scalar(node) -> bool:
    while isinstance(node, (pp.ParenExpr, pp.UnaryExpr)):
        node = node.expr
    if isinstance(node, pp.NumberLiteral):
        return True
    if isinstance(node, pp.Call) and node.func.name in ("scalar", "time", "pi"):
        return True
    if isinstance(node, pp.BinaryExpr):
        return _is_scalar(node.lhs) and _is_scalar(node.rhs)
    return False


def is_scalar(node) -> bool:
    """True when ``node`` evaluates to a scalar (number literal, ``scalar()``, ``time()``, ...)."""
    return _is_scalar(node)
