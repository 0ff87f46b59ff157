"""Grafana's time macros for one panel query: ``$__interval``, ``$__interval_ms``,
``$__rate_interval``, ``$__range``, ``$__range_s``, ``$__range_ms``, ``$__from``, ``$__to``.

Rules as Grafana applies them to a Prometheus query (Grafana docs "Global variables" and
"Query and transform data > Query options"; ``rangeutil.roundInterval`` in grafana/grafana):

* the calculated interval is ``range / max data points`` rounded to a "nice" interval;
* ``$__interval`` = max(calculated, min interval), where the min interval is the target's
  ``interval``, else the panel's ``interval``, else the data source's scrape interval;
* the query step is ``$__interval``, but never more than 11,000 points over the range;
* ``$__rate_interval`` = max(``$__interval`` + scrape interval, 4 x scrape interval).

Max data points is the panel's ``maxDataPoints``, else its width in pixels (Grafana's default),
approximated here as ``gridPos.w / 24 x 1800``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...durations import parse_duration

#: (upper bound, rounded interval) in milliseconds: Grafana's roundInterval table
_ROUND_MS = ((15, 10), (35, 20), (75, 50), (150, 100), (350, 200), (750, 500), (1500, 1000), (3500, 2000),
             (7500, 5000), (12500, 10000), (17500, 15000), (25000, 20000), (45000, 30000), (90000, 60000),
             (210000, 120000), (450000, 300000), (750000, 600000), (1050000, 900000), (1500000, 1200000),
             (2700000, 1800000), (5400000, 3600000), (9000000, 7200000), (16200000, 10800000),
             (32400000, 21600000), (86400000, 43200000), (604800000, 86400000), (1814400000, 604800000),
             (3628800000, 2592000000))
MAX_POINTS = 11000


def round_interval_ms(ms: float) -> int:
    """Grafana's rounding of a calculated interval (``rangeutil.roundInterval``)."""
    for bound, value in _ROUND_MS:
        if ms < bound:
            return value
    return 31536000000


def grafana_duration(seconds: float) -> str:
    """An interval as Grafana writes it into a query: ``500ms``, ``15s``, ``2m``, ``1h``, ``1d``
    (the largest unit that divides it, like ``rangeutil.secondsToHms``)."""
    ms = int(round(seconds * 1000))
    for unit, size in (("d", 86400000), ("h", 3600000), ("m", 60000), ("s", 1000)):
        if ms >= size and ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def _seconds(text) -> float | None:
    """A Grafana min-interval setting (``15s``, ``>10s``, ``1m``) in seconds; None when unset or a
    variable."""
    if not isinstance(text, str) or not text.strip() or "$" in text:
        return None
    try:
        return parse_duration(text.strip().lstrip(">"))
    except ValueError:
        return None


@dataclass(frozen=True)
class Timing:
    """The macros of one query: ``start``/``end`` (unix seconds), ``step`` and ``interval``,
    ``rate_interval`` (seconds)."""

    start: float
    end: float
    interval: float
    rate_interval: float
    step: float
    span: float | None = None  # the time range asked (``end - start`` before aligning to the step)

    @property
    def range(self) -> float:
        return self.span if self.span is not None else self.end - self.start

    def macros(self) -> dict[str, str]:
        """``{macro name without $: text}`` as Grafana substitutes them."""
        return {"__interval": grafana_duration(self.interval),
                "__interval_ms": str(int(round(self.interval * 1000))),
                "__rate_interval": grafana_duration(self.rate_interval),
                "__rate_interval_ms": str(int(round(self.rate_interval * 1000))),
                "__auto": grafana_duration(self.interval),
                "__range": f"{int(round(self.range))}s",
                "__range_s": str(int(round(self.range))),
                "__range_ms": str(int(round(self.range * 1000))),
                "__from": str(int(self.start * 1000)),
                "__to": str(int(self.end * 1000))}


def timing(panel: dict, target: dict, end: float, lookback: float, scrape_interval: float,
           max_points: int | None = None) -> Timing:
    """The :class:`Timing` of ``target`` on ``panel`` over ``[end - lookback, end]``; with
    ``max_points`` (the dashboard preview), no series gets more points than that: the panel's
    max data points are capped at it, and the step widened when Grafana's rounding of the
    interval would still give more."""
    width = (panel.get("gridPos") or {}).get("w") if isinstance(panel.get("gridPos"), dict) else None
    points = panel.get("maxDataPoints")
    if not isinstance(points, (int, float)) or points <= 0:
        points = max(100, round((width if isinstance(width, (int, float)) and width > 0 else 12) / 24 * 1800))
    if max_points:
        points = min(points, max_points)
    calculated = round_interval_ms(lookback * 1000 / points) / 1000
    floor = _seconds(target.get("interval")) or _seconds(panel.get("interval")) or scrape_interval
    interval = max(calculated, floor)
    step = max(interval, math.ceil(lookback / MAX_POINTS), math.ceil(lookback / max_points) if max_points else 0)
    rate = max(interval + scrape_interval, 4 * scrape_interval)
    start = math.floor((end - lookback) / step) * step  # Grafana aligns the range to the step
    return Timing(start, end, interval, rate, step, lookback)
