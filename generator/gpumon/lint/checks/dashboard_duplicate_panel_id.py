"""``dashboard-duplicate-panel-id``: two panels of a dashboard with the same ``id``.

What: panel ids repeated anywhere in the dashboard (collapsed rows included).
Why: Grafana keys panel state, links (``viewPanel=<id>``), library panels and alert rules on
the id; duplicates make "view" and "edit" open the wrong panel, and Grafana silently renumbers
them on save, so the file keeps changing.
Silence: ``--disable dashboard-duplicate-panel-id``.
"""

from __future__ import annotations

from typing import Iterator

from ...findings import Finding
from ._base import make

ID = "dashboard-duplicate-panel-id"
ORDER = 200
SEVERITY = "error"


def check(inputs, ctx) -> Iterator[Finding]:
    for dash in inputs.dashboards:
        first: dict = {}
        for panel in dash.panels:
            if panel.id is None:
                continue
            if panel.id in first:
                yield make(ID, SEVERITY, f"{dash.subject} {panel.subject}",
                           f"panel id {panel.id} is also used by {first[panel.id].subject}",
                           "give every panel a unique id", dash.at(panel.pointer + "/id"))
            else:
                first[panel.id] = panel
