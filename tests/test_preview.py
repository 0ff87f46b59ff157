"""The dashboard preview's drawing, on prepared query results (no server): units and colours as
Grafana prints them, each panel type's SVG, the grid layout with collapsed rows, "No data" with
the validate reason, the series cap, and escaping of hostile titles, legends and label values."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import pytest
from click.testing import CliRunner

from gpumon.cli import cli
from gpumon.preview import cards, colours, fetch, layout, timecharts, units
from gpumon.preview.model import DashboardPreview, PanelPreview, Series

NOW = 1_700_000_000.0
START = NOW - 3600
EVIL = "<script>alert('x')</script>\"'&"
SVG = "{http://www.w3.org/2000/svg}"


def wave(n: int = 300, phase: float = 0.0, scale: float = 100.0) -> list[tuple[float, float]]:
    return [(START + i * 12, scale / 2 + scale / 2 * math.sin(i / 20 + phase)) for i in range(n)]


def panel(kind: str, series=(), **doc) -> PanelPreview:
    body = {"type": kind, "title": doc.pop("title", f"a {kind}"), "id": doc.pop("id", 1),
            "gridPos": doc.pop("gridPos", {"x": 0, "y": 0, "w": 12, "h": 8}), **doc}
    return PanelPreview(body, "/panels/0", series=list(series), start=START, end=NOW)


def xml(markup: str) -> ET.Element:
    """Parse a drawn body as XML: well-formed markup is the first proof nothing leaked unescaped."""
    return ET.fromstring(f"<div>{markup}</div>")


# ------------------------------------------------------------------------------ units, colours
@pytest.mark.parametrize("value,unit,expected", [
    (45, "percent", "45%"), (0.875, "percentunit", "87.5%"), (74, "celsius", "74 °C"), (1500, "watt", "1.5 kW"),
    (0.5, "watt", "500 mW"), (81920, "mbytes", "80 GiB"), (1536, "bytes", "1.5 KiB"), (1410, "rotmhz", "1.41 GHz"),
    (0.0049, "s", "4.9 ms"), (5400, "s", "1.5 hour"), (1500, "short", "1.5 K"), (12.345, "none", "12.3"),
    (2e8, "Bps", "200 MB/s"), (3, "cps", "3 cps"), (7, "suffix: GPUs", "7 GPUs"), (7, "furlongs", "7 furlongs"),
    (None, "watt", "NaN"), (math.inf, "watt", "+Inf"),
])
def test_units_as_grafana_prints_them(value, unit, expected):
    assert units.format_value(value, unit) == expected


def test_decimals_from_the_panel_win():
    assert units.format_value(74.25, "celsius", 0) == "74 °C"
    assert units.format_value(0.5, "percentunit", 2) == "50.00%"


def test_ticks_are_round_and_cover_the_range():
    marks = units.ticks(3.2, 97.1, 4)
    assert marks[0] <= 3.2 and marks[-1] >= 97.1 and marks == [0, 25, 50, 75, 100]


@pytest.mark.parametrize("value,expected", [(0.5, "#73BF69"), (1.0, "#F2495C"), (7, "#F2495C"), (None, "#73BF69")])
def test_threshold_steps_pick_the_highest_step_reached(value, expected):
    cfg = {"thresholds": {"mode": "absolute", "steps": [{"color": "green", "value": None}, {"color": "red", "value": 1}]}}
    assert colours.threshold_colour(value, cfg) == expected


def test_percentage_thresholds_use_min_and_max():
    cfg = {"min": 0, "max": 200, "thresholds": {"mode": "percentage", "steps": [
        {"color": "green", "value": None}, {"color": "#ff0000", "value": 50}]}}
    assert colours.threshold_colour(90, cfg) == "#73BF69"
    assert colours.threshold_colour(110, cfg) == "#ff0000"


@pytest.mark.parametrize("hostile", ["url(javascript:alert(1))", 'red" onload="x', "expression(alert(1))", 7, None])
def test_only_real_colours_reach_markup(hostile):
    assert colours.colour(hostile) == colours.FALLBACK


# ------------------------------------------------------------------------------ time range, legend
def test_time_range_is_the_dashboards_own():
    start, end, text = fetch.time_range({"time": {"from": "now-6h", "to": "now"}}, NOW)
    assert (end - start, end, text) == (6 * 3600, NOW, "last 6h")
    assert fetch.time_range({"time": {"from": "now-15m"}}, NOW)[0] == NOW - 900


def test_time_range_override_and_fallback():
    assert fetch.time_range({"time": {"from": "now-6h"}}, NOW, 600)[:2] == (NOW - 600, NOW)
    for bad in ({"time": {"from": "yesterday-ish"}}, {"time": "now-1h"}, {}, {"time": {"from": "now", "to": "now-1h"}}):
        start, end, text = fetch.time_range(bad, NOW)
        assert (end - start, end) == (3600, NOW) and "last 1h" in text
    start, _, _ = fetch.time_range({"time": {"from": "now-5y"}}, NOW)
    assert NOW - start == fetch.MAX_RANGE


def test_legend_formats():
    labels = {"__name__": "DCGM_FI_DEV_GPU_TEMP", "Hostname": "n1", "gpu": "0"}
    assert fetch.legend("{{Hostname}} GPU {{ gpu }}", labels, "x") == "n1 GPU 0"
    assert fetch.legend("__auto", labels, "x") == 'DCGM_FI_DEV_GPU_TEMP{Hostname="n1", gpu="0"}'
    assert fetch.legend("", {}, "sum(up)") == "sum(up)"


def test_series_of_range_and_instant_answers():
    rng = fetch.series_of([{"metric": {"a": "1"}, "values": [[1, "2"], [2, "NaN"], [3, "+Inf"], [4, "5"]]}], None, "e", "A")
    assert [v for _, v in rng[0].points][::3] == [2.0, 5.0] and math.isnan(rng[0].points[1][1])
    inst = fetch.series_of([{"metric": {}, "value": [9, "3.5"]}], "x", "e", "B")
    assert inst[0].points == [(9.0, 3.5)] and inst[0].ref == "B" and inst[0].name == "x"


def test_the_step_keeps_series_under_the_point_cap():
    from gpumon.validate.dashboards import timing

    for span in (600, 3600, 6 * 3600, 7 * 86400):
        tm = timing.timing({"gridPos": {"w": 24}}, {}, NOW, span, 15, max_points=fetch.MAX_POINTS)
        assert span / tm.step <= fetch.MAX_POINTS + 1, span
    # without the cap (validate), Grafana's own interval rules stand
    assert timing.timing({"gridPos": {"w": 24}}, {}, NOW, 6 * 3600, 15).step == 15


# ------------------------------------------------------------------------------ panel types
def test_timeseries_draws_a_line_per_series_with_its_unit_and_legend_calcs():
    pp = panel("timeseries", [Series("gpu 0", {}, wave()), Series("gpu 1", {}, wave(phase=1))],
               fieldConfig={"defaults": {"unit": "celsius"}},
               options={"legend": {"calcs": ["lastNotNull", "max"], "displayMode": "table", "showLegend": True}})
    root = xml(timecharts.timeseries(pp, 580, 200))
    lines = root.findall(f".//{SVG}polyline")
    assert len(lines) == 2 and len(lines[0].get("points").split()) == 300
    assert {ln.get("stroke") for ln in lines} == set(colours.PALETTE[:2])
    ticks = [t.text for t in root.iter(f"{SVG}text")]
    assert "100 °C" in ticks and "0 °C" in ticks and any(t and ":" in t for t in ticks)  # value and time axes
    cells = [td.text for td in root.iter("td")]
    assert "gpu 0" in "".join(root.itertext()) and "100 °C" in cells


def test_a_nan_sample_breaks_the_line():
    points = wave(10)
    points[4] = (points[4][0], math.nan)
    root = xml(timecharts.timeseries(panel("timeseries", [Series("s", {}, points)]), 400, 200))
    assert len(root.findall(f".//{SVG}polyline")) == 2


def test_stat_reduces_formats_and_colours_by_threshold():
    cfg = {"unit": "celsius", "thresholds": {"mode": "absolute", "steps": [
        {"color": "green", "value": None}, {"color": "red", "value": 83}]}}
    pp = panel("stat", [Series("hot", {}, [(START, 60.0), (NOW, 90.0)])], fieldConfig={"defaults": cfg},
               options={"colorMode": "background", "reduceOptions": {"calcs": ["lastNotNull"]}})
    root = xml(cards.stat(pp, 280, 90))
    assert [t.text for t in root.iter(f"{SVG}text")] == ["90 °C"]
    assert root.find(f".//{SVG}rect").get("fill") == "#F2495C"
    pp.options["reduceOptions"] = {"calcs": ["min"]}
    root = xml(cards.stat(pp, 280, 90))
    assert [t.text for t in root.iter(f"{SVG}text")] == ["60 °C"]
    assert root.find(f".//{SVG}rect").get("fill") == "#73BF69"


def test_stat_value_mappings_win_over_the_unit():
    cfg = {"mappings": [{"type": "value", "options": {"1": {"text": "Up", "color": "green"}}}]}
    root = xml(cards.stat(panel("stat", [Series("t", {}, [(NOW, 1.0)])], fieldConfig={"defaults": cfg}), 200, 80))
    assert [t.text for t in root.iter(f"{SVG}text")] == ["Up"]


def test_gauge_and_bargauge_fill_to_the_value():
    pp = panel("gauge", [Series("u", {}, [(NOW, 50.0)])], fieldConfig={"defaults": {"unit": "percent"}})
    root = xml(cards.gauge(pp, 200, 200))
    assert [t.text for t in root.iter(f"{SVG}text")] == ["50%"] and len(root.findall(f".//{SVG}path")) == 2
    pp = panel("bargauge", [Series("a", {}, [(NOW, 25.0)]), Series("b", {}, [(NOW, 100.0)])])
    bars = [r for r in xml(cards.bargauge(pp, 300, 100)).iter(f"{SVG}rect")]
    full, filled = float(bars[0].get("width")), [float(r.get("width")) for r in bars[1::2]]
    assert filled == [pytest.approx(full * 0.25), pytest.approx(full)]


def test_table_columns_follow_labels_and_the_organize_transformation():
    series = [Series("", {"__name__": "ALERTS", "Hostname": "n1", "alertname": "GpuLost", "job": "d"}, [(NOW, 1.0)]),
              Series("", {"__name__": "ALERTS", "Hostname": "n2", "alertname": "GpuHot", "job": "d"}, [(NOW, 1.0)])]
    pp = panel("table", series, transformations=[{"id": "organize", "options": {
        "excludeByName": {"__name__": True, "job": True, "Value": True}, "renameByName": {"alertname": "Alert"}}}])
    root = xml(cards.table(pp, 580, 200))
    assert [th.text for th in root.iter("th")] == ["Hostname", "Alert"]
    assert [[td.text for td in tr.iter("td")] for tr in root.find(".//tbody")] == [["n1", "GpuLost"], ["n2", "GpuHot"]]


def test_table_shows_the_rows_that_fit_and_counts_the_rest():
    series = [Series("", {"gpu": str(i)}, [(NOW, float(i))]) for i in range(30)]
    root = xml(cards.table(panel("table", series, fieldConfig={"defaults": {"unit": "watt"}}), 580, 200))
    rows = root.find(".//tbody")
    assert 0 < len(rows) < 30 and rows[1][1].text == "1 W"
    assert "".join(root.itertext()).endswith(f"+{30 - len(rows)} more rows")


def test_heatmap_deaccumulates_histogram_buckets():
    buckets = {"0.1": 2.0, "1": 5.0, "+Inf": 6.0}  # cumulative: 2, 3, 1 per bucket
    series = [Series("", {"le": le}, [(START, v), (START + 60, v)]) for le, v in buckets.items()]
    pp = panel("heatmap", series)
    names, rows = timecharts._bucket_rows(pp)
    assert names == ["0.1", "1", "+Inf"] and [r[START] for r in rows] == [2.0, 3.0, 1.0]
    root = xml(timecharts.heatmap(pp, 580, 200))
    fills = [r.get("fill") for r in root.iter(f"{SVG}rect")]
    assert fills.count(timecharts.heat_colour(1.0)) >= 2  # the 3-count bucket is the hottest, in both columns


def test_heatmap_of_plain_series_has_a_row_each():
    series = [Series(f"gpu {i}", {"gpu": str(i)}, wave(20, i)) for i in range(3)]
    root = xml(timecharts.heatmap(panel("heatmap", series), 580, 200))
    assert {"gpu 0", "gpu 1", "gpu 2"} <= {t.text for t in root.iter(f"{SVG}text")}


def test_state_timeline_merges_runs_and_uses_mapping_colours():
    cfg = {"mappings": [{"type": "value", "options": {"0": {"text": "Down", "color": "red"},
                                                     "1": {"text": "Up", "color": "green"}}}]}
    points = [(START + i * 60, v) for i, v in enumerate([1, 1, 1, 0, 0, 1])]
    root = xml(timecharts.state_timeline(panel("state-timeline", [Series("node", {}, points)],
                                                fieldConfig={"defaults": cfg}), 580, 120))
    boxes = [r.get("fill") for r in root.iter(f"{SVG}rect")]
    assert boxes == ["#73BF69", "#F2495C", "#73BF69"]
    assert ["".join(s.itertext()) for s in root.iter("span")] == ["Down", "Up"]


# ------------------------------------------------------------------------------ panel frame, grid
def test_an_empty_panel_says_no_data_and_why():
    pp = panel("timeseries", fieldConfig={"defaults": {"noValue": "No GPU reports"}})
    pp.verdict, pp.reason = "panel-no-data", "no data: DCGM_FI_DEV_FB_USED has no series"
    text = "".join(xml(layout.draw(pp, 500, 200)).itertext())
    assert "No GPU reports" in text and "DCGM_FI_DEV_FB_USED has no series" in text and pp.state == "no-data"
    pp.verdict = "panel-ok"  # a reason is shown only for a panel validate flags
    assert "has no series" not in "".join(xml(layout.draw(pp, 500, 200)).itertext())


def test_query_errors_and_unsupported_types_say_so():
    pp = panel("timeseries")
    pp.errors = ["query A: parse error"]
    assert "parse error" in "".join(xml(layout.draw(pp, 400, 200)).itertext()) and pp.state == "error"
    pp = panel("piechart", [Series("a", {}, [(NOW, 1.0)])])
    assert "piechart panels are not drawn" in "".join(xml(layout.draw(pp, 400, 200)).itertext())


def test_more_series_than_the_cap_are_counted():
    pp = panel("timeseries", [Series(f"s{i}", {}, wave(5)) for i in range(3)])
    pp.more = 17
    assert "+17 more series" in "".join(xml(timecharts.timeseries(pp, 500, 240)).itertext())


def _panels(*docs) -> list[PanelPreview]:
    out = []
    for i, d in enumerate(docs):
        row = d.pop("_row", None)
        out.append(PanelPreview(d, d.pop("_pointer", f"/panels/{i}"), row))
    return out


def test_grid_positions_and_a_collapsed_row_drawn_expanded():
    ps = _panels({"type": "stat", "gridPos": {"x": 0, "y": 0, "w": 6, "h": 4}},
                 {"type": "row", "title": "more", "collapsed": True, "gridPos": {"x": 0, "y": 4, "w": 24, "h": 1}},
                 {"type": "timeseries", "gridPos": {"x": 12, "y": 5, "w": 12, "h": 8}, "_row": "/panels/1",
                  "_pointer": "/panels/1/panels/0"},
                 {"type": "table", "gridPos": {"x": 0, "y": 5, "w": 24, "h": 6}, "_pointer": "/panels/2"})
    boxes = {b.panel.type: b for b in layout.place(ps)}
    assert (boxes["stat"].x, boxes["stat"].y, boxes["stat"].w, boxes["stat"].h) == (0, 0, 6, 4)
    assert boxes["row"].collapsed and (boxes["timeseries"].x, boxes["timeseries"].y) == (12, 5)
    assert boxes["table"].y == 5 + 8  # pushed down by the expanded row's panels
    html = layout.grid(DashboardPreview("d", "u", "f.json", START, NOW, "last 1h", panels=ps))
    assert "collapsed in Grafana" in html and html.count('class="gp-panel"') == 3


def test_grid_pixels_and_clamping():
    ps = _panels({"type": "stat", "gridPos": {"x": 30, "y": -4, "w": 99, "h": 2}}, {"type": "text"})
    boxes = layout.place(ps)
    assert [(b.x, b.y, b.w, b.h) for b in boxes] == [(23, 0, 1, 2), (0, 2, 24, 8)]
    dp = DashboardPreview("d", "u", "f.json", START, NOW, "last 1h", panels=ps)
    html = layout.grid(dp)
    assert f'height:{10 * layout.ROW}px' in html and f"left:{8 + 23 * layout.COLUMN}px" in html


def test_old_schema_rows_are_laid_out_by_span():
    doc = {"rows": [{"height": "300px", "panels": [{"type": "graph", "span": 6}, {"type": "graph", "span": 8}]}]}
    ps = _panels({"type": "graph", "span": 6, "_row": "/rows/0", "_pointer": "/rows/0/panels/0"},
                 {"type": "graph", "span": 8, "_row": "/rows/0", "_pointer": "/rows/0/panels/1"})
    assert [(b.x, b.y, b.w, b.h) for b in layout.place(ps, doc)] == [(0, 0, 12, 10), (0, 10, 16, 10)]


def test_hostile_titles_legends_and_labels_are_escaped():
    s = Series(EVIL, {"Hostname": EVIL, EVIL: "v"}, wave(5))
    docs = [{"type": t, "title": EVIL, "id": EVIL, "gridPos": {"x": 0, "y": i * 8, "w": 12, "h": 8},
             "description": EVIL, "fieldConfig": {"defaults": {"unit": EVIL, "noValue": EVIL, "mappings": [
                 {"type": "value", "options": {"50": {"text": EVIL, "color": EVIL}}}]}},
             "options": {"content": EVIL, "legend": {"calcs": ["max"]}}}
            for i, t in enumerate(["timeseries", "stat", "table", "heatmap", "state-timeline", "gauge", "bargauge",
                                   "text", "piechart", "row"])]
    ps = _panels(*docs)
    for p in ps:
        if p.type != "row":
            p.series = [s]
    empty = PanelPreview(dict(docs[0], gridPos={"x": 12, "y": 0, "w": 12, "h": 8}), "/panels/99",
                         verdict="panel-no-data", reason=EVIL)
    dp = DashboardPreview(EVIL, EVIL, EVIL, START, NOW, EVIL, panels=ps + [empty])
    html = layout.section(dp)
    assert "<script" not in html and "alert('x')" not in html
    root = ET.fromstring(html)  # well-formed: nothing broke out of an attribute or element
    assert EVIL in "".join(root.itertext())
    assert not [e for e in root.iter() if e.tag.split("}")[-1] in ("script", "foreignObject", "iframe")]
    assert all(not k.startswith("on") for e in root.iter() for k in e.attrib)


def test_the_html_report_carries_the_preview():
    from gpumon.findings import Report
    from gpumon.htmlreport import html

    dp = DashboardPreview("Fleet", "u", "f.json", START, NOW, "last 1h",
                          panels=[panel("timeseries", [Series("a", {}, wave(5))])])
    page = html(Report("gpumon validate", previews=[dp]))
    assert 'id="preview"' in page and 'class="gp-grid"' in page and ".gp-panel{" in page
    assert 'id="preview"' not in html(Report("gpumon validate"))


# ------------------------------------------------------------------------------ command line
def test_preview_usage_errors_exit_2(tmp_path):
    runner = CliRunner()
    res = runner.invoke(cli, ["preview", "output/dashboards", "--prom", "http://127.0.0.1:9", "--spec", "default",
                              "--time-range", "soon"])
    assert res.exit_code == 2 and "--time-range" in res.output
    assert runner.invoke(cli, ["preview", "--prom", "http://127.0.0.1:9"]).exit_code == 2


def test_preview_of_an_unreachable_server_exits_2(tmp_path):
    out = tmp_path / "p.html"
    res = CliRunner().invoke(cli, ["preview", "output/dashboards", "--prom", "http://127.0.0.1:9", "--spec", "default",
                                   "--timeout", "2", "-o", str(out)])
    assert res.exit_code == 2, res.output
    assert "127.0.0.1:9" in res.output and not out.exists()


def test_a_legend_taller_than_its_room_counts_the_series_it_leaves_out():
    pp = panel("timeseries", [Series(f"gpu {i}", {}, wave(5)) for i in range(12)],
               options={"legend": {"calcs": ["max"], "displayMode": "table"}})
    root = xml(timecharts.timeseries(pp, 580, 200))
    names = ["".join(td.itertext()) for td in root.iter("td") if td.get("class") == "gp-lname"]
    assert len(root.findall(f".//{SVG}polyline")) == 12 and 0 < len(names) < 12
    assert "".join(root.itertext()).endswith(f"+{12 - len(names)} more series")


def test_a_series_of_nan_samples_reads_nan_not_no_data():
    pp = panel("stat", [Series("total", {}, [(START, math.nan), (NOW, math.nan)])])
    assert [t.text for t in xml(cards.stat(pp, 200, 80)).iter(f"{SVG}text")] == ["NaN"]
    pp = panel("gauge", [Series("total", {}, [(NOW, math.nan)])])
    assert [t.text for t in xml(cards.gauge(pp, 200, 200)).iter(f"{SVG}text")] == ["NaN"]


def test_the_newest_point_is_the_end_of_the_range():
    from gpumon.validate.dashboards import timing

    tm = timing.timing({"gridPos": {"w": 12}}, {}, NOW + 50, 6 * 3600, 15, max_points=fetch.MAX_POINTS)
    assert (NOW + 50 - tm.start) % tm.step != 0  # Grafana's alignment: the end falls between two points
    now = fetch.ending_now(tm)
    assert (now.end - now.start) % now.step == 0 and now.end == NOW + 50 and now.step == tm.step
    assert (now.end - now.start) / now.step <= fetch.MAX_POINTS


def test_the_summary_line_counts_panels_with_data_from_the_verdicts_it_tallies(tmp_path, monkeypatch):
    """While the server fills up, the drawing's range queries can find series on a panel that
    validate's verdict (asked a moment earlier) found empty: the line's "with data" and its tally
    come from the one list of verdicts, so they always add up."""
    import gpumon.validate
    from gpumon.findings import Report

    drawn = [panel("timeseries", [Series("a", {}, wave(5))], id=i, title=f"p{i}") for i in range(3)]
    verdicts = [{"dashboard": "Fleet", "uid": "u", "file": "f.json", "panel_id": i, "title": f"p{i}",
                 "verdict": v, "message": ""} for i, v in enumerate(["panel-ok", "panel-no-data", "panel-partial"])]
    report = Report("gpumon validate", panels=verdicts,
                    previews=[DashboardPreview("Fleet", "u", "f.json", START, NOW, "last 1h", panels=drawn)])
    monkeypatch.setattr(gpumon.validate, "validate", lambda *a, **k: (report, 1))
    out = tmp_path / "p.html"
    res = CliRunner().invoke(cli, ["preview", "output/dashboards", "--prom", "http://127.0.0.1:9", "--spec", "default",
                                   "-o", str(out)])
    assert res.exit_code == 1, res.output
    assert f"{out}: 1 dashboard(s), 2 of 3 panels with data; 3 panels in 1 dashboard(s): 1 ok, 1 no data, 1 partial" \
        in res.output, res.output
