"""``annotation-label-missing``: ``$labels.X`` in an alert's annotations or labels where the
expression cannot keep label X.

What: the labels an alert's result can carry are worked out from the AST — aggregations keep only
their ``by`` labels (or drop their ``without`` labels), ``on(...)`` one-to-one matching keeps only
the ``on`` labels, ``absent()`` keeps only equality-matched labels, ``label_replace`` adds one,
recording rules carry what their own expression keeps (gpumon's and the linted files') — plus
the rule's static labels. Templates reading ``$labels.X`` (or ``index $labels "X"``) for an X
that cannot be there are reported.
Why: the template renders an empty string: "GPU  on node  is too hot" pages someone without
saying which GPU (``max by (job) (...)`` dropped ``UUID``).
Silence: ``# gpumon-lint: ignore annotation-label-missing`` on the rule, or ``--disable annotation-label-missing``.
"""

from __future__ import annotations

import re
from typing import Iterator

from ...findings import Finding
from ...readers import promql
from ._base import make

ID = "annotation-label-missing"
ORDER = 130
SEVERITY = "error"
#: Go-template references to alert labels (text/template syntax, not PromQL).
_REF = re.compile(r"\$labels\.([A-Za-z_]\w*)|index\s+\$labels\s+\"([A-Za-z_]\w*)\"")


def check(inputs, ctx) -> Iterator[Finding]:
    for rule in inputs.rules:
        if rule.kind != "alert" or rule.expr is None or rule.expr.ast is None:
            continue
        labels = promql.output_labels(rule.expr.ast, ctx.record_labels).add(list(rule.labels) + ["alertname"])
        for section, items in (("annotations", rule.annotations), ("labels", rule.labels)):
            for key, text in items.items():
                missing = []
                for match in _REF.finditer(text):
                    name = match.group(1) or match.group(2)
                    if not labels.may_have(name) and name not in missing:
                        missing.append(name)
                for name in missing:
                    kept = ", ".join(sorted(labels.known)) if not labels.open else "the input labels"
                    location = rule.annotation_position(key, f"$labels.{name}") if section == "annotations" \
                        else rule.keys.get(section, rule.location)
                    yield make(ID, SEVERITY, rule.subject,
                               f"{section}.{key} uses $labels.{name}, but the expression keeps only {kept}: "
                               "it renders empty", f"keep {name} in the aggregation (by (..., {name})) or on() "
                               "clause, or remove it from the template", location, label=name)
