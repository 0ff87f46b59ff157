"""Panel builders and the dashboard board (ids, grid layout, rows) on grafana-foundation-sdk.

Foundation-sdk leaves panel ids unset and hides legends by default; every panel made here gets
an id, a ``${datasource}`` reference on the panel and each query, a unit, and a visible legend.
Only non-deprecated panel types are used (timeseries, stat, table, state-timeline; grafana/grafana#100589).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from ..spec import Metric
from .sdk import cb, cm, db, dm, pm, prometheus, stat, statetimeline, table, timeseries

#: every panel and query reads the datasource picked in the ``datasource`` variable (grafana/grafana#10786)
DATASOURCE = dm.DataSourceRef(type_val="prometheus", uid="${datasource}")

SEVERITY_COLORS = {"info": "blue", "warning": "orange", "critical": "red"}
_SEVERITY_RANK = {"info": 1, "warning": 2, "critical": 3}
GRID_WIDTH = 24


@dataclass(frozen=True)
class Query:
    """One panel query: PromQL, legend template, and whether it is an instant table query."""

    expr: str
    legend: str = ""
    instant: bool = False
    table: bool = False


def _target(q: Query, ref: str) -> prometheus.Dataquery:
    t = prometheus.Dataquery().expr(q.expr).ref_id(ref).datasource(DATASOURCE)
    t = t.legend_format(q.legend or "__auto")
    if q.instant:
        t = t.instant()
    else:
        t = t.range()
    if q.table:
        t = t.format(pm.PromQueryFormat.TABLE)
    return t


def _common(panel, title: str, description: str, queries: list[Query], unit: str, no_value: str | None,
            links: list[tuple[str, str]]):
    panel = panel.title(title).description(description).datasource(DATASOURCE).unit(unit)
    for i, q in enumerate(queries):
        panel = panel.with_target(_target(q, chr(ord("A") + i)))
    if no_value:
        panel = panel.no_value(no_value)
    if links:
        panel = panel.links([db.DashboardLink(text).url(url).target_blank(True) for text, url in links])
    return panel


def threshold_steps(metric: Metric | None = None, steps: list[tuple[float | None, str]] | None = None,
                    divisor: int = 1) -> db.ThresholdsConfig:
    """Grafana absolute thresholds from explicit ``steps`` ([(start or None for the base,
    colour)]) or else from a spec metric's thresholds (see :func:`spec_steps`); values are divided
    by ``divisor`` like the plotted series."""
    if steps is None:
        steps = spec_steps(metric) if metric is not None else [(None, "green")]
    return db.ThresholdsConfig().mode(dm.ThresholdsMode.ABSOLUTE).steps(
        [dm.Threshold(value=None if v is None else v / divisor, color=c) for v, c in steps])


def spec_steps(metric: Metric) -> list[tuple[float | None, str]]:
    """Colour regions for a metric's spec thresholds: each region between threshold values takes
    the colour of the worst severity whose condition holds inside it (info blue, warning orange,
    critical red, else green), so ``<`` thresholds colour the region below their value."""
    if not metric.thresholds:
        return [(None, "green")]
    bounds = sorted({t.value for t in metric.thresholds})
    # one probe value inside each region: below the first bound, between bounds, above the last
    probes = [bounds[0] - 1] + [(a + b) / 2 for a, b in zip(bounds, bounds[1:])] + [bounds[-1] + 1]
    steps: list[tuple[float | None, str]] = []
    for start, probe in zip([None] + bounds, probes):
        bad = [t for t in metric.thresholds if _holds(probe, t.op, t.value)]
        color = SEVERITY_COLORS[max(bad, key=lambda t: _SEVERITY_RANK[t.severity]).severity] if bad else "green"
        if not steps or steps[-1][1] != color:
            steps.append((start, color))
    return steps


def _holds(value: float, op: str, bound: float) -> bool:
    return {">": value > bound, ">=": value >= bound, "<": value < bound, "<=": value <= bound}[op]


def timeseries_panel(title: str, queries: list[Query], unit: str, *, description: str = "",
                     thresholds: db.ThresholdsConfig | None = None, no_value: str | None = None,
                     min_interval: str | None = None, links: list[tuple[str, str]] = (),
                     min_val: float | None = None, max_val: float | None = None,
                     soft_max: float | None = None, bars: bool = False) -> timeseries.Panel:
    """A time series panel with a table legend (last, max) and a shared tooltip. Thresholds, when
    given, are drawn as dashed lines. ``min_interval`` floors ``$__interval`` (and so
    ``$__rate_interval``) for rate queries. ``bars`` draws bars (counts per interval)."""
    p = _common(timeseries.Panel(), title, description, queries, unit, no_value, list(links))
    p = p.legend(cb.VizLegendOptions().show_legend(True).display_mode(cm.LegendDisplayMode.TABLE)
                 .placement(cm.LegendPlacement.BOTTOM).calcs(["lastNotNull", "max"]))
    p = p.tooltip(cb.VizTooltipOptions().mode(cm.TooltipDisplayMode.MULTI).sort(cm.SortOrder.DESCENDING))
    p = p.line_width(1).fill_opacity(10).span_nulls(False)
    if thresholds is not None:
        p = p.thresholds(thresholds).thresholds_style(
            cb.GraphThresholdsStyleConfig().mode(cm.GraphThresholdsStyleMode.DASHED))
    if min_interval:
        p = p.interval(min_interval)
    if min_val is not None:
        p = p.min(min_val)
    if max_val is not None:
        p = p.max(max_val)
    if soft_max is not None:
        p = p.axis_soft_max(soft_max)
    if bars:
        p = p.draw_style(cm.GraphDrawStyle.BARS).fill_opacity(80)
    return p


def stat_panel(title: str, queries: list[Query], unit: str, *, description: str = "",
               thresholds: db.ThresholdsConfig | None = None, no_value: str | None = None,
               links: list[tuple[str, str]] = (), horizontal: bool = False) -> stat.Panel:
    """A stat panel showing the last value, coloured by ``thresholds`` (green when none)."""
    p = _common(stat.Panel(), title, description, queries, unit, no_value, list(links))
    p = p.reduce_options(cb.ReduceDataOptions().calcs(["lastNotNull"]).values(False))
    p = p.graph_mode(cm.BigValueGraphMode.NONE).color_mode(cm.BigValueColorMode.BACKGROUND)
    p = p.text_mode(cm.BigValueTextMode.VALUE_AND_NAME if horizontal else cm.BigValueTextMode.AUTO)
    if horizontal:
        p = p.orientation(cm.VizOrientation.HORIZONTAL)
    return p.thresholds(thresholds or threshold_steps())


def table_panel(title: str, queries: list[Query], unit: str, *, description: str = "",
                no_value: str | None = None, links: list[tuple[str, str]] = (),
                hide: tuple[str, ...] = ("Time", "Value", "__name__"), merge: bool = False,
                rename: dict[str, str] | None = None, sort_desc: str | None = None) -> table.Panel:
    """A table of instant query results, one row per series, with the columns in ``hide``
    removed (``organize`` transformation).

    ``merge`` joins the results of several queries into one row per label set (Grafana's
    ``merge`` transformation; values land in columns ``Value #A``, ``Value #B`` ...), ``rename``
    maps column names to titles, ``sort_desc`` sorts by that (renamed) column, largest first.
    """
    p = _common(table.Panel(), title, description, queries, unit, no_value, list(links))
    if merge:
        p = p.with_transformation(dm.DataTransformerConfig(id_val="merge", options={}))
    options: dict = {"excludeByName": {name: True for name in hide}}
    if rename:
        options["renameByName"] = dict(rename)
    p = p.with_transformation(dm.DataTransformerConfig(id_val="organize", options=options))
    if sort_desc:
        p = p.sort_by([cb.TableSortByFieldState().display_name(sort_desc).desc(True)])
    return p.filterable(True)


def state_timeline_panel(title: str, queries: list[Query], unit: str, *, description: str = "",
                         thresholds: db.ThresholdsConfig | None = None, no_value: str | None = None,
                         mappings: list | None = None, links: list[tuple[str, str]] = (),
                         min_interval: str | None = None) -> statetimeline.Panel:
    """A state timeline: one row per series, coloured by ``thresholds`` or value ``mappings``."""
    p = _common(statetimeline.Panel(), title, description, queries, unit, no_value, list(links))
    p = p.show_value(cm.VisibilityMode.NEVER).merge_values(True).row_height(0.9)
    p = p.legend(cb.VizLegendOptions().show_legend(True).display_mode(cm.LegendDisplayMode.LIST)
                 .placement(cm.LegendPlacement.BOTTOM))
    if thresholds is not None:
        p = p.thresholds(thresholds).color_scheme(db.FieldColor().mode(dm.FieldColorModeId.THRESHOLDS))
    if mappings:
        p = p.mappings(mappings)
    if min_interval:
        p = p.interval(min_interval)
    return p


def up_down_mappings() -> list:
    """Value mappings for ``up``-like 0/1 series: 1 Up (green), 0 Down (red)."""
    return [dm.ValueMap(options={
        "0": dm.ValueMappingResult(text="Down", color="red", index=1),
        "1": dm.ValueMappingResult(text="Up", color="green", index=0),
    })]


@dataclass
class _Entry:
    builder: object
    w: int
    h: int
    key: str = ""


@dataclass
class _Row:
    title: str
    collapsed: bool
    entries: list[_Entry] = field(default_factory=list)


#: panel ids are drawn from this range (Grafana stores them as integers; 5 digits read well in
#: ``viewPanel=`` links)
ID_RANGE = (10000, 99999)


def stable_id(key: str, taken: set[int]) -> int:
    """A panel id derived from what the panel shows (its ``key``), not from its position: removing
    one metric renumbers no other panel and keeps links to a panel (``viewPanel=<id>``) working.
    A collision (rare: 40 panels in 90,000 ids) takes the next id derived from ``key#2``, ``key#3`` ..."""
    low, high = ID_RANGE
    attempt, candidate = 1, key
    while True:
        digest = int(hashlib.sha1(candidate.encode("utf-8")).hexdigest(), 16)
        pid = low + digest % (high - low + 1)
        if pid not in taken:
            taken.add(pid)
            return pid
        attempt += 1
        candidate = f"{key}#{attempt}"


def _title(builder) -> str:
    internal = getattr(builder, "_internal", None)
    return str(getattr(internal, "title", "") or "")


class Board:
    """Collects rows and panels, then lays them out left to right on Grafana's 24-column grid.
    Panel ids come from each panel's identity key (:func:`stable_id`; by default its row and
    title, for per-field panels the role and the DCGM field), never from its position. Panels of a
    collapsed row are stored inside the row (Grafana strips panels nested in an expanded row)."""

    def __init__(self) -> None:
        self.rows: list[_Row] = [_Row("", False)]

    def row(self, title: str, collapsed: bool = False) -> None:
        """Start a row; following panels belong to it."""
        self.rows.append(_Row(title, collapsed))

    def add(self, builder, w: int = 12, h: int = 8, key: str | None = None) -> None:
        """Add a panel builder ``w`` columns wide and ``h`` grid units high to the current row.
        ``key`` names what the panel shows (e.g. ``reading:DCGM_FI_DEV_GPU_TEMP``); its id is
        derived from it (default: the row and the panel title)."""
        if not 0 < w <= GRID_WIDTH:
            raise ValueError(f"panel width {w} outside 1..{GRID_WIDTH}")
        row = self.rows[-1]
        self.rows[-1].entries.append(_Entry(builder, w, h, key or f"{row.title}/{_title(builder)}"))

    def apply(self, dash: db.Dashboard) -> db.Dashboard:
        """Add every row and panel to ``dash`` with ids and grid positions set."""
        taken: set[int] = set()
        y = 0
        for row in self.rows:
            if row.title:
                rb = db.Row(row.title).id(stable_id(f"row:{row.title}", taken)).collapsed(row.collapsed).grid_pos(
                    dm.GridPos(h=1, w=GRID_WIDTH, x=0, y=y))
                y += 1
            placed = []
            x, line_h = 0, 0
            for entry in row.entries:
                if x + entry.w > GRID_WIDTH:
                    x, y, line_h = 0, y + line_h, 0
                pos = dm.GridPos(h=entry.h, w=entry.w, x=x, y=y)
                placed.append(entry.builder.id(stable_id(entry.key, taken)).grid_pos(pos))
                x += entry.w
                line_h = max(line_h, entry.h)
            # Collapsed rows also advance y: positions never overlap, and Grafana compacts the
            # grid on load anyway.
            y += line_h
            if row.title and row.collapsed:
                for p in placed:
                    rb = rb.with_panel(p)
                dash = dash.with_row(rb)
                continue
            if row.title:
                dash = dash.with_row(rb)
            for p in placed:
                dash = dash.with_panel(p)
        return dash


def new_dashboard(title: str) -> db.Dashboard:
    """A foundation-sdk classic dashboard builder (schemaVersion 42)."""
    return db.Dashboard(title)
