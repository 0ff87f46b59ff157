"""``runbook-url-placeholder``: an alert's ``runbook_url`` that is a placeholder, not a real page.

What: an alerting rule whose ``runbook_url`` annotation points at a placeholder host
(``example.com``/``.org``/``.net``, ``*.example``/``*.invalid``/``*.test``, ``localhost``,
``127.*``) or holds placeholder text (``<...>``, ``CHANGEME``, ``TODO``, ``FIXME``, ``XXX``, an
unexpanded ``${VAR}``), absolute or not. A relative link is ``runbook-url-not-absolute``'s.
Why: Alertmanager, chat and pager notifications carry the annotation verbatim: a link to a
template's stand-in host opens nothing (or someone else's page) in every notification.
Silence: set ``alerts.runbook_url`` to your real runbook base, ``# gpumon-lint: ignore
runbook-url-placeholder`` on the rule, or ``--disable runbook-url-placeholder``.
"""

from __future__ import annotations

from typing import Iterator

from ...findings import Finding
from .runbook_url import placeholder, url_findings

ID = "runbook-url-placeholder"
ORDER = 141
SEVERITY = "warning"


def check(inputs, ctx) -> Iterator[Finding]:
    return url_findings(ID, SEVERITY, placeholder, inputs, ctx)
