"""``label-name-mismatch``: a label spelled the way another dcgm-exporter version spells it.

What: ``hostname`` where the spec's exporter writes ``Hostname`` (or the reverse:
NVIDIA/dcgm-exporter#655 renamed it after 4.8.2), ``uuid`` where it writes ``UUID`` (1.x-compatibility /
``--use-old-namespace`` mode) — in PromQL matchers and ``by``/``on``/``without``/``group_left``
clauses, dashboard legends and template variables, and alert templates (``$labels.hostname``).
Why: label names are case-sensitive: the matcher selects nothing, the legend is empty, the
variable has no values and the dashboard is blank after an exporter upgrade.
Silence: ``# gpumon-lint: ignore label-name-mismatch`` on the rule, or ``--disable label-name-mismatch``;
if the exporter really writes the other spelling, fix ``exporter.labels`` in the spec.
"""

from __future__ import annotations

import re
from typing import Iterator

import promql_parser as pp

from ...findings import Finding
from ...readers import promql
from ._base import make, parsed

ID = "label-name-mismatch"
ORDER = 150
SEVERITY = "error"
_LEGEND = re.compile(r"\{\{\s*([A-Za-z_]\w*)\s*\}\}")
_REF = re.compile(r"\$labels\.([A-Za-z_]\w*)")


def _labels_used(ast) -> list[str]:
    out = []
    for node, _ in promql.nodes(ast):
        if isinstance(node, pp.VectorSelector):
            out += [m.name for m in promql.matchers(node)]
        elif isinstance(node, pp.AggregateExpr) and node.modifier is not None:
            out += list(node.modifier.labels)
        elif isinstance(node, pp.BinaryExpr) and node.modifier is not None:
            if node.modifier.matching is not None:
                out += list(node.modifier.matching.labels)
            out += list(node.modifier.group_labels or [])
    return out


def _msg(used: str, right: str, where: str) -> str:
    return (f"{where} uses label {used}, but the configured exporter writes {right} "
            "(label names are case-sensitive; NVIDIA/dcgm-exporter#655 renamed Hostname to hostname)")


def check(inputs, ctx) -> Iterator[Finding]:
    hint = "use the spelling in the spec's exporter.labels, or fix exporter.labels if the exporter changed"
    for query, ast in parsed(inputs):
        if ctx.rendered_by_gpumon(query):
            continue  # gpumon's rule over 1.x series reads their label spelling on purpose
        for label in dict.fromkeys(_labels_used(ast)):
            right = ctx.wrong_spelling(label)
            if right:
                yield make(ID, SEVERITY, query.subject, _msg(label, right, "the query"), hint,
                           query.where(label), label=label)
    for rule in inputs.rules:
        for key, text in {**rule.annotations, **rule.labels}.items():
            for label in dict.fromkeys(_REF.findall(text)):
                right = ctx.wrong_spelling(label)
                if right:
                    loc = rule.annotation_position(key, f"$labels.{label}") if key in rule.annotations \
                        else rule.keys.get("labels", rule.location)
                    yield make(ID, SEVERITY, rule.subject, _msg(label, right, f"template {key}"), hint, loc,
                               label=label)
    for dash in inputs.dashboards:
        for var in dash.variables:
            right = ctx.wrong_spelling(var.label) if var.label else None
            if right:
                yield make(ID, SEVERITY, f"{dash.subject} {var.subject}", _msg(var.label, right, "the variable"),
                           hint, dash.at(var.pointer + "/query"), label=var.label)
        for panel in dash.panels:
            for j, target in panel.targets:
                legend = target.get("legendFormat")
                for label in dict.fromkeys(_LEGEND.findall(legend if isinstance(legend, str) else "")):
                    right = ctx.wrong_spelling(label)
                    if right:
                        yield make(ID, SEVERITY, f"{dash.subject} {panel.subject}", _msg(label, right, "the legend"),
                                   hint, dash.at(f"{panel.pointer}/targets/{j}/legendFormat"), label=label)
