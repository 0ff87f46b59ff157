"""``promql-syntax``: an expression that Prometheus (or Grafana) cannot parse.

What: a rule's ``expr``, a panel target's ``expr`` or a template variable query (inside
``label_values()``/``query_result()``) that promql-parser rejects. Grafana macros
(``$__rate_interval`` ...) and template variables are substituted first, the way Grafana sends
the query.
Why: Prometheus refuses to load a rule file with one bad expression (every rule in it is lost);
a bad panel query shows an error instead of data.
Silence: ``# gpumon-lint: ignore promql-syntax`` on the rule, or ``--disable promql-syntax``.
"""

from __future__ import annotations

from typing import Iterator

from ...findings import Finding
from ._base import make

ID = "promql-syntax"
ORDER = 20
SEVERITY = "error"


def check(inputs, ctx) -> Iterator[Finding]:
    for query in inputs.queries:
        if query.error is not None:
            shown = query.source if len(query.source) <= 160 else query.source[:157] + "..."
            yield make(ID, SEVERITY, query.subject, f"cannot parse {shown!r}: {query.error}",
                       "fix the expression; `promtool check rules` reports the same for rule files",
                       query.location)
