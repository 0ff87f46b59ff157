"""dashboard-overlapping-panels: the row sweep finds what comparing every pair found, in
O(n log n) for a dashboard whose panels sit side by side."""

from __future__ import annotations

import json
import random
import time

from gpumon.lint.checks import dashboard_overlapping_panels as overlap
from gpumon.readers.model import Inputs
from gpumon.readers.dashjson import load_json_file


def _inputs(panels: list[dict]) -> Inputs:
    inputs = Inputs()
    load_json_file(json.dumps({"title": "d", "uid": "d", "panels": panels}), "d.json", inputs)
    return inputs


def _pairwise(inputs: Inputs) -> list[tuple]:
    """The check as it was: each panel against every panel before it at its level."""
    out = []
    for dash in inputs.dashboards:
        placed: dict = {}
        for panel in dash.panels:
            rect = overlap._rect(panel)
            if rect is None or rect[2] <= 0 or rect[3] <= 0:
                continue
            level = placed.setdefault(panel.row, [])
            for other, other_rect in level:
                if overlap._overlap(rect, other_rect):
                    out.append((panel.pointer, other.pointer))
                    break
            level.append((panel, rect))
    return out


def _found(inputs: Inputs) -> list[tuple]:
    return [(f.location.line, f.message) for f in overlap.check(inputs, None)]


def test_same_findings_as_comparing_every_pair():
    rng = random.Random(7)
    for _ in range(300):
        panels = []
        for i in range(rng.randint(0, 14)):
            panel = {"id": i, "type": "graph", "title": f"p{i}",
                     "gridPos": {k: rng.randint(-1, 6) for k in ("x", "y", "w", "h")}}
            if rng.random() < 0.2:
                panel["panels"] = [{"id": 100 + i, "title": "inner",
                                    "gridPos": {k: rng.randint(0, 4) for k in ("x", "y", "w", "h")}}]
            panels.append(panel)
        inputs = _inputs(panels)
        expected = _pairwise(inputs)
        findings = list(overlap.check(inputs, None))
        got = [(f.subject, f.message) for f in findings]
        assert len(got) == len(expected), (panels, got, expected)
        dash = inputs.dashboards[0]
        by_pointer = {p.pointer: p for p in dash.panels}
        for (subject, message), (mine, other) in zip(got, expected):
            assert subject.endswith(by_pointer[mine].subject) and f"overlaps {by_pointer[other].subject} " in message


def test_twenty_thousand_panels_in_seconds(monkeypatch):
    """20,000 panels took 25.6 s when every pair was compared."""
    from gpumon.readers import positions

    monkeypatch.setattr(positions, "LOCATOR_MAX_CHARS", 0)  # time the check, not the finding's line number
    panels = [{"id": i, "type": "stat", "title": f"p{i}", "gridPos": {"x": (i % 6) * 4, "y": (i // 6) * 3,
                                                                     "w": 4, "h": 3}} for i in range(20_000)]
    panels[-1]["gridPos"] = {"x": 0, "y": 0, "w": 24, "h": 3}
    inputs = _inputs(panels)
    start = time.process_time()
    findings = list(overlap.check(inputs, None))
    assert time.process_time() - start < 3
    assert len(findings) == 1 and "overlaps panel" in findings[0].message and '"p0"' in findings[0].message


def test_panels_stacked_on_the_same_rows_stop_at_the_bound(monkeypatch):
    monkeypatch.setattr(overlap, "MAX_COMPARISONS", 1000)
    panels = [{"id": i, "type": "stat", "title": f"p{i}", "gridPos": {"x": 0, "y": 0, "w": 4, "h": 3}}
              for i in range(100)]
    findings = list(overlap.check(_inputs(panels), None))
    assert "the overlap check stopped there" in findings[-1].message
    assert 1 < len(findings) < 100
