"""Which panel of the old dashboard is which panel of the new one: by identity, not position.

A panel is matched, in this order, by
1. its title (when no other panel on either side has it);
2. what it shows: its type and the metrics its queries read (a renamed panel);
3. its id, when the type is the same (hand-made dashboards keep ids across edits).

gpumon used to number panels by position, so removing one field shifted every later id: matching
by id made "Memory clock removed" read as a chain of renames (issue #14). Titles and metrics
follow the panel wherever it moves.
"""

from __future__ import annotations

from ..readers import grafana, promql


def metrics(panel: dict, variables: dict) -> frozenset[str]:
    """Metric names the panel's queries read (from promql-parser's AST)."""
    out = set()
    targets = panel.get("targets")
    for t in targets if isinstance(targets, list) else []:  # hand-edited JSON can hold anything
        expr = t.get("expr") if isinstance(t, dict) else None
        if not isinstance(expr, str):
            continue
        ast, _ = promql.parse(grafana.substitute(expr, variables))
        if ast is None:
            continue
        out |= {name for vs, _ in promql.selectors(ast) if (name := promql.metric_name(vs))}
    return frozenset(out)


def hashable(value):
    """``value`` when it can be a dict key, else its ``repr`` (a panel ``type`` or ``id`` that is
    a list or an object in hand-edited JSON)."""
    return value if isinstance(value, (str, int, float, bool, type(None))) else repr(value)


def _title(p: dict) -> str:
    return " ".join(str(p.get("title", "")).split()).lower()


def _unique(items: list[dict], key) -> dict:
    seen: dict = {}
    for p in items:
        seen.setdefault(key(p), []).append(p)
    return {k: v[0] for k, v in seen.items() if len(v) == 1 and k not in (None, "", (None, frozenset()))}


def pair(old: list[dict], new: list[dict], vo: dict, vn: dict) -> tuple[list[tuple[dict, dict]], list[dict], list[dict]]:
    """Match panels of two versions of one dashboard.

    Returns:
        (pairs (old, new), removed old panels, added new panels), each in dashboard order.
    """
    pairs: list[tuple[dict, dict]] = []
    left, right = list(old), list(new)
    sig_o = {id(p): (hashable(p.get("type")), metrics(p, vo)) for p in left}
    sig_n = {id(p): (hashable(p.get("type")), metrics(p, vn)) for p in right}
    steps = (lambda p, side: _title(p),
             lambda p, side: (side[id(p)] if side[id(p)][1] else None),
             lambda p, side: (hashable(p.get("type")), hashable(p.get("id"))) if p.get("id") is not None else None)
    for key in steps:
        a = _unique(left, lambda p: key(p, sig_o))
        b = _unique(right, lambda p: key(p, sig_n))
        for k in [k for k in a if k in b]:
            pairs.append((a[k], b[k]))
            left.remove(a[k])
            right.remove(b[k])
    order = {id(p): i for i, p in enumerate(new)}
    pairs.sort(key=lambda ab: order[id(ab[1])])
    return pairs, left, right
