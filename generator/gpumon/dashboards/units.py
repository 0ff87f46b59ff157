"""Spec units -> Grafana unit ids, and how each metric is turned into a plotted value.

Unit ids are those of Grafana's ``packages/grafana-data/src/valueFormats/categories.ts``
(``mbytes`` = mebibytes, IEC; ``decmbytes`` would be SI megabytes, which the official
dcgm-exporter dashboard uses for the MiB framebuffer fields; ``rotmhz`` = megahertz).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..spec import Metric

#: spec ``unit`` of a gauge -> (Grafana unit id, divisor applied in the query)
GAUGE_UNITS: dict[str, tuple[str, int]] = {
    "celsius": ("celsius", 1),
    "watts": ("watt", 1),
    "millijoules": ("joule", 1000),
    "joules": ("joule", 1),
    "percent": ("percent", 1),
    "ratio": ("percentunit", 1),
    "MHz": ("rotmhz", 1),
    "MiB": ("mbytes", 1),
    "bytes": ("bytes", 1),
    "bytes_per_second": ("Bps", 1),
    "count": ("short", 1),
    "code": ("none", 1),
    "state": ("none", 1),
    "none": ("none", 1),
}

#: spec ``unit`` of a counter -> (Grafana unit id of its per-second rate, divisor)
RATE_UNITS: dict[str, tuple[str, int]] = {
    "millijoules": ("watt", 1000),   # mJ/s / 1000 = W
    "joules": ("watt", 1),
    "bytes": ("Bps", 1),
    "count": ("cps", 1),
}

#: Grafana unit ids for gpumon's own panels
RATIO = "percentunit"
SECONDS = "s"
COUNT = "short"
NONE = "none"


@dataclass(frozen=True)
class Plot:
    """How a metric is plotted: ``rate`` (counters) or the raw value, divided by ``divisor``,
    shown in Grafana unit ``unit``."""

    unit: str
    divisor: int
    rate: bool

    def apply(self, expr: str) -> str:
        """Wrap a per-GPU expression (``rate(...)`` already applied by the caller) with the divisor."""
        return f"{expr} / {self.divisor}" if self.divisor != 1 else expr


def title(metric: Metric) -> str:
    """The title of a panel that plots ``metric`` as :func:`plot` does: an energy counter plotted
    as its rate shows the power drawn, in watts, and says so (the spec's title names the total)."""
    if metric.kind == "counter" and RATE_UNITS.get(metric.unit, ("",))[0] == "watt":
        return f"{metric.title}: power drawn"
    return metric.title


def plot(metric: Metric) -> Plot:
    """The :class:`Plot` of a spec metric. Counters are plotted as per-second rates (an
    ever-growing total says nothing on a graph); units without a rate mapping count per second.

    Raises:
        KeyError: for a unit the schema does not allow (a programming error).
    """
    if metric.kind == "counter":
        unit, div = RATE_UNITS.get(metric.unit, ("cps", 1))
        return Plot(unit, div, True)
    unit, div = GAUGE_UNITS[metric.unit]
    return Plot(unit, div, False)
