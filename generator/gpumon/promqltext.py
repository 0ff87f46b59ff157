"""The one way gpumon writes a value into PromQL text: :func:`quote` (issue #15, finding 2).

Every PromQL builder (rules, dashboards, rule tests, validate queries) puts label values, the
exporter job, regexes and metric names into selectors through this module, so a value holding ``"``, ``\\`` or
a newline can never end the string and add matchers (``job: 'x",job=~".+'`` stays one value).
PromQL string literals use Go's escapes (Prometheus ``promql/parser/lex.go``).
"""

from __future__ import annotations

import re

_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}
#: str.translate table: the escapes above, other control characters as ``\xNN``
_TABLE = {**{c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F)}, **{ord(k): v for k, v in _ESCAPES.items()}}


def quote(value: str) -> str:
    """``value`` as a double-quoted PromQL string literal (``a"b`` -> ``"a\\"b"``)."""
    return '"' + str(value).translate(_TABLE) + '"'


def literal_replacement(value: str) -> str:
    """``value`` quoted as the replacement argument of ``label_replace`` so that it is written
    literally: ``$1``/``${name}`` there expand regex groups (Go's ``Regexp.Expand``), so a job
    named ``$1`` became an empty label; ``$$`` is a literal ``$``."""
    return quote(str(value).replace("$", "$$"))


#: ``$`` as a PromQL string escape (Go's ``\\x24``): the same character to every server, none to Grafana
DOLLAR = "\\x24"


def regex_literal(text: str) -> str:
    """``text`` as an RE2 regex matching exactly itself (RE2's metacharacters escaped; ``-`` too, for
    character classes): for ``=~`` / ``!~`` matchers of PromQL and Alertmanager alike."""
    return "".join("\\" + c if c in r".^$*+?()[]{}|\-" else c for c in text)


def matcher(label: str, value: str, op: str = "=") -> str:
    """``label="value"`` (or ``=~``, ``!=``, ``!~``) with the value quoted, and a ``$`` in it written
    ``\\x24`` (the same string to Prometheus, VictoriaMetrics and Thanos): Grafana replaces ``$name``
    and ``${name}`` in a panel's query with its template variables before sending it, so a job
    ``exp-$node`` on a dashboard with a ``node`` variable was read as ``exp-(gpu-node-1|...)``."""
    return label + op + quote(value).replace("$", DOLLAR)


def matchers(labels: dict[str, str], op: str = "=") -> str:
    """``k1="v1",k2="v2"`` in the given order."""
    return ",".join(matcher(k, v, op) for k, v in labels.items())


#: a Prometheus metric name (``model.IsValidLegacyMetricName``): the only names written bare
METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


def series(metric: str, inner: str = "", *, bare: bool = False) -> str:
    """A selector ``metric{inner}`` (``inner``: matchers already written with :func:`matchers`).
    The spec schema admits only legal metric names; a name that is not one still cannot add
    operators: it is written as a quoted ``__name__`` matcher (``{__name__="a b",...}``).
    ``bare``: a legal name without matchers is written without braces; an empty name writes
    the matchers alone (``{inner}``, a label set in rule tests' expected alerts)."""
    if not metric or METRIC_NAME.fullmatch(metric):
        return metric if bare and not inner else f"{metric}{{{inner}}}"
    return "{" + ",".join([matcher("__name__", metric)] + ([inner] if inner else [])) + "}"
