"""Template variables resolved against the server under test, and Grafana's interpolation of
them into a query.

Resolution follows Grafana's Prometheus data source ("Prometheus template variables" docs):
``label_values(selector, label)`` lists the label's values on series matching the selector
over the time range (``/api/v1/label/<label>/values?match[]=``), ``label_values(label)`` without
one, ``query_result(expr)`` the instant results as ``name{labels} value timestamp`` lines,
``metrics(regex)`` metric names, ``label_names()`` label names. The variable's ``regex`` then
filters (and with a capture group, extracts) the values. ``custom`` variables list their
comma-separated options (``text : value`` pairs allowed), ``constant`` and ``textbox`` their
query, ``interval`` their current (else first) option; a ``datasource`` variable is the server
under test.

Which values a check selects: ``All`` when the variable has it (every GPU, the widest view), all
values of a multi-value variable, else the saved current value when it still exists, else the
first. Multi-value and ``All`` selections interpolate as a regex ``(a|b)`` with each value
regex-escaped, or the variable's ``allValue`` (e.g. ``.*``) verbatim, like Grafana.

Bounds (a dashboard is input a pull request controls): the variable regex runs through RE2
(linear time: ``/^(a+)+$/`` cannot backtrack), and a regex RE2 cannot compile (lookarounds,
backreferences) or longer than 4096 characters filters nothing; a variable keeps at most
:data:`MAX_VALUES` values, and one with more is marked ``truncated`` so the panels using it are
not evaluated rather than sent as an enormous ``(a|b|...)`` regex.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ...promapi import PromError
from ...re2check import MAX_LENGTH as MAX_REGEX_CHARS
from ...readers import grafana, promql

try:  # pragma: no cover - google-re2 is a dependency; a platform without its wheel filters nothing
    import re2 as _re2
except ImportError:  # pragma: no cover
    _re2 = None

#: values one variable keeps (Grafana's own pickers list at most a few thousand)
MAX_VALUES = 1000

VAR = re.compile(r"\$\{(\w+)(?::(\w+))?\}|\$(\w+)|\[\[(\w+)(?::(\w+))?\]\]")
_REGEX_SPECIAL = re.compile(r"([\\^$*+?.()|{}\[\]])")


@dataclass
class Resolved:
    """A variable after resolution: every value it offers, the ones selected, and why it may
    have none (``error``: the server's message)."""

    name: str
    type: str
    definition: str = ""
    values: list[str] = field(default_factory=list)
    selected: list[str] = field(default_factory=list)
    all_selected: bool = False
    all_value: str | None = None
    label: str | None = None
    error: str | None = None
    datasource: bool = False
    multi: bool = False
    truncated: int = 0  # values dropped over MAX_VALUES (0: none)

    @property
    def empty(self) -> bool:
        """A query variable with no value: every panel using it shows no data."""
        return self.type == "query" and not self.values

    def text(self, fmt: str | None = None) -> str:
        """The selection interpolated into a query (Grafana's Prometheus formatting)."""
        if self.datasource:
            return self.selected[0] if self.selected else "server under test"
        if self.all_selected and self.all_value is not None and fmt in (None, "regex"):
            return self.all_value
        values = self.selected
        if fmt == "raw" or fmt == "text":
            return ",".join(values)
        if fmt == "csv":
            return ",".join(values)
        if fmt == "pipe":
            return "|".join(values)
        if len(values) == 1 and not (self.all_selected or self.multi):
            return values[0] if fmt is None else escape_regex(values[0])
        escaped = [escape_regex(v) for v in values]
        return "(" + "|".join(escaped) + ")" if len(escaped) != 1 else escaped[0]


def escape_regex(value: str) -> str:
    """A value as a literal inside a PromQL regex string (Grafana's ``prometheusRegularEscape``)."""
    return _REGEX_SPECIAL.sub(r"\\\\\1", value).replace("'", "\\\\'")


def interpolate(text: str, variables: dict[str, Resolved], macros: dict[str, str]) -> tuple[str, set[str]]:
    """``text`` with macros and variables replaced as Grafana sends it.

    Returns:
        (query text, names of the dashboard variables it used).
    """
    used: set[str] = set()

    def repl(match: re.Match) -> str:
        name = match.group(1) or match.group(3) or match.group(4)
        fmt = match.group(2) or match.group(5)
        if name in macros:
            return macros[name]
        var = variables.get(name)
        if var is None:
            return match.group(0)
        used.add(name)
        return var.text(fmt)

    # longest names first: $__interval_ms before $__interval (the \w+ in VAR is greedy anyway)
    return VAR.sub(repl, text), used


def _regex(pattern: str):
    """A Grafana variable regex ``/re/flags`` compiled with RE2 (linear time), None when unset,
    too long, or not RE2 syntax."""
    if not pattern or _re2 is None or len(pattern) > MAX_REGEX_CHARS:
        return None
    body, flags = pattern, ""
    m = re.fullmatch(r"/(.*)/([gimsuy]*)", pattern, re.S)
    if m:
        body = m.group(1)
        flags = "".join(f for f in "is" if f in m.group(2))
    body = re.sub(r"\(\?<(\w+)>", r"(?P<\1>", body)  # JS named groups
    options = _re2.Options()
    options.log_errors = False
    try:
        return _re2.compile(f"(?{flags}){body}" if flags else body, options=options)
    except Exception:  # noqa: BLE001 - re2.error and its relatives
        return None


def _apply_regex(values: list[str], pattern: str) -> list[str]:
    rx = _regex(pattern)
    if rx is None:
        return values
    out = []
    for v in values:
        m = rx.search(v)
        if not m:
            continue
        if "value" in rx.groupindex:
            out.append(m.group("value"))
        elif "text" in rx.groupindex:
            out.append(m.group("text"))
        elif rx.groups:
            out.append(m.group(1))
        else:
            out.append(v)
    return out


def _sort(values: list[str], sort) -> list[str]:
    values = list(dict.fromkeys(v for v in values if v is not None))
    def num(v):
        try:
            return float(re.search(r"-?\d+(\.\d+)?", v).group(0))
        except (AttributeError, ValueError):
            return float("inf")
    if sort in (1, 2):
        return sorted(values, reverse=sort == 2)
    if sort in (3, 4):
        return sorted(values, key=num, reverse=sort == 4)
    if sort in (5, 6):
        return sorted(values, key=str.lower, reverse=sort == 6)
    return values


def _current(var: dict) -> list[str]:
    cur = var.get("current") if isinstance(var.get("current"), dict) else {}
    value = cur.get("value")
    if isinstance(value, list):
        return [str(v) for v in value]
    return [str(value)] if value not in (None, "") else []


def _custom_options(query: str) -> list[str]:
    out = []
    for part in re.split(r"(?<!\\),", query or ""):
        part = part.strip().replace("\\,", ",")
        if not part:
            continue
        text, sep, value = part.partition(" : ")
        out.append(value.strip() if sep else part)
    return out


def values_for(var: dict, definition: str, run, variables: dict[str, Resolved], macros: dict[str, str]) \
        -> tuple[list[str], str | None, str | None]:
    """Ask the server for a query variable's values.

    Args:
        run: ``run(kind, *args)`` -> Answer or PromError; kinds ``label_values`` (label,
            match or None), ``query`` (expr), ``labels``.
    Returns:
        (values, label listed or None, error message or None).
    """
    text, _ = interpolate(definition, variables, macros)
    text = text.strip()
    refused = promql.too_complex(text, promql.MAX_SENT_QUERY_CHARS)
    if refused:  # never sent: an earlier variable's values or the definition itself are too large
        return [], None, f"not sent: {refused}"
    m = re.fullmatch(r"metrics\((.*)\)", text, re.S)
    if m:
        ans = run("label_values", "__name__", None)
        if isinstance(ans, PromError):
            return [], "__name__", str(ans)
        rx = _regex(m.group(1).strip())
        return [v for v in ans.data if rx is None or rx.search(v)], "__name__", None
    if re.fullmatch(r"label_names\(\s*\)", text):
        ans = run("labels")
        return ([], None, str(ans)) if isinstance(ans, PromError) else (list(ans.data), None, None)
    expr, label = grafana.split_variable_query(text)
    if text.startswith("query_result("):
        ans = run("query", expr)
        if isinstance(ans, PromError):
            return [], None, str(ans)
        lines = []
        for item in ans.data:
            labels = item.get("metric") or {}
            name = labels.get("__name__", "")
            inner = ", ".join(f'{k}="{v}"' for k, v in labels.items() if k != "__name__")
            value = item.get("value") or [0, ""]
            lines.append(f"{name}{{{inner}}} {value[1]} {int(float(value[0]) * 1000)}")
        return lines, None, None
    if text.startswith("label_values("):
        if not label:
            return [], None, "label_values() without a label"
        if expr:
            ast, err = promql.parse(expr)
            if err:
                return [], label, f"bad selector {expr!r}: {err}"
            if not isinstance(ast, promql.pp.VectorSelector):
                # not a plain selector (match[] takes only selectors): the label over the results
                ans = run("query", f"group by ({label}) ({expr})")
                if isinstance(ans, PromError):
                    return [], label, str(ans)
                return [i.get("metric", {}).get(label) for i in ans.data if i.get("metric", {}).get(label)], label, None
        ans = run("label_values", label, expr)
        if isinstance(ans, PromError):
            return [], label, str(ans)
        return list(ans.data), label, None
    # a plain PromQL query (newer Grafana "classic query" form): like query_result
    ans = run("query", text)
    if isinstance(ans, PromError):
        return [], None, str(ans)
    return [str(i.get("metric")) for i in ans.data], None, None


def resolve(dash_vars: list, run, macros: dict[str, str], server: str) -> dict[str, Resolved]:
    """Resolve a dashboard's variables in order (later ones may use earlier ones).

    Args:
        dash_vars: the loader's :class:`~gpumon.readers.model.Variable` list.
        run: see :func:`values_for`.
        macros: range macros (``$__range`` ...) for variable queries.
        server: how the data source variable reads (the server under test).
    """
    out: dict[str, Resolved] = {}
    for v in dash_vars:
        doc = v.doc
        res = Resolved(v.name, v.type, v.definition, all_value=doc.get("allValue") or None,
                       multi=bool(doc.get("multi")))
        if v.type == "datasource":
            res.datasource = True
            res.values = res.selected = [server]
        elif v.type == "query":
            values, label, error = values_for(doc, v.definition, run, out, macros)
            res.label, res.error = label, error
            res.values = _sort(_apply_regex([str(x) for x in values], str(doc.get("regex") or "")), doc.get("sort"))
        elif v.type == "custom":
            res.values = _custom_options(str(doc.get("query") or ""))
        elif v.type in ("constant", "textbox"):
            res.values = [str(doc.get("query") or "")] if v.type == "constant" else \
                (_current(doc) or [str(doc.get("query") or "")])
        elif v.type == "interval":
            opts = _custom_options(str(doc.get("query") or ""))
            cur = [c for c in _current(doc) if c in opts or not opts]
            res.values = cur[:1] or opts[:1]
        else:  # adhoc filters and others add nothing to the query text
            out[v.name] = res
            continue
        if len(res.values) > MAX_VALUES:
            res.truncated = len(res.values) - MAX_VALUES
            res.values = res.values[:MAX_VALUES]
        if not res.datasource:
            if doc.get("includeAll") and res.values:
                res.all_selected, res.selected = True, list(res.values)
            elif res.multi:
                res.selected = list(res.values)
            else:
                cur = [c for c in _current(doc) if c in res.values]
                res.selected = cur[:1] or res.values[:1]
        out[v.name] = res
    return out
