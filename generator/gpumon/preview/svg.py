"""Small SVG and text helpers every drawing module shares: escaping, clipping text to a width,
axes (value ticks with the panel's unit, UTC time ticks) and the "No data" body.

Every string that comes from a dashboard or a series (titles, legends, label values, mapping
texts, server messages) goes through :func:`esc` before it reaches markup; numbers are written
with a fixed precision, colours only through :func:`gpumon.preview.colours.colour`.
"""

from __future__ import annotations

import math
from datetime import datetime, timezone
from html import escape

from . import units

TEXT = "#CCCCDC"
MUTED = "#8E8E9A"
GRID = "#2C3235"
_TIME_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400,
               172800, 604800, 2592000)


def esc(text) -> str:
    """``text`` safe in element content and in double- or single-quoted attributes."""
    return escape(str(text), quote=True)


def fmt(x: float) -> str:
    """A coordinate with one decimal (keeps the markup small and stable)."""
    return f"{x:.1f}".rstrip("0").rstrip(".") if math.isfinite(x) else "0"


def text(x: float, y: float, body: str, size: float = 11, fill: str = MUTED, anchor: str = "start",
         extra: str = "") -> str:
    """An SVG ``<text>``; ``body`` is escaped here."""
    return (f'<text x="{fmt(x)}" y="{fmt(y)}" font-size="{fmt(size)}" fill="{fill}" text-anchor="{anchor}"'
            f'{extra}>{esc(body)}</text>')


def open_svg(width: float, height: float, label: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{fmt(width)}" height="{fmt(height)}" '
            f'viewBox="0 0 {fmt(width)} {fmt(height)}" role="img" aria-label="{esc(label)}" '
            'font-family="system-ui,-apple-system,Segoe UI,Roboto,sans-serif">')


def value_range(values: list[float], fieldcfg: dict) -> tuple[float, float, list[float]]:
    """``(low, high, ticks)`` of a value axis: the field's ``min``/``max`` when set, else the
    data's, widened to round ticks."""
    finite = [v for v in values if math.isfinite(v)]
    low = min(finite) if finite else 0.0
    high = max(finite) if finite else 1.0
    fmin, fmax = fieldcfg.get("min"), fieldcfg.get("max")
    if isinstance(fmin, (int, float)) and not isinstance(fmin, bool):
        low = float(fmin)
    if isinstance(fmax, (int, float)) and not isinstance(fmax, bool):
        high = float(fmax)
    if high <= low:
        pad = abs(low) * 0.1 or 1.0
        low, high = low - pad, high + pad
    marks = units.ticks(low, high, 4)
    if not marks:
        return low, high, []
    return min(marks[0], low), max(marks[-1], high), marks


def time_ticks(start: float, end: float, width: float) -> list[float]:
    """Round UTC instants between ``start`` and ``end``, about one per 110 px."""
    span = max(1.0, end - start)
    want = max(2, int(width / 110))
    step = next((s for s in _TIME_STEPS if span / s <= want), _TIME_STEPS[-1])
    first = math.ceil(start / step) * step
    return [first + i * step for i in range(int((end - first) // step) + 1)]


def time_label(ts: float, span: float, step: float = 60.0) -> str:
    """``HH:MM`` (``HH:MM:SS`` when ticks are under a minute apart, ``MM-DD HH:MM`` over 2 days), UTC."""
    when = datetime.fromtimestamp(ts, timezone.utc)
    if step < 60:
        return when.strftime("%H:%M:%S")
    if span > 2 * 86400:
        return when.strftime("%m-%d %H:%M")
    return when.strftime("%H:%M")


def empty(message: str, detail: str = "", state: str = "no-data") -> str:
    """The body of a panel with nothing to draw: ``message`` large, ``detail`` (a reason) below."""
    colour = "#F2495C" if state == "error" else TEXT
    more = f'<div class="gp-why">{esc(detail)}</div>' if detail else ""
    return f'<div class="gp-empty" style="color:{colour}"><div class="gp-nodata">{esc(message)}</div>{more}</div>'
