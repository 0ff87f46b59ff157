"""``dashboard-overlapping-panels``: panels whose ``gridPos`` rectangles overlap.

What: two panels at the same level (top level, or inside the same collapsed row) whose
``x``/``y``/``w``/``h`` rectangles intersect.
Why: Grafana pushes one of them down when it loads the dashboard, so the layout differs from the
file (and from what the reviewer saw); a generated or hand-merged dashboard usually has a wrong
``y``. The official dcgm-exporter dashboard has one (GPU Utilization and Tensor Core Utilization).
Silence: ``--disable dashboard-overlapping-panels``.
"""

from __future__ import annotations

import heapq
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
        levels: dict = {}
        for index, panel in enumerate(dash.panels):
            rect = _rect(panel)
            if rect is not None and rect[2] > 0 and rect[3] > 0:
                levels.setdefault(panel.row, []).append((index, panel, rect))
        first: dict[int, tuple] = {}
        budget = [MAX_COMPARISONS]
        for placed in levels.values():
            first.update(_first_overlaps(placed, budget))
        for index, panel in enumerate(dash.panels):
            if index not in first:
                continue
            rect, other, other_rect = first[index]
            yield make(ID, SEVERITY, f"{dash.subject} {panel.subject}",
                       f"gridPos x={rect[0]} y={rect[1]} w={rect[2]} h={rect[3]} overlaps {other.subject} "
                       f"(x={other_rect[0]} y={other_rect[1]} w={other_rect[2]} h={other_rect[3]})",
                       "move the panel: Grafana will otherwise rearrange the layout on load",
                       dash.at(panel.pointer + "/gridPos"))
        if budget[0] < 0:
            yield make(ID, SEVERITY, dash.subject,
                       f"more than {MAX_COMPARISONS:,} pairs of panels share rows: the overlap check stopped there, "
                       "so overlaps further down may be missing", "spread the panels out: most of them overlap",
                       dash.at("/panels"))


#: pairs of panels sharing rows compared per dashboard (a few seconds); only a dashboard of
#: thousands of panels stacked on the same rows comes near it
MAX_COMPARISONS = 2_000_000


def _first_overlaps(placed: list[tuple], budget: list[int]) -> dict[int, tuple]:
    """For each panel of one level that overlaps a panel listed before it, the first such panel:
    ``{index: (rect, other panel, other rect)}``. A sweep down the rows (panels sorted by ``y``,
    those whose bottom is above the current top dropped) compares only panels that share rows,
    so a 20,000-panel dashboard costs O(n log n) plus the pairs side by side, not every pair
    (25 s before); ``budget[0]`` (pairs left to compare) goes below 0 when the sweep stopped."""
    best: dict[int, tuple] = {}
    active: dict[int, tuple] = {}  # index -> (panel, rect) of panels whose rows reach the current top
    ends: list[tuple[int, int]] = []  # (bottom, index) of the active panels
    for index, panel, rect in sorted(placed, key=lambda item: (item[2][1], item[0])):
        while ends and ends[0][0] <= rect[1]:
            active.pop(heapq.heappop(ends)[1], None)
        budget[0] -= len(active)
        if budget[0] < 0:
            break
        for other_index, (other, other_rect) in active.items():
            if not _overlap(rect, other_rect):
                continue
            early, late = (other_index, index) if other_index < index else (index, other_index)
            shown = best.get(late)
            if shown is None or early < shown[0]:
                late_item, early_item = ((panel, rect), (other, other_rect)) if late == index else \
                    ((other, other_rect), (panel, rect))
                best[late] = (early, late_item[1], early_item[0], early_item[1])
        active[index] = (panel, rect)
        heapq.heappush(ends, (rect[1] + rect[3], index))
    return {late: (rect, other, other_rect) for late, (_, rect, other, other_rect) in best.items()}
