"""Panels over time: ``timeseries`` (and the old ``graph``), ``heatmap``, ``state-timeline``
and ``status-history``. Each function takes a :class:`~.model.PanelPreview` with data and the
body's size in pixels, and returns the body's markup (an SVG, and an HTML legend below it).

Like Grafana: lines break at NaN samples, the value axis uses the panel's unit and ``min``/
``max``, threshold lines show when ``custom.thresholdsStyle.mode`` asks for them, the legend
shows the ``options.legend.calcs`` (``lastNotNull``, ``max`` ...) formatted in the unit.
"""

from __future__ import annotations

import math

from . import colours, units
from .model import PanelPreview, Series
from .svg import GRID, MUTED, TEXT, esc, fmt, open_svg, text, time_label, time_ticks, value_range

_AXIS_W = 62
_AXIS_H = 16
_CALCS = {"lastNotNull": "Last *", "last": "Last", "max": "Max", "min": "Min", "mean": "Mean", "sum": "Total",
          "first": "First", "firstNotNull": "First *", "count": "Count", "range": "Range", "delta": "Delta"}


def reduce(series: Series, calc: str) -> float | None:
    """One of Grafana's reducers (``reduceOptions.calcs`` / ``legend.calcs``) over the finite
    values; None when there are none (or for an unknown reducer: lastNotNull)."""
    values = series.finite
    if calc == "count":
        return float(len(series.points))
    if not values:
        return None
    if calc == "last":
        last = series.points[-1][1]
        return last if math.isfinite(last) else None
    return {"max": max, "min": min, "sum": sum, "mean": lambda v: sum(v) / len(v),
            "first": lambda v: v[0], "firstNotNull": lambda v: v[0], "range": lambda v: max(v) - min(v),
            "delta": lambda v: v[-1] - v[0]}.get(calc, lambda v: v[-1])(values)


def _legend_opts(pp: PanelPreview) -> tuple[bool, list[str]]:
    legend = pp.options.get("legend") if isinstance(pp.options.get("legend"), dict) else {}
    shown = legend.get("showLegend", True) is not False and legend.get("displayMode") != "hidden"
    calcs = [c for c in legend.get("calcs") or [] if c in _CALCS][:3]
    return shown, calcs


def legend_html(pp: PanelPreview, entries: list[tuple[str, str, list[str]]], headers: list[str],
                height: float) -> str:
    """The legend under a chart: ``(colour, name, [calc texts])`` per entry, as many as fit in
    ``height`` px; the series beyond them and beyond the cap are counted (``+N more series``)."""
    room = max(1, int((height - (15 if headers else 0)) // 15))
    hidden = pp.more
    if len(entries) + (1 if hidden else 0) > room:
        keep = max(0, room - 1)
        hidden += len(entries) - keep
        entries = entries[:keep]
    rows = []
    if headers:
        rows.append('<tr><th></th>' + "".join(f"<th>{esc(h)}</th>" for h in headers) + "</tr>")
    for colour, name, calcs in entries:
        rows.append(f'<tr><td class="gp-lname"><i style="background:{colour}"></i>{esc(name)}</td>'
                    + "".join(f"<td>{esc(c)}</td>" for c in calcs) + "</tr>")
    more = f'<div class="gp-more">+{hidden} more series</div>' if hidden else ""
    return f'<div class="gp-legend" style="height:{fmt(height)}px"><table>{"".join(rows)}</table>{more}</div>'


def _split(width: float, height: float, shown: bool, n: int, more: int) -> tuple[float, float]:
    """(plot height, legend height): the legend takes a line per series, at most 45 %."""
    if not shown or n == 0:
        return height, 0
    lines = n + (1 if more else 0) + 1
    legend = min(height * 0.45, lines * 15 + 4)
    return height - legend, legend


def _x(ts: float, pp: PanelPreview, left: float, width: float) -> float:
    span = max(1e-9, pp.end - pp.start)
    return left + (ts - pp.start) / span * width


def _time_axis(pp: PanelPreview, left: float, width: float, y: float) -> list[str]:
    out = []
    marks = time_ticks(pp.start, pp.end, width)
    step = marks[1] - marks[0] if len(marks) > 1 else 1.0
    for ts in marks:
        x = _x(ts, pp, left, width)
        out.append(f'<line x1="{fmt(x)}" y1="0" x2="{fmt(x)}" y2="{fmt(y)}" stroke="{GRID}" stroke-width="1"/>')
        out.append(text(x, y + 12, time_label(ts, pp.end - pp.start, step), 10, MUTED, "middle"))
    return out


def timeseries(pp: PanelPreview, width: float, height: float) -> str:
    """Lines per series over the range, a value axis in the unit, the legend with its calcs."""
    unit = pp.unit or _graph_unit(pp.doc)
    shown, calcs = _legend_opts(pp)
    plot_h, legend_h = _split(width, height, shown, len(pp.series), pp.more)
    values = [v for s in pp.series for v in s.finite]
    thresholds = _threshold_lines(pp)
    low, high, marks = value_range(values + [v for v, _ in thresholds if _near(v, values)], pp.fieldcfg)
    inner_w, inner_h = max(10.0, width - _AXIS_W - 8), max(10.0, plot_h - _AXIS_H - 6)
    y_of = lambda v: 4 + (high - v) / (high - low) * inner_h  # noqa: E731 - a local scale
    out = [open_svg(width, plot_h, f"{pp.title}: time series")]
    for m in marks:
        y = y_of(m)
        out.append(f'<line x1="{_AXIS_W}" y1="{fmt(y)}" x2="{fmt(width - 8)}" y2="{fmt(y)}" stroke="{GRID}"/>')
        out.append(text(_AXIS_W - 6, y + 4, units.format_value(m, unit, pp.decimals), 10, MUTED, "end"))
    out += _time_axis(pp, _AXIS_W, inner_w, inner_h + 4)
    for value, colour in thresholds:
        if low <= value <= high:
            out.append(f'<line x1="{_AXIS_W}" y1="{fmt(y_of(value))}" x2="{fmt(width - 8)}" y2="{fmt(y_of(value))}" '
                       f'stroke="{colour}" stroke-dasharray="6 4" stroke-width="1"/>')
    fill = _fill_opacity(pp)
    for i, s in enumerate(pp.series):
        colour = colours.series_colour(i)
        for segment in _segments(s):
            pts = " ".join(f"{fmt(_x(t, pp, _AXIS_W, inner_w))},{fmt(y_of(v))}" for t, v in segment)
            if len(segment) == 1:
                t, v = segment[0]
                out.append(f'<circle cx="{fmt(_x(t, pp, _AXIS_W, inner_w))}" cy="{fmt(y_of(v))}" r="2.5" '
                           f'fill="{colour}"/>')
                continue
            if fill:
                base = y_of(max(low, min(high, 0.0)))
                first, last = _x(segment[0][0], pp, _AXIS_W, inner_w), _x(segment[-1][0], pp, _AXIS_W, inner_w)
                out.append(f'<polygon points="{fmt(first)},{fmt(base)} {pts} {fmt(last)},{fmt(base)}" '
                           f'fill="{colour}" fill-opacity="{fill:.2f}" stroke="none"/>')
            out.append(f'<polyline points="{pts}" fill="none" stroke="{colour}" stroke-width="1.5" '
                       'stroke-linejoin="round"/>')
    out.append("</svg>")
    if legend_h:
        entries = [(colours.series_colour(i), s.name,
                    [units.format_value(reduce(s, c), unit, pp.decimals) if reduce(s, c) is not None else "-"
                     for c in calcs]) for i, s in enumerate(pp.series)]
        out.append(legend_html(pp, entries, [_CALCS[c] for c in calcs] if calcs else [], legend_h))
    return "".join(out)


def _near(value: float, values: list[float]) -> bool:
    """A threshold line widens the value axis only when it is near the data (within 25 %)."""
    if not values:
        return False
    low, high = min(values), max(values)
    return low - 0.25 * (high - low or abs(high) or 1) <= value <= high + 0.25 * (high - low or abs(high) or 1)


def _threshold_lines(pp: PanelPreview) -> list[tuple[float, str]]:
    custom = pp.fieldcfg.get("custom") if isinstance(pp.fieldcfg.get("custom"), dict) else {}
    style = custom.get("thresholdsStyle") if isinstance(custom.get("thresholdsStyle"), dict) else {}
    if style.get("mode") in (None, "off"):
        return []
    return colours.threshold_lines(pp.fieldcfg)


def _fill_opacity(pp: PanelPreview) -> float:
    custom = pp.fieldcfg.get("custom") if isinstance(pp.fieldcfg.get("custom"), dict) else {}
    value = custom.get("fillOpacity")
    return min(1.0, max(0.0, float(value) / 100)) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def _graph_unit(doc: dict) -> str | None:
    """The old graph panel's unit: its left y axis' ``format``."""
    axes = doc.get("yaxes")
    if isinstance(axes, list) and axes and isinstance(axes[0], dict) and isinstance(axes[0].get("format"), str):
        return axes[0]["format"]
    return None


def _segments(s: Series) -> list[list[tuple[float, float]]]:
    """Runs of finite points (a NaN sample breaks the line)."""
    out, run = [], []
    for t, v in s.points:
        if math.isfinite(v):
            run.append((t, v))
        elif run:
            out.append(run)
            run = []
    if run:
        out.append(run)
    return out


def _step(s: Series, pp: PanelPreview) -> float:
    times = [t for t, _ in s.points]
    gaps = [b - a for a, b in zip(times, times[1:]) if b > a]
    return min(gaps) if gaps else max(1.0, (pp.end - pp.start) / 300)


def _row_labels(pp: PanelPreview, names: list[str], width: float) -> float:
    """Width for the row names on the left (at most a third of the panel)."""
    longest = max((len(n) for n in names), default=0)
    return min(width / 3, max(40.0, longest * 6.2 + 8))


def state_timeline(pp: PanelPreview, width: float, height: float) -> str:
    """One band per series; each run of equal values a box in its mapping's colour (else its
    threshold colour), with the mapping's text when it fits."""
    rows = pp.series
    legend_entries = _state_legend(pp)
    legend_h = min(height * 0.3, 20.0) if legend_entries else 0
    plot_h = height - legend_h
    names = [s.name for s in rows]
    left = _row_labels(pp, names, width)
    inner_w, inner_h = max(10.0, width - left - 8), max(10.0, plot_h - _AXIS_H - 4)
    band = inner_h / max(1, len(rows))
    out = [open_svg(width, plot_h, f"{pp.title}: state timeline")]
    out += _time_axis(pp, left, inner_w, inner_h + 2)
    show_values = pp.options.get("showValue") != "never"
    for i, s in enumerate(rows):
        y = 2 + i * band
        out.append(text(left - 6, y + band / 2 + 4, _clip_name(s.name, left), 11, TEXT, "end"))
        step = _step(s, pp)
        for start, end, value in _runs(s, step, pp.end):
            label, colour = colours.mapping(value, pp.fieldcfg)
            colour = colour or colours.threshold_colour(value, pp.fieldcfg, colours.series_colour(i))
            x0, x1 = _x(start, pp, left, inner_w), _x(end, pp, left, inner_w)
            out.append(f'<rect x="{fmt(x0)}" y="{fmt(y + 1)}" width="{fmt(max(1.0, x1 - x0))}" '
                       f'height="{fmt(max(1.0, band * 0.9 - 1))}" fill="{colour}" fill-opacity="0.8"/>')
            shown = label if label is not None else units.format_value(value, pp.unit, pp.decimals)
            if show_values and (x1 - x0) > len(shown) * 6.5 + 6 and band >= 14:
                out.append(text((x0 + x1) / 2, y + band / 2 + 4, shown, 11, "#000000", "middle"))
    out.append("</svg>")
    if legend_entries:
        items = "".join(f'<span><i style="background:{c}"></i>{esc(t)}</span>' for t, c in legend_entries)
        more = f'<span class="gp-more">+{pp.more} more series</span>' if pp.more else ""
        out.append(f'<div class="gp-legend gp-inline">{items}{more}</div>')
    return "".join(out)


def _clip_name(name: str, width: float) -> str:
    room = max(1, int((width - 8) / 6.2))
    return name if len(name) <= room else name[:room - 1] + "…"


def _runs(s: Series, step: float, end: float) -> list[tuple[float, float, float]]:
    """``(start, end, value)`` runs of equal finite values; a missing sample ends a run."""
    out: list[list] = []
    for t, v in s.points:
        if not math.isfinite(v):
            continue
        if out and out[-1][2] == v and t - out[-1][1] <= step * 1.5:
            out[-1][1] = t + step
        else:
            out.append([t, t + step, v])
    return [(a, min(b, end), v) for a, b, v in out]


def _state_legend(pp: PanelPreview) -> list[tuple[str, str]]:
    """(text, colour) of the value mappings, else of the threshold steps."""
    out = []
    for m in pp.fieldcfg.get("mappings") or []:
        if isinstance(m, dict) and m.get("type") == "value" and isinstance(m.get("options"), dict):
            for result in m["options"].values():
                if isinstance(result, dict) and result.get("text") is not None:
                    out.append((str(result["text"]), colours.colour(result.get("color"))))
    return out[:12]


# ---------------------------------------------------------------------------------- heatmap
_HEAT = ((0.0, (0x1F, 0x1D, 0x2B)), (0.35, (0x8F, 0x3B, 0x13)), (0.7, (0xFF, 0x98, 0x30)), (1.0, (0xFA, 0xDE, 0x2A)))


def heat_colour(share: float) -> str:
    """A dark-to-orange-to-yellow scale (Grafana's "Oranges"-like default) at ``share`` in [0, 1]."""
    share = min(1.0, max(0.0, share))
    for (a, ca), (b, cb) in zip(_HEAT, _HEAT[1:]):
        if share <= b:
            k = (share - a) / (b - a)
            return "#" + "".join(f"{round(x + (y - x) * k):02X}" for x, y in zip(ca, cb))
    return "#FADEA2"


def _bucket_rows(pp: PanelPreview) -> tuple[list[str], list[dict[float, float]]]:
    """Rows of the heatmap: histogram buckets by ``le`` (de-accumulated, lowest first) when every
    series has one, else one row per series. Each row maps a time to a value."""
    if pp.series and all("le" in s.labels for s in pp.series):
        def bound(s):
            try:
                return float(s.labels["le"])
            except ValueError:
                return math.inf
        ordered = sorted(pp.series, key=bound)
        rows, previous = [], {}
        for s in ordered:
            cum = {t: v for t, v in s.points if math.isfinite(v)}
            rows.append({t: max(0.0, v - previous.get(t, 0.0)) for t, v in cum.items()})
            previous = cum
        return [s.labels["le"] for s in ordered], rows
    return [s.name for s in pp.series], [{t: v for t, v in s.points if math.isfinite(v)} for s in pp.series]


def heatmap(pp: PanelPreview, width: float, height: float) -> str:
    """Cells per (row, time) coloured by value over the panel's largest one: Prometheus
    histogram buckets (``le``) as rows, or one row per series."""
    names, rows = _bucket_rows(pp)
    left = _row_labels(pp, names, width)
    scale_h = 18
    inner_w, inner_h = max(10.0, width - left - 8), max(10.0, height - _AXIS_H - 6 - scale_h)
    top = max((v for r in rows for v in r.values()), default=0.0) or 1.0
    times = sorted({t for r in rows for t in r})
    step = min((b - a for a, b in zip(times, times[1:])), default=max(1.0, (pp.end - pp.start) / 300))
    band = inner_h / max(1, len(rows))
    out = [open_svg(width, height, f"{pp.title}: heatmap")]
    out += _time_axis(pp, left, inner_w, inner_h + 2)
    for i, (name, row) in enumerate(zip(names, rows)):
        y = 2 + (len(rows) - 1 - i) * band  # lowest bucket at the bottom
        if band >= 9 or i % max(1, int(9 / max(band, 0.1))) == 0:
            out.append(text(left - 6, y + band / 2 + 4, _clip_name(name, left), 10, TEXT, "end"))
        for t, v in sorted(row.items()):
            x0, x1 = _x(t, pp, left, inner_w), _x(t + step, pp, left, inner_w)
            out.append(f'<rect x="{fmt(x0)}" y="{fmt(y)}" width="{fmt(max(0.5, x1 - x0))}" '
                       f'height="{fmt(max(0.5, band - 0.5))}" fill="{heat_colour(v / top)}"/>')
    y = height - scale_h + 4
    for k in range(20):
        out.append(f'<rect x="{fmt(left + k * 6)}" y="{fmt(y)}" width="6" height="8" fill="{heat_colour(k / 19)}"/>')
    out.append(text(left + 126, y + 8, f"0 to {units.format_value(top, pp.unit, pp.decimals)}", 10, MUTED))
    if pp.more:
        out.append(text(width - 8, y + 8, f"+{pp.more} more series", 10, MUTED, "end"))
    out.append("</svg>")
    return "".join(out)
