"""Grafana query text -> parseable PromQL.

Grafana expands template variables and macros textually before it sends a query, so a panel
query is not PromQL until they are replaced. Inside string literals (label matcher values such as
``instance=~"$instance"``) a ``$var`` is kept: any text is a valid string. Outside strings:
window macros and interval variables become :data:`~gpumon.readers.model.MACRO_WINDOW` seconds,
number macros a number, and other variables their current value (or their name), so the
expression parses the way Grafana would send it.

Macro list: Grafana docs "Global variables" ($__interval, $__interval_ms, $__rate_interval,
$__range, $__range_s, $__range_ms, $__from, $__to, $__auto).
Variable syntaxes: ``$name``, ``${name}``, ``${name:format}``, ``[[name]]``.
"""

from __future__ import annotations

import re

from .model import MACRO_WINDOW

_WINDOW_MACROS = {"__interval", "__rate_interval", "__range", "__auto", "__auto_interval"}
_VAR = re.compile(r"\$\{(\w+)(?::[^}]*)?\}|\$(\w+)|\[\[(\w+)(?::[^\]]*)?\]\]")
_SIMPLE_VALUE = re.compile(r"^[A-Za-z_:][\w:]*$|^-?\d+(\.\d+)?$|^\d+(ms|s|m|h|d|w|y)$")


def substitute(text: str, variables: dict[str, dict]) -> str:
    """Replace Grafana macros and template variables outside string literals.

    Args:
        text: the query as written in the dashboard.
        variables: ``{name: variable JSON object}`` from ``templating.list``.
    Returns:
        query text for promql-parser.
    """
    out: list[str] = []
    quote = None
    depth_bracket = 0
    i = 0
    while i < len(text):
        ch = text[i]
        if quote:
            out.append(ch)
            if ch == "\\" and i + 1 < len(text):
                out.append(text[i + 1])
                i += 2
                continue
            if ch == quote:
                quote = None
            i += 1
            continue
        if ch in "\"'`":
            quote = ch
        elif ch == "[" and not text.startswith("[[", i):
            depth_bracket += 1
        elif ch == "]" and depth_bracket:
            depth_bracket -= 1
        match = _VAR.match(text, i) if ch in "$[" else None
        if match:
            name = match.group(1) or match.group(2) or match.group(3)
            out.append(_replacement(name, variables, in_window=depth_bracket > 0 or _after_offset(out)))
            i = match.end()
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _after_offset(out: list[str]) -> bool:
    return "".join(out[-12:]).rstrip().endswith("offset")


def _replacement(name: str, variables: dict[str, dict], in_window: bool) -> str:
    if name.startswith("__"):
        if name in _WINDOW_MACROS:
            return f"{MACRO_WINDOW}s"
        return str(MACRO_WINDOW)
    var = variables.get(name) or {}
    if in_window or var.get("type") == "interval":
        return f"{MACRO_WINDOW}s"
    current = var.get("current") or {}
    value = current.get("value") if isinstance(current, dict) else None
    if isinstance(value, list):
        value = value[0] if len(value) == 1 else None
    if isinstance(value, str) and _SIMPLE_VALUE.match(value) and not value.startswith("$"):
        return value
    return name


def split_variable_query(query: str) -> tuple[str | None, str | None]:
    """Split a Prometheus template-variable query into (PromQL, label).

    ``label_values(expr, label)`` -> (expr, label); ``label_values(label)`` -> (None, label);
    ``query_result(expr)`` -> (expr, None); ``label_names()``/``metrics(re)`` -> (None, None).
    The wrapper functions are Grafana's (docs: "Prometheus template variables"), not PromQL.
    """
    text = query.strip()
    for fn in ("label_values", "query_result"):
        if text.startswith(fn + "(") and text.endswith(")"):
            inner = text[len(fn) + 1:-1]
            if fn == "query_result":
                return inner.strip(), None
            cut = _last_top_level_comma(inner)
            if cut is None:
                return None, inner.strip() or None
            return inner[:cut].strip(), inner[cut + 1:].strip() or None
    return None, None


def _last_top_level_comma(text: str) -> int | None:
    depth, quote, last = 0, None, None
    for i, ch in enumerate(text):
        if quote:
            if ch == quote and text[i - 1] != "\\":
                quote = None
        elif ch in "\"'`":
            quote = ch
        elif ch in "({[":
            depth += 1
        elif ch in ")}]":
            depth -= 1
        elif ch == "," and depth == 0:
            last = i
    return last
