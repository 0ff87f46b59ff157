"""``dashboard-deprecated-panel``: AngularJS panel types Grafana no longer renders.

What: panels of type ``graph`` ("Graph (old)"), ``singlestat``, ``table-old`` and Angular-only
plugin panels (``grafana-piechart-panel``, ``grafana-worldmap-panel``, ``natel-discrete-panel``,
``grafana-polystat-panel``, ``briangann-gauge-panel``, ``michaeldmoore-multistat-panel``).
Why: Angular support is removed in Grafana 12: such panels are auto-migrated at best (with
changed units, legends and thresholds) or show "Panel plugin not found"
(grafana/grafana#100589, NVIDIA/dcgm-exporter#598). Use ``timeseries``,
``stat``, ``gauge``, ``table``.
Silence: ``--disable dashboard-deprecated-panel``.
"""

from __future__ import annotations

from typing import Iterator

from ...findings import Finding
from ._base import make

ID = "dashboard-deprecated-panel"
ORDER = 220
SEVERITY = "error"
REPLACEMENT = {"graph": "timeseries", "singlestat": "stat", "table-old": "table",
               "grafana-piechart-panel": "piechart", "grafana-worldmap-panel": "geomap",
               "natel-discrete-panel": "state-timeline", "grafana-polystat-panel": "stat",
               "briangann-gauge-panel": "gauge", "michaeldmoore-multistat-panel": "stat"}


def check(inputs, ctx) -> Iterator[Finding]:
    for dash in inputs.dashboards:
        for panel in dash.panels:
            if panel.type in REPLACEMENT:
                yield make(ID, SEVERITY, f"{dash.subject} {panel.subject}",
                           f"panel type {panel.type!r} is an AngularJS panel, removed in Grafana 12",
                           f"use {REPLACEMENT[panel.type]!r}", dash.at(panel.pointer + "/type"))
