"""What the preview draws: the series each panel's queries returned, and why a panel has none.

Filled by :mod:`.fetch` from a live server, or directly by tests (prepared query results), and
read by the drawing modules; nothing here talks to a server or writes markup.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass
class Series:
    """One series of a panel: its legend name, labels and ``(unix seconds, value)`` points
    (NaN for NaN/±Inf samples: a gap, as Grafana draws them)."""

    name: str
    labels: dict[str, str]
    points: list[tuple[float, float]]
    ref: str = "A"

    @property
    def finite(self) -> list[float]:
        return [v for _, v in self.points if math.isfinite(v)]

    @property
    def last(self) -> float | None:
        """The last finite value (Grafana's ``lastNotNull``)."""
        values = self.finite
        return values[-1] if values else None


@dataclass
class PanelPreview:
    """One panel as the preview draws it.

    Attributes:
        doc: the panel's JSON (title, type, gridPos, fieldConfig, options).
        pointer: its JSON pointer in the dashboard (``/panels/3/panels/0``).
        row: the pointer of the collapsed row (or old-style ``rows`` entry) holding it.
        series: what its queries returned, at most the series cap.
        more: series left out over the cap (shown as ``+N more``).
        errors: the server's messages for queries it rejected.
        note: why nothing is drawn (not evaluated, an unsupported data source); the empty
            panel's reason from ``validate --dashboards`` (``verdict``/``reason``) is shown with it.
        start / end: the time range drawn (unix seconds).
    """

    doc: dict
    pointer: str
    row: str | None = None
    series: list[Series] = field(default_factory=list)
    more: int = 0
    errors: list[str] = field(default_factory=list)
    note: str = ""
    verdict: str = ""
    reason: str = ""
    start: float = 0.0
    end: float = 0.0

    @property
    def type(self) -> str:
        return str(self.doc.get("type") or "")

    @property
    def title(self) -> str:
        return str(self.doc.get("title") or "")

    @property
    def id(self) -> str:
        return str(self.doc.get("id", ""))

    @property
    def fieldcfg(self) -> dict:
        """``fieldConfig.defaults`` (an empty dict when absent or not an object)."""
        fc = self.doc.get("fieldConfig")
        defaults = fc.get("defaults") if isinstance(fc, dict) else None
        return defaults if isinstance(defaults, dict) else {}

    @property
    def options(self) -> dict:
        opts = self.doc.get("options")
        return opts if isinstance(opts, dict) else {}

    @property
    def unit(self) -> str | None:
        unit = self.fieldcfg.get("unit")
        return unit if isinstance(unit, str) and unit else None

    @property
    def decimals(self) -> int | None:
        d = self.fieldcfg.get("decimals")
        return int(d) if isinstance(d, (int, float)) and not isinstance(d, bool) and 0 <= d <= 10 else None

    @property
    def state(self) -> str:
        """``data``, ``no-data``, ``error`` or ``not-drawn`` (``data-state`` in the markup)."""
        if self.errors:
            return "error"
        if self.note:
            return "not-drawn"
        return "data" if any(s.points for s in self.series) else "no-data"


@dataclass
class DashboardPreview:
    """A dashboard's panels (rows and text panels too) in document order, with the range drawn."""

    title: str
    uid: str
    file: str
    start: float
    end: float
    range_text: str
    panels: list[PanelPreview] = field(default_factory=list)
    doc: dict = field(default_factory=dict)
