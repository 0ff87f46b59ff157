"""``dashboard-hardcoded-datasource``: a dashboard that names one Grafana's datasource uid (or
legacy name) literally.

What: a ``datasource`` reference whose uid or name is neither a template variable (``$ds``,
``${datasource}``), nor a Grafana built-in (``-- Grafana --``, ``-- Mixed --``), nor the uid the
spec pins (``dashboards.datasource_uid``, when set).
Why: datasource uids differ between Grafana instances; a dashboard moved to another server (or
provisioned into a fresh one) shows "No data" or "datasource not found"
(natrontech/pbs-exporter#75, grafana/grafana#53041; grafana/grafana#10786).
Silence: pin the uid in the spec, or ``--disable dashboard-hardcoded-datasource``.
"""

from __future__ import annotations

import re
from typing import Iterator

from ...findings import Finding
from ._base import make
from ._datasources import BUILTIN, references
from .dashboard_datasource_placeholder import HINT, _PLACEHOLDER

ID = "dashboard-hardcoded-datasource"
ORDER = 190
SEVERITY = "warning"
_VARIABLE = re.compile(r"^\$\{?\w+(:\w+)?\}?$|^\[\[\w+\]\]$")


def pinned_uids(spec) -> set[str]:
    """Datasource uids the spec pins for dashboards (``dashboards.datasource_uid``; empty when
    it pins none)."""
    uid = spec.dashboards.datasource_uid
    return {uid} if uid else set()


def check(inputs, ctx) -> Iterator[Finding]:
    pinned = pinned_uids(ctx.spec)
    for dash in inputs.dashboards:
        for pointer, ref in references(dash.doc):
            if not ref or ref in BUILTIN or ref in pinned or _VARIABLE.match(ref) or _PLACEHOLDER.match(ref):
                continue
            what = "uid" if pointer.endswith("/uid") else "name"
            yield make(ID, SEVERITY, dash.subject, f"datasource {what} {ref!r} is hard-coded: it exists only on "
                       "the Grafana instance the dashboard came from", HINT, dash.at(pointer))
