"""How ``validate --dashboards`` turns a panel target into the query Grafana sends: interval
macros, variable interpolation, and what a query reads or masks (no server)."""

from __future__ import annotations

import json

import httpx
import pytest

from gpumon.promapi import PromClient
from gpumon.spec import default_spec_path, load_spec
from gpumon.validate import validate
from gpumon.validate.dashboards import exprs, timing, variables


@pytest.mark.parametrize("ms, rounded", [(12, 10), (60, 50), (1000, 1000), (4000, 5000), (16000, 15000),
                                         (40000, 30000), (100000, 120000), (4000000, 3600000)])
def test_round_interval_like_grafana(ms, rounded):
    assert timing.round_interval_ms(ms) == rounded


def test_rate_interval_is_four_scrapes_or_interval_plus_one_scrape():
    panel = {"gridPos": {"w": 12}}
    # 1 h over 900 points = 4 s -> rounded 5 s; scrape 15 s is the floor
    t = timing.timing(panel, {}, end=7200.0, lookback=3600.0, scrape_interval=15.0)
    assert (t.interval, t.rate_interval, t.step) == (15.0, 60.0, 15.0)
    # a panel min interval of 1m: $__rate_interval = 1m + 15s
    t = timing.timing({**panel, "interval": "1m"}, {}, end=7200.0, lookback=3600.0, scrape_interval=15.0)
    assert t.macros()["__interval"] == "1m" and t.macros()["__rate_interval"] == "75s"
    # a target's interval beats the panel's; 7 days over 900 points = 672 s -> 10m
    t = timing.timing({**panel, "interval": "1m"}, {"interval": "2m"}, end=1e6, lookback=7 * 86400, scrape_interval=15.0)
    assert t.macros()["__interval"] == "10m" and t.macros()["__interval_ms"] == "600000"
    assert t.macros()["__range"] == "604800s" and t.macros()["__range_s"] == "604800"
    assert t.start % t.step == 0 and t.start <= 1e6 - 7 * 86400


def test_step_never_gives_more_than_11000_points():
    t = timing.timing({"maxDataPoints": 100000}, {}, end=1e6, lookback=30 * 86400, scrape_interval=1.0)
    assert (t.end - t.start) / t.step <= 11001


def _var(name, values, **kw):
    return variables.Resolved(name, "query", values=list(values), selected=list(values), **kw)


def test_interpolation_of_all_multi_and_single_values():
    vs = {"node": _var("node", ["gpu-node-1", "10.0.0.1:9400"], all_selected=True),
          "gpu": _var("gpu", ["0"]),
          "any": _var("any", ["a", "b"], all_selected=True, all_value=".*"),
          "ds": variables.Resolved("ds", "datasource", values=["x"], selected=["x"], datasource=True)}
    text, used = variables.interpolate('up{n=~"$node",g="${gpu}",a=~"[[any]]"}[$__rate_interval] $__interval_ms',
                                       vs, {"__rate_interval": "4s", "__interval_ms": "1000"})
    assert text == 'up{n=~"(gpu-node-1|10\\\\.0\\\\.0\\\\.1:9400)",g="0",a=~".*"}[4s] 1000'
    assert used == {"node", "gpu", "any"}
    assert variables.interpolate("${node:csv}", vs, {})[0] == "gpu-node-1,10.0.0.1:9400"
    assert variables.interpolate("$unknown", vs, {})[0] == "$unknown"


def test_custom_constant_and_regex_variables():
    class V:
        def __init__(self, name, type_, doc, definition=""):
            self.name, self.type, self.doc, self.definition = name, type_, doc, definition

    answers = {"Hostname": ["gpu-node-2", "gpu-node-1", "login-1"]}

    def run(kind, *args):
        from gpumon.promapi import Answer
        return Answer(answers[args[0]])

    out = variables.resolve([
        V("win", "custom", {"query": "5m, 10m , 1h : 1h", "current": {"value": "10m"}}),
        V("c", "constant", {"query": "dcgm-exporter"}),
        V("node", "query", {"regex": "/gpu-(.*)/", "sort": 1, "multi": False, "current": {"value": "node-2"}},
          'label_values(DCGM_FI_DEV_GPU_TEMP{job="$c"}, Hostname)'),
    ], run, {}, "http://prom")
    assert out["win"].values == ["5m", "10m", "1h"] and out["win"].selected == ["10m"]
    assert out["c"].selected == ["dcgm-exporter"]
    assert out["node"].values == ["node-1", "node-2"] and out["node"].selected == ["node-2"]


def test_mask_and_filters_from_the_ast():
    ast, _ = exprs.parse('count(up{job="x"} == 0) or on() vector(0)')
    assert str(exprs.mask(ast)) == 'count(up{job="x"} == 0)' and exprs.filters(ast)
    ast, _ = exprs.parse("(sum(DCGM_FI_DEV_FB_USED) or vector(0))")
    assert str(exprs.mask(ast)).startswith("sum(DCGM_FI_DEV_FB_USED") and not exprs.filters(ast)
    ast, _ = exprs.parse("sum(a) or sum(b)")
    assert exprs.mask(ast) is None
    ast, _ = exprs.parse("a > bool 3")
    assert not exprs.filters(ast)
    ast, _ = exprs.parse('topk(1, a) + on(x) b{c=~"d|e"}')
    assert exprs.filters(ast) and [s.text for s in exprs.selectors(ast)] == ["a", 'b{c=~"d|e"}']


# --------------------------------------------------------------------------- against a mocked API


def _partial_server(request):
    """A Thanos Query whose store is down: every answer empty, range answers with a warning."""
    path = request.url.path
    if path == "/api/v1/query":
        q = request.url.params.get("query", "")
        result = [{"metric": {}, "value": [1.0, "1"]}] if q == "vector(1)" else []
        return httpx.Response(200, json={"status": "success", "data": {"resultType": "vector", "result": result}})
    if path == "/api/v1/query_range":
        return httpx.Response(200, json={"status": "success", "data": {"resultType": "matrix", "result": []},
                                         "warnings": ["store 10.0.0.7:10901 unavailable"]})
    if path == "/api/v1/targets":
        return httpx.Response(200, json={"status": "success", "data": {"activeTargets": []}})
    return httpx.Response(404, text="404 page not found")


def test_a_partial_response_makes_an_empty_panel_inconclusive(tmp_path):
    """An empty panel on a partial answer (a Thanos store down) cannot prove "no data": exit 3."""
    dash = tmp_path / "d.json"
    dash.write_text(json.dumps({"uid": "d", "title": "D", "panels": [
        {"id": 1, "type": "timeseries", "title": "Temp", "targets": [{"refId": "A", "expr": "DCGM_FI_DEV_GPU_TEMP"}]}]}))
    spec = load_spec(default_spec_path())
    with PromClient("http://thanos:9090", transport=httpx.MockTransport(_partial_server)) as client:
        report, code = validate(spec, client, progress=False, checks=(), dashboards=(str(dash),))
    (f,) = [f for f in report.findings if f.check.startswith("panel-")]
    assert f.check == "panel-no-data" and f.severity == "inconclusive" and "store 10.0.0.7:10901" in f.message
    assert code == 3
