"""Panels that show values rather than time: ``stat`` (and the old ``singlestat``), ``gauge``,
``bargauge``, ``table`` and ``text``.

Values are reduced as ``options.reduceOptions.calcs`` says (``lastNotNull`` by default), printed
in the panel's unit, and coloured by the first matching value mapping, else by the threshold
steps (``colorMode: background`` fills the tile, ``value`` colours the number).
"""

from __future__ import annotations

import math

from . import colours, units
from .model import PanelPreview, Series
from .svg import MUTED, TEXT, esc, fmt, open_svg, text
from .timecharts import reduce

#: table rows drawn at most (the rest counted)
MAX_ROWS = 200


def _calc(pp: PanelPreview) -> str:
    ro = pp.options.get("reduceOptions") if isinstance(pp.options.get("reduceOptions"), dict) else {}
    calcs = [c for c in ro.get("calcs") or [] if isinstance(c, str)]
    return calcs[0] if calcs else "lastNotNull"


def shown_value(pp: PanelPreview, value: float | None, series: Series | None = None) -> tuple[str, str]:
    """(text, colour) of one reduced value: a mapping's, else the unit's text and the threshold
    colour. A series whose samples are all NaN reads ``NaN`` (not "No data": it has samples)."""
    if value is None and series is not None and series.points:
        value = math.nan
    label, colour = colours.mapping(value, pp.fieldcfg)
    if label is None:
        label = "No data" if value is None else units.format_value(value, pp.unit or _old_unit(pp.doc), pp.decimals)
    return label, colour or colours.threshold_colour(value, pp.fieldcfg)


def _old_unit(doc: dict) -> str | None:
    return doc.get("format") if isinstance(doc.get("format"), str) else None


def _tiles(n: int, width: float, height: float, orientation: str) -> tuple[int, int]:
    """(columns, rows) for ``n`` tiles: ``horizontal`` stacks them, ``vertical`` lines them up,
    ``auto`` picks the grid closest to square tiles."""
    if orientation == "horizontal":
        return 1, n
    if orientation == "vertical":
        return n, 1
    best = (1, n)
    best_score = math.inf
    for cols in range(1, n + 1):
        rows = math.ceil(n / cols)
        ratio = (width / cols) / max(1.0, height / rows)
        score = abs(math.log(ratio / 2.0))  # Grafana's tiles are about twice as wide as tall
        if score < best_score:
            best, best_score = (cols, rows), score
    return best


def stat(pp: PanelPreview, width: float, height: float) -> str:
    """A tile per series: its name (when there are several) and reduced value, coloured."""
    calc = _calc(pp)
    series = pp.series
    opts = pp.options
    mode = opts.get("colorMode", "value")
    text_mode = opts.get("textMode", "auto")
    cols, rows = _tiles(len(series), width, height, str(opts.get("orientation", "auto")))
    tile_w, tile_h = width / cols, (height - (14 if pp.more else 0)) / rows
    out = [open_svg(width, height, f"{pp.title}: stat")]
    for i, s in enumerate(series):
        x, y = (i % cols) * tile_w, (i // cols) * tile_h
        label, colour = shown_value(pp, reduce(s, calc), s)
        if mode == "background":
            out.append(f'<rect x="{fmt(x + 2)}" y="{fmt(y + 2)}" width="{fmt(tile_w - 4)}" height="{fmt(tile_h - 4)}" '
                       f'rx="2" fill="{colour}"/>')
            ink = "#FFFFFF"
        else:
            ink = colour if mode == "value" else TEXT
        with_name = text_mode in ("value_and_name", "name") or (text_mode == "auto" and len(series) > 1)
        size = max(10.0, min(tile_h * (0.42 if with_name else 0.55), tile_w / max(3, len(label)) * 1.6, 64))
        if opts.get("graphMode") == "area" and len(s.points) > 1:
            out.append(_sparkline(s, x + 2, y + tile_h * 0.55, tile_w - 4, tile_h * 0.45 - 2, ink))
        if with_name:
            name_size = max(6.0, min(size * 0.45, 14, tile_h * 0.7))
            if cols == 1 and rows > 1 and tile_w > 4 * tile_h:  # stacked: name left, value right
                size = min(size, tile_h * 0.75)
                out.append(text(x + 10, y + tile_h / 2 + name_size / 3, _cut(s.name, tile_w * 0.55, name_size),
                                name_size, ink if mode == "background" else TEXT))
                out.append(text(x + tile_w - 10, y + tile_h / 2 + size / 3, label, size, ink, "end",
                                ' font-weight="500"'))
                continue
            out.append(text(x + tile_w / 2, y + tile_h * 0.3, _cut(s.name, tile_w - 8, name_size), name_size,
                            ink if mode == "background" else TEXT, "middle"))
            out.append(text(x + tile_w / 2, y + tile_h * 0.3 + name_size / 2 + size * 0.9, label, size, ink, "middle",
                            ' font-weight="500"'))
        elif text_mode != "none":
            out.append(text(x + tile_w / 2, y + tile_h / 2 + size / 3, label, size, ink, "middle", ' font-weight="500"'))
    if pp.more:
        out.append(text(width - 6, height - 3, f"+{pp.more} more series", 10, MUTED, "end"))
    out.append("</svg>")
    return "".join(out)


def _cut(name: str, width: float, size: float) -> str:
    room = max(1, int(width / (size * 0.58)))
    return name if len(name) <= room else name[:room - 1] + "…"


def _sparkline(s: Series, x: float, y: float, w: float, h: float, colour: str) -> str:
    pts = [(t, v) for t, v in s.points if math.isfinite(v)]
    if len(pts) < 2:
        return ""
    t0, t1 = pts[0][0], pts[-1][0]
    lo, hi = min(v for _, v in pts), max(v for _, v in pts)
    span_t, span_v = (t1 - t0) or 1, (hi - lo) or 1
    path = " ".join(f"{fmt(x + (t - t0) / span_t * w)},{fmt(y + h - (v - lo) / span_v * h)}" for t, v in pts)
    return f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-opacity="0.6" stroke-width="1.5"/>'


def _limits(pp: PanelPreview) -> tuple[float, float]:
    """The gauge's scale: the field's ``min``/``max``, else 0-100 (0-1 for ``percentunit``)."""
    fc = pp.fieldcfg
    low = fc.get("min") if isinstance(fc.get("min"), (int, float)) and not isinstance(fc.get("min"), bool) else 0.0
    default_high = 1.0 if pp.unit == "percentunit" else 100.0
    high = fc.get("max") if isinstance(fc.get("max"), (int, float)) and not isinstance(fc.get("max"), bool) else default_high
    return float(low), float(high) if high > low else float(low) + 1


def gauge(pp: PanelPreview, width: float, height: float) -> str:
    """A 240-degree arc per series, filled to the value in its threshold colour."""
    calc = _calc(pp)
    cols, rows = _tiles(len(pp.series), width, height, str(pp.options.get("orientation", "auto")))
    tile_w, tile_h = width / cols, (height - (14 if pp.more else 0)) / rows
    low, high = _limits(pp)
    out = [open_svg(width, height, f"{pp.title}: gauge")]
    for i, s in enumerate(pp.series):
        cx, cy = (i % cols) * tile_w + tile_w / 2, (i // cols) * tile_h + tile_h * 0.55
        radius = max(8.0, min(tile_w, tile_h) * 0.38)
        value = reduce(s, calc)
        label, colour = shown_value(pp, value, s)
        share = 0.0 if value is None else min(1.0, max(0.0, (value - low) / (high - low)))
        out.append(_arc(cx, cy, radius, 1.0, "#2C3235", radius * 0.22))
        if share > 0:
            out.append(_arc(cx, cy, radius, share, colour, radius * 0.22))
        size = max(9.0, min(radius * 0.5, tile_w / max(3, len(label)) * 1.6))
        out.append(text(cx, cy + size / 3, label, size, colour, "middle", ' font-weight="500"'))
        if len(pp.series) > 1:
            out.append(text(cx, cy + radius * 0.95, _cut(s.name, tile_w - 8, 11), 11, TEXT, "middle"))
    if pp.more:
        out.append(text(width - 6, height - 3, f"+{pp.more} more series", 10, MUTED, "end"))
    out.append("</svg>")
    return "".join(out)


def _arc(cx: float, cy: float, r: float, share: float, colour: str, thickness: float) -> str:
    start = math.radians(150)
    end = start + math.radians(240) * share
    x0, y0 = cx + r * math.cos(start), cy + r * math.sin(start)
    x1, y1 = cx + r * math.cos(end), cy + r * math.sin(end)
    large = 1 if share * 240 > 180 else 0
    return (f'<path d="M {fmt(x0)} {fmt(y0)} A {fmt(r)} {fmt(r)} 0 {large} 1 {fmt(x1)} {fmt(y1)}" fill="none" '
            f'stroke="{colour}" stroke-width="{fmt(thickness)}"/>')


def bargauge(pp: PanelPreview, width: float, height: float) -> str:
    """A horizontal bar per series, its name above, filled to the value in its threshold colour."""
    calc = _calc(pp)
    low, high = _limits(pp)
    n = max(1, len(pp.series))
    band = (height - (14 if pp.more else 0)) / n
    out = [open_svg(width, height, f"{pp.title}: bar gauge")]
    for i, s in enumerate(pp.series):
        y = i * band
        value = reduce(s, calc)
        label, colour = shown_value(pp, value, s)
        share = 0.0 if value is None else min(1.0, max(0.0, (value - low) / (high - low)))
        bar_h = max(4.0, band * 0.5)
        out.append(text(6, y + band * 0.35, _cut(s.name, width * 0.7, 11), 11, TEXT))
        out.append(f'<rect x="6" y="{fmt(y + band * 0.42)}" width="{fmt(width - 90)}" height="{fmt(bar_h)}" fill="#2C3235"/>')
        out.append(f'<rect x="6" y="{fmt(y + band * 0.42)}" width="{fmt((width - 90) * share)}" height="{fmt(bar_h)}" '
                   f'fill="{colour}"/>')
        out.append(text(width - 6, y + band * 0.42 + bar_h * 0.8, label, min(16.0, bar_h), colour, "end"))
    if pp.more:
        out.append(text(width - 6, height - 3, f"+{pp.more} more series", 10, MUTED, "end"))
    out.append("</svg>")
    return "".join(out)


# ---------------------------------------------------------------------------------- table
def _organize(pp: PanelPreview) -> dict:
    for t in pp.doc.get("transformations") or []:
        if isinstance(t, dict) and t.get("id") == "organize" and isinstance(t.get("options"), dict):
            return t["options"]
    return {}


def columns(pp: PanelPreview) -> list[tuple[str, str]]:
    """``(key, header)`` of the table's columns as Grafana shows a Prometheus table: the label
    names (sorted), then ``Value`` (``Value #A`` per query when there are several), minus the
    ``organize`` transformation's excluded columns, in its order, with its renames."""
    org = _organize(pp)
    excluded = {k for k, v in (org.get("excludeByName") or {}).items() if v} if isinstance(org.get("excludeByName"), dict) else set()
    names = sorted({k for s in pp.series for k in s.labels})
    refs = sorted({s.ref for s in pp.series})
    values = ["Value"] if len(refs) <= 1 else [f"Value #{r}" for r in refs]
    keys = [k for k in ["Time", *names, *values] if k not in excluded and k != "Time"]
    order = org.get("indexByName") if isinstance(org.get("indexByName"), dict) else {}
    keys.sort(key=lambda k: (order.get(k, 10_000) if isinstance(order.get(k), int) else 10_000))
    renames = org.get("renameByName") if isinstance(org.get("renameByName"), dict) else {}
    return [(k, str(renames.get(k) or k)) for k in keys]


def table_rows(pp: PanelPreview) -> list[dict[str, str]]:
    """One row per series (its labels, and its last value per query); series with the same
    labels from several queries share a row."""
    cols = columns(pp)
    multi = any(k.startswith("Value #") for k, _ in cols)
    rows: dict[tuple, dict[str, str]] = {}
    for s in pp.series:
        key = tuple(sorted(s.labels.items()))
        row = rows.setdefault(key, dict(s.labels))
        last = s.last
        label, _ = colours.mapping(last, pp.fieldcfg)
        value = label if label is not None else ("" if last is None else units.format_value(last, pp.unit, pp.decimals))
        row[f"Value #{s.ref}" if multi else "Value"] = value
    return list(rows.values())


def table(pp: PanelPreview, width: float, height: float) -> str:
    """An HTML table (header, then the rows that fit; ``+N more rows`` below)."""
    cols = columns(pp)
    rows = table_rows(pp)
    fit = max(1, int((height - 24) // 22))
    if len(rows) + pp.more > fit:
        fit = max(1, int((height - 24 - 16) // 22))  # room for the "+N more rows" line
    shown = rows[:min(fit, MAX_ROWS)]
    head = "".join(f"<th>{esc(h)}</th>" for _, h in cols)
    body = "".join("<tr>" + "".join(f"<td>{esc(r.get(k, ''))}</td>" for k, _ in cols) + "</tr>" for r in shown)
    left = len(rows) - len(shown) + pp.more
    more = f'<div class="gp-more">+{left} more rows</div>' if left > 0 else ""
    return f'<div class="gp-table"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{more}</div>'


def text_panel(pp: PanelPreview, width: float, height: float) -> str:
    """A text panel's content, shown as plain text (Markdown and HTML are not rendered)."""
    content = pp.options.get("content") if isinstance(pp.options.get("content"), str) else pp.doc.get("content")
    return f'<div class="gp-text">{esc(content if isinstance(content, str) else "")}</div>'
