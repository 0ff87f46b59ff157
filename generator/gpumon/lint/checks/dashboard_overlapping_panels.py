"""``dashboard-overlapping-panels``: panels whose ``gridPos`` rectangles overlap.

What: two panels at the same level (top level, or inside the same collapsed row) whose
``x``/``y``/``w``/``h`` rectangles intersect.
Why: Grafana pushes one of them down when it loads the dashboard, so the layout differs from the
file (and from what the reviewer saw); a generated or hand-merged dashboard usually has a wrong
``y``. The official dcgm-exporter dashboard has one (GPU Utilization and Tensor Core Utilization).
Silence: ``--disable dashboard-overlapping-panels``.
"""

from __future__ import annotations

from typing import Iterator

from ...findings import Finding
from ._base import make

ID = "dashboard-overlapping-panels"
ORDER = 210
SEVERITY = "warning"


def _rect(panel):
    grid = panel.doc.get("gridPos")
    if not isinstance(grid, dict):
        return None
    try:
        return (int(grid.get("x", 0)), int(grid.get("y", 0)), int(grid.get("w", 0)), int(grid.get("h", 0)))
    except (TypeError, ValueError):
        return None


def _overlap(a, b) -> bool:
    return a[0] < b[0] + b[2] and b[0] < a[0] + a[2] and a[1] < b[1] + b[3] and b[1] < a[1] + a[3]


def check(inputs, ctx) -> Iterator[Finding]:
    for dash in inputs.dashboards:
        placed: dict = {}
        for panel in dash.panels:
            rect = _rect(panel)
            if rect is None or rect[2] <= 0 or rect[3] <= 0:
                continue
            level = placed.setdefault(panel.row, [])
            for other, other_rect in level:
                if _overlap(rect, other_rect):
                    yield make(ID, SEVERITY, f"{dash.subject} {panel.subject}",
                               f"gridPos x={rect[0]} y={rect[1]} w={rect[2]} h={rect[3]} overlaps {other.subject} "
                               f"(x={other_rect[0]} y={other_rect[1]} w={other_rect[2]} h={other_rect[3]})",
                               "move the panel: Grafana will otherwise rearrange the layout on load",
                               dash.at(panel.pointer + "/gridPos"))
                    break
            level.append((panel, rect))
