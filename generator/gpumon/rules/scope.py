"""Every read of a gpumon record scoped to the spec's job.

gpumon's ``job``-level records (``job_gpu:…``, ``job_node:…``, ``job:…``, …) all carry the
exporter's ``job`` label: their rules read the exporter's series with ``job="<exporter.job>"``
(sources and kube-state-metrics readings are relabelled to it). A rule that reads such a record
without a ``job`` matcher reads every spec's records in that Prometheus: with two specs loaded
(two exporter jobs, two GPU pools), each spec's rules record the other's nodes as well, the same
series from two rule groups, and the later write fails (``out of order sample``) while the
missing and absent sets mix the pools. So after the rules are built, :func:`scope_groups` adds
``job="<exporter.job>"`` to every read of a ``job``-level record that has no ``job`` matcher.

The rewrite works on the expression's text with a small scanner (string literals and numbers
skipped, a record name is an identifier with a ``:``, which no label name or function has), so
the rendered text stays as written but for the added matcher.
"""

from __future__ import annotations

import re
from dataclasses import replace

from ..promqltext import matcher
from .model import RuleGroup

#: a token: a quoted string (any of PromQL's three quotes, escapes kept), a number or duration
#: (``30m``, ``1e3``, ``0x1f``), an identifier, or any other single character
_TOKEN = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|`[^`]*`|[0-9][0-9A-Za-z_.]*|[A-Za-z_:][A-Za-z0-9_:]*|.',
                    re.S)
#: a matcher list's label names (inside ``{...}``, strings already stripped)
_LABEL = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)")


def scope_groups(groups: list[RuleGroup], job: str) -> list[RuleGroup]:
    """``groups`` with every read of one of their own ``job``-level records given
    ``job="<job>"`` where it has no ``job`` matcher (module docstring). Order, names and every
    other character of each expression are kept."""
    records = {r.record for g in groups for r in g.rules if r.record and r.record.split(":", 1)[0].startswith("job")}
    return [RuleGroup(g.name, tuple(replace(r, expr=scope(r.expr, records, job)) for r in g.rules), g.interval)
            for g in groups]


def scope(expr: str, records: set[str], job: str) -> str:
    """``expr`` (PromQL) with ``job="<job>"`` added to each selector of a metric in ``records``
    that has no ``job`` matcher: ``m`` -> ``m{job="x"}``, ``m{a="b"}`` -> ``m{job="x",a="b"}``."""
    add = matcher("job", job)
    out: list[str] = []
    tokens = [m.group(0) for m in _TOKEN.finditer(expr)]
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        out.append(tok)
        i += 1
        if tok not in records:
            continue
        j = i
        while j < len(tokens) and tokens[j].isspace():
            j += 1
        if j == len(tokens) or tokens[j] != "{":
            out.append("{" + add + "}")
            continue
        end = tokens.index("}", j)  # strings are single tokens: the first "}" closes the matchers
        inner = "".join(t for t in tokens[j + 1:end] if t[0] not in "\"'`")
        if "job" in _LABEL.findall(inner):
            continue
        out += tokens[i:j + 1] + [add + ("," if "".join(tokens[j + 1:end]).strip() else "")]
        i = j + 1
    return "".join(out)
