"""What a loaded rule runs against what gpumon renders for it: the expression, ``for`` and the
labels gpumon sets (``rule-stale`` of the rules-loaded check, :mod:`.rules_loaded`).

The rules API answers each rule's ``query`` as the server prints it: Prometheus prints its parsed
AST (its own spacing and parentheses, label matchers sorted by name), vmalert the text as
written. Both sides are parsed with promql-parser and printed again, matchers sorted, so the same
expression compares equal whoever printed it. An expression either side cannot parse is not
compared (no finding rather than a false one). ``for`` arrives in seconds (``duration``) from both.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

import promql_parser as pp

from ..readers import promql
from ..rules import Rule
from ..durations import format_duration

#: string literals in printed PromQL (numbers inside them are not thresholds)
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
#: a number literal as promql-parser prints one (durations such as ``5m`` are not)
_NUMBER = re.compile(r"(?<![\w.:])[-+]?(?:\d+\.?\d*(?:e[-+]?\d+)?|Inf|NaN)(?![\w.:])", re.I)
#: rules listed by name in one finding; the rest are counted
SHOWN = 5


@lru_cache(maxsize=4096)
def canonical(text: str) -> str | None:
    """``text`` parsed and printed by promql-parser with each selector's matchers sorted by name
    (Prometheus prints them sorted), or None when it does not parse."""
    ast, _ = promql.parse(text)
    if ast is None:
        return None
    printed = str(ast)
    blocks = {}
    for node, _ in promql.nodes(ast):
        if isinstance(node, pp.VectorSelector) and len(node.matchers.matchers) > 1 and not node.matchers.or_matchers:
            block = str(node.matchers)
            blocks[block] = "{" + ",".join(sorted(str(m) for m in node.matchers.matchers)) + "}"
    if not blocks:
        return printed
    # one pass over the text: a replacement is never replaced again
    pattern = re.compile("|".join(re.escape(b) for b in sorted(blocks, key=len, reverse=True)))
    return pattern.sub(lambda m: blocks[m.group(0)], printed)


def _masked(text: str) -> tuple[str, list[str]]:
    """``text`` with its number literals (outside strings) replaced by ``#``, and those numbers."""
    numbers: list[str] = []
    parts = []
    last = 0
    for s in _STRINGS.finditer(text):
        parts.append(_mask(text[last:s.start()], numbers))
        parts.append(s.group(0))
        last = s.end()
    parts.append(_mask(text[last:], numbers))
    return "".join(parts), numbers


def _mask(text: str, numbers: list[str]) -> str:
    def one(m: re.Match) -> str:
        numbers.append(m.group(0))
        return "#"
    return _NUMBER.sub(one, text)


def _clip(text: str, start: int, width: int = 70) -> str:
    begin = max(0, start - 20)
    piece = text[begin:begin + width]
    return ("..." if begin else "") + piece + ("..." if begin + width < len(text) else "")


def _expr_difference(running: str, spec: str) -> str:
    """``threshold 83 running, 85 in the spec`` when only number literals differ, else both
    expressions from a little before their first difference."""
    shape_r, nums_r = _masked(running)
    shape_s, nums_s = _masked(spec)
    if shape_r == shape_s:
        pairs = [(a, b) for a, b in zip(nums_r, nums_s) if a != b]
        what = "threshold" if len(pairs) == 1 else "numbers"
        return (f"expression differs ({what} {', '.join(a for a, _ in pairs)} running, "
                f"{', '.join(b for _, b in pairs)} in the spec)")
    at = next((i for i, (a, b) in enumerate(zip(running, spec)) if a != b), min(len(running), len(spec)))
    return f"expression differs (running `{_clip(running, at)}`, in the spec `{_clip(spec, at)}`)"


@dataclass(frozen=True)
class Loaded:
    """One rule as the rules API lists it, reduced to what gpumon compares."""

    kind: str
    name: str
    expr: str | None  # canonical; None when it does not parse
    for_: float
    labels: dict

    @classmethod
    def of(cls, rule: dict) -> "Loaded":
        try:
            duration = float(rule.get("duration") or 0)
        except (TypeError, ValueError):
            duration = 0.0
        labels = rule.get("labels") if isinstance(rule.get("labels"), dict) else {}
        query = rule.get("query")
        return cls("alerting" if rule.get("type") == "alerting" else "recording", str(rule.get("name", "")),
                   canonical(query) if isinstance(query, str) else None, duration, labels)


def differences(want: Rule, have: Loaded) -> list[str]:
    """What differs between the rendered rule ``want`` and the loaded ``have`` (empty: the same)."""
    out = []
    spec = canonical(want.expr)
    if spec is not None and have.expr is not None and spec != have.expr:
        out.append(_expr_difference(have.expr, spec))
    if want.alert and abs(float(want.for_ or 0) - have.for_) > 1e-6:
        out.append(f"`for` differs ({format_duration(have.for_) if have.for_ else 'none'} running, "
                   f"{format_duration(want.for_) if want.for_ else 'none'} in the spec)")
    labels = [f"{k}={have.labels.get(k, '(unset)')} running, {v} in the spec" for k, v in want.labels
              if have.labels.get(k) != v]
    if labels:
        out.append("labels differ (" + "; ".join(labels) + ")")
    return out


def stale_rules(rules: tuple[Rule, ...], copy: list[dict]) -> list[str]:
    """``name: what differs`` for each rendered rule of a group that this loaded copy of the group
    lists under its name and type but never as rendered. Rules of one name (one per field) are told
    apart by content: the loaded rule of that name closest to the rendered one is described."""
    loaded: dict[tuple[str, str], list[Loaded]] = {}
    for r in copy:
        if isinstance(r, dict):
            item = Loaded.of(r)
            loaded.setdefault((item.kind, item.name), []).append(item)
    out = []
    for want in rules:
        same_name = loaded.get(("alerting" if want.alert else "recording", want.name), [])
        if not same_name:
            continue  # absent: rule-missing reports it
        found = [differences(want, have) for have in same_name]
        if any(not d for d in found):
            continue
        closest = min(found, key=len)
        out.append(f"{want.name}: {', '.join(closest)}")
    return out
