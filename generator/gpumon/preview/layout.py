"""Panels placed as Grafana places them, and the markup around them.

Grafana's grid (``gridPos``) has 24 columns and rows of 30 px (``GRID_CELL_HEIGHT``); the preview
draws a column as :data:`COLUMN` px, so a dashboard is 1,200 px wide. A row panel is a header;
the panels of a *collapsed* row (held in the row's own ``panels``) are drawn expanded below it,
pushing later panels down as expanding it in Grafana would, and the header says it is collapsed.
Dashboards of the old schema (``rows`` with ``span``) are laid out row by row. Positions are
clamped to the grid; a panel without ``gridPos`` goes full width at the bottom.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import cards, timecharts
from .model import DashboardPreview, PanelPreview
from .svg import empty, esc

COLUMN = 50
ROW = 30
GAP = 8
TITLE = 26
_DRAW = {"timeseries": timecharts.timeseries, "graph": timecharts.timeseries, "heatmap": timecharts.heatmap,
         "state-timeline": timecharts.state_timeline, "status-history": timecharts.state_timeline,
         "stat": cards.stat, "singlestat": cards.stat, "gauge": cards.gauge, "bargauge": cards.bargauge,
         "table": cards.table, "table-old": cards.table}

CSS = """
.gp-dash{margin:18px 0 28px}.gp-dash h2{font-size:18px;margin:0 0 4px}
.gp-meta{color:#616161;font-size:12px;margin:0 0 8px}
.gp-grid{position:relative;width:1200px;background:#111217;padding:8px;box-sizing:content-box;
 font:12px/1.3 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#CCCCDC}
.gp-grid table{background:transparent;color:inherit;font-size:inherit}
.gp-grid code{font-size:inherit}
.gp-panel{position:absolute;background:#181B1F;border:1px solid #2C3235;border-radius:2px;overflow:hidden}
.gp-title{height:26px;line-height:26px;padding:0 8px;font-weight:500;font-size:13px;white-space:nowrap;
 overflow:hidden;text-overflow:ellipsis;color:#CCCCDC}
.gp-body{position:absolute;left:4px;right:4px;top:26px;bottom:4px;overflow:hidden}
.gp-row{position:absolute;height:26px;line-height:26px;font-weight:500;font-size:14px;color:#CCCCDC;
 border-bottom:1px solid #2C3235;white-space:nowrap;overflow:hidden}
.gp-row .gp-hint{color:#8E8E9A;font-weight:normal;font-size:12px;margin-left:8px}
.gp-empty{display:flex;flex-direction:column;align-items:center;justify-content:center;height:100%;text-align:center;
 padding:0 10px;box-sizing:border-box}
.gp-nodata{font-size:14px}.gp-why{color:#8E8E9A;font-size:11px;margin-top:4px;max-height:70%;overflow:hidden}
.gp-legend{font-size:11px;overflow:hidden;color:#CCCCDC}.gp-legend table{border-collapse:collapse;width:100%}
.gp-legend th{color:#6E9FFF;font-weight:normal;text-align:right;padding:0 6px;white-space:nowrap}
.gp-legend td{text-align:right;padding:0 6px;white-space:nowrap}
.gp-legend td.gp-lname{text-align:left;width:100%;max-width:1px;overflow:hidden;text-overflow:ellipsis}
.gp-legend i{display:inline-block;width:14px;height:3px;margin:0 6px 3px 0;vertical-align:middle}
.gp-legend.gp-inline span{margin-right:12px;white-space:nowrap}
.gp-more{color:#8E8E9A;font-size:11px}
.gp-table{height:100%;overflow:hidden}.gp-table table{border-collapse:collapse;width:100%;font-size:12px}
.gp-table th{text-align:left;color:#6E9FFF;font-weight:500;padding:3px 6px;border-bottom:1px solid #2C3235;white-space:nowrap}
.gp-table td{padding:3px 6px;border-bottom:1px solid #22252B;white-space:nowrap;max-width:300px;overflow:hidden;
 text-overflow:ellipsis}
.gp-text{white-space:pre-wrap;padding:4px;font-size:12px;height:100%;overflow:hidden}
"""


@dataclass
class Box:
    """A panel's place on the grid (grid units) and whether it is the header of a row holding its
    panels (a collapsed row's)."""

    panel: PanelPreview
    x: int
    y: int
    w: int
    h: int
    collapsed: bool = False


def _grid(doc: dict) -> tuple[int, int, int, int] | None:
    g = doc.get("gridPos")
    if not isinstance(g, dict):
        return None
    def num(key, default, low, high):
        v = g.get(key)
        return max(low, min(high, int(v))) if isinstance(v, (int, float)) and not isinstance(v, bool) else default
    x = num("x", 0, 0, 23)
    return x, num("y", 0, 0, 100_000), num("w", 12, 1, 24 - x), num("h", 8, 1, 200)


def place(panels: list[PanelPreview], doc: dict | None = None) -> list[Box]:
    """Where each panel goes (see the module docstring)."""
    top = [p for p in panels if p.row is None]
    children: dict[str, list[PanelPreview]] = {}
    for p in panels:
        if p.row is not None:
            children.setdefault(p.row, []).append(p)
    pointers = {p.pointer for p in top}
    boxes: list[Box] = []
    placed = [(p, _grid(p.doc)) for p in top]
    shift, bottom = 0, 0
    for p, g in sorted((pg for pg in placed if pg[1] is not None), key=lambda pg: (pg[1][1], pg[1][0])):
        x, y, w, h = g
        if p.type == "row":
            x, w, h = 0, 24, 1
        box = Box(p, x, y + shift, w, h, collapsed=p.type == "row" and bool(children.get(p.pointer)))
        boxes.append(box)
        bottom = max(bottom, box.y + box.h)
        if box.collapsed:
            inner = [(c, _grid(c.doc) or (0, 0, 24, 8)) for c in children[p.pointer]]
            base = min(cg[1] for _, cg in inner)
            for c, (cx, cy, cw, ch) in inner:
                boxes.append(Box(c, cx, box.y + 1 + cy - base, cw, ch))
            extent = max(cy - base + ch for _, (_, cy, _, ch) in inner)
            shift += extent
            bottom = max(bottom, box.y + 1 + extent)
    for p, g in placed:
        if g is None:
            boxes.append(Box(p, 0, bottom, 24, 1 if p.type == "row" else 8))
            bottom += boxes[-1].h
    boxes += _old_rows(children, pointers, doc or {}, bottom)
    return boxes


def _old_rows(children: dict, pointers: set, doc: dict, y: int) -> list[Box]:
    """Boxes for the panels of an old-schema dashboard's ``rows`` (``span`` of 12, row ``height``)."""
    out = []
    rows = doc.get("rows") if isinstance(doc.get("rows"), list) else []
    for pointer, kids in children.items():
        if pointer in pointers:
            continue
        try:
            row = rows[int(pointer.rsplit("/", 1)[-1])]
        except (ValueError, IndexError):
            row = {}
        height = str(row.get("height", "250px")) if isinstance(row, dict) else "250px"
        digits = "".join(ch for ch in height if ch.isdigit())[:5]
        h = max(2, min(40, round(int(digits or 250) / ROW)))
        x = 0
        for p in kids:
            span = p.doc.get("span")
            w = max(1, min(24, int(span * 2))) if isinstance(span, (int, float)) and not isinstance(span, bool) else 12
            if x + w > 24:
                x, y = 0, y + h
            out.append(Box(p, x, y, w, h))
            x += w
        y += h
    return out


def draw(pp: PanelPreview, width: float, height: float) -> str:
    """The body of one panel: its chart, or why there is none."""
    if pp.type == "text":
        return cards.text_panel(pp, width, height)
    if pp.errors:
        return empty("Query error", "; ".join(pp.errors), "error")
    if pp.note:
        return empty("Not drawn", pp.note)
    if not any(s.points for s in pp.series):
        no_value = pp.fieldcfg.get("noValue")
        reason = pp.reason if pp.verdict and pp.verdict != "panel-ok" else ""
        return empty(str(no_value) if isinstance(no_value, str) and no_value else "No data", reason)
    drawer = _DRAW.get(pp.type)
    if drawer is None:
        return empty(f"{pp.type or 'untyped'} panels are not drawn by the preview",
                     f"{len(pp.series) + pp.more} series returned")
    return drawer(pp, width, height)


def grid(preview: DashboardPreview) -> str:
    """The dashboard's panels, absolutely positioned on a 1,200 px grid."""
    boxes = place(preview.panels, preview.doc)
    height = max((b.y + b.h for b in boxes), default=1) * ROW
    out = [f'<div class="gp-grid" style="height:{height}px">']
    for b in boxes:
        left, top = 8 + b.x * COLUMN, 8 + b.y * ROW
        width, tall = b.w * COLUMN - GAP, b.h * ROW - GAP
        p = b.panel
        if p.type == "row":
            folded = b.collapsed and p.doc.get("collapsed") is True
            hint = '<span class="gp-hint">collapsed in Grafana: drawn expanded</span>' if folded else ""
            out.append(f'<div class="gp-row" data-type="row" style="left:{left}px;top:{top}px;width:{width}px">'
                       f'{"▸" if folded else "▾"} {esc(p.title)}{hint}</div>')
            continue
        attrs = (f'class="gp-panel" data-type="{esc(p.type)}" data-state="{p.state}" data-panel-id="{esc(p.id)}"'
                 + (f' data-verdict="{esc(p.verdict)}"' if p.verdict else ""))
        body = draw(p, width - 8, tall - TITLE - 4)
        out.append(f'<div {attrs} style="left:{left}px;top:{top}px;width:{width}px;height:{tall}px">'
                   f'<div class="gp-title" title="{esc(p.title)}">{esc(p.title)}</div>'
                   f'<div class="gp-body">{body}</div></div>')
    out.append("</div>")
    return "".join(out)


def section(preview: DashboardPreview) -> str:
    """One dashboard: its title, file, range drawn, a tally of its panels, and the grid."""
    drawn = [p for p in preview.panels if p.type not in ("row", "text")]
    counts: dict[str, int] = {}
    for p in drawn:
        counts[p.state] = counts.get(p.state, 0) + 1
    names = {"data": "with data", "no-data": "no data", "error": "query error", "not-drawn": "not drawn"}
    tally = ", ".join(f"{n} {names[s]}" for s, n in sorted(counts.items()))
    return (f'<section class="gp-dash" data-uid="{esc(preview.uid)}" data-file="{esc(preview.file)}">'
            f"<h2>{esc(preview.title or preview.uid or preview.file)}</h2>"
            f'<p class="gp-meta"><code>{esc(preview.file)}</code> · {esc(preview.range_text)} (UTC) · '
            f"{len(drawn)} panels: {esc(tally or 'none')}</p>{grid(preview)}</section>")


def page(previews: list[DashboardPreview], title: str, server: str) -> str:
    """A standalone HTML page of every dashboard (inline CSS and SVG, no script, nothing fetched)."""
    body = "".join(section(p) for p in previews) or "<p>No dashboard found in the paths given.</p>"
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{esc(title)}</title><style>body{{margin:16px;background:#fafafa;color:#212121;"
            f"font:14px/1.4 system-ui,sans-serif}}{CSS}</style></head><body>"
            f"<h1 style=\"font-size:20px;margin:0\">{esc(title)}</h1>"
            f'<p class="gp-meta">drawn by gpumon from <code>{esc(server)}</code></p>{body}</body></html>\n')
