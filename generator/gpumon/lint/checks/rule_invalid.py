"""``rule-invalid``: a rule Prometheus refuses to load.

What: a rule with neither ``alert`` nor ``record`` (or both), no ``expr``, a ``for`` that is not
a Prometheus duration, ``for`` on a recording rule, or an invalid recording-rule name.
Why: Prometheus (and the Prometheus Operator's admission webhook) rejects the whole rule file or
PrometheusRule object, so every rule in it is lost — ``promtool check rules`` reports the same.
Silence: ``# gpumon-lint: ignore rule-invalid`` on the rule, or ``--disable rule-invalid``.
"""

from __future__ import annotations

import re
from typing import Iterator

from ...durations import parse_duration
from ...findings import Finding
from ._base import make

ID = "rule-invalid"
ORDER = 10
SEVERITY = "error"
_RECORD_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")


def check(inputs, ctx) -> Iterator[Finding]:
    for rule in inputs.rules:
        problems = []
        if "alert" in rule.raw and "record" in rule.raw:
            problems.append("has both `alert` and `record`")
        elif not rule.name:
            problems.append("has neither `alert` nor `record` name")
        if rule.expr is None:
            problems.append("has no `expr`")
        if rule.for_ is not None:
            if rule.kind == "record":
                problems.append("is a recording rule with `for`")
            else:
                try:
                    parse_duration(rule.for_)
                except ValueError:
                    problems.append(f"has `for: {rule.for_}`, not a Prometheus duration (e.g. 5m)")
        if rule.kind == "record" and rule.name and not _RECORD_NAME.match(rule.name):
            problems.append(f"has record name {rule.name!r}, not a valid metric name")
        for problem in problems:
            yield make(ID, SEVERITY, rule.subject or f"rule in group {rule.group}", f"the rule {problem}",
                       "Prometheus rejects the whole file for one invalid rule", rule.location)
