"""``validate --dashboards`` and ``gpumon preview`` against a server whose answers to the dashboard
queries have the wrong shape (tests/hostile_prom.py's loopback server): each is a server error
naming the URL, or an inconclusive panel, as the core checks treat a malformed answer: never the
internal error (exit 4). And a credential the server echoes is never printed in part where gpumon
cuts the server's text short."""

from __future__ import annotations

import json
import time

import pytest
from click.testing import CliRunner

from gpumon import redact
from gpumon.cli import cli

from .conftest import ROOT
from .hostile_prom import HostileProm, healthy, ok, probe, send

DASHBOARD = {"title": "T", "uid": "t1", "time": {"from": "now-1h", "to": "now"},
             "panels": [{"id": 1, "type": "timeseries", "title": "Temp", "gridPos": {"x": 0, "y": 0, "w": 12, "h": 8},
                         "datasource": {"type": "prometheus", "uid": "prom"},
                         "targets": [{"refId": "A", "expr": "DCGM_FI_DEV_GPU_TEMP"}]}]}
TOKEN = "SUPERSECRETTOKEN-5d1c7e0a9b"


def answering(query_range=None, count=None, label_values=None):
    """A healthy empty server, but for ``/query_range`` (``query_range``: the raw ``result`` JSON),
    the panel's series probes (``count``: the value of every ``count(...)``/``max(...)`` answer)
    and ``/label/.../values`` (``label_values``: the raw ``data`` JSON)."""
    def responder(h, path, params):
        query = params.get("query", [""])[0]
        if path == "/api/v1/query" and probe(params):
            return healthy(h, path, params)
        if path == "/api/v1/query_range":
            return send(h, 200, '{"status":"success","data":{"resultType":"matrix","result":%s}}' % (query_range or "[]"))
        if path == "/api/v1/query" and query.startswith(("count(", "max(")) and count is not None:
            return ok(h, {"resultType": "vector", "result": [{"metric": {}, "value": [time.time(), count]}]})
        if path.startswith("/api/v1/label/") and label_values is not None:
            return send(h, 200, '{"status":"success","data":%s}' % label_values)
        return healthy(h, path, params)
    return responder


@pytest.fixture(scope="module")
def server():
    with HostileProm() as srv:
        yield srv


@pytest.fixture
def dashboard(tmp_path):
    path = tmp_path / "dash.json"
    path.write_text(json.dumps(DASHBOARD))
    return path


def run(args: list[str]):
    redact.reset()  # each run registers its own secrets, as a fresh process would
    return CliRunner().invoke(cli, args, env={"GPUMON_BEARER_TOKEN": None})


def validate(url: str, dashboard, *more: str):
    return run(["validate", str(ROOT / "gpumon.yaml"), "--prom", url, "--checks", "targets", "--dashboards",
                str(dashboard), "--format", "json", "--timeout", "5", *more])


def preview(url: str, dashboard, out):
    return run(["preview", str(dashboard), "--prom", url, "--spec", str(ROOT / "gpumon.yaml"), "--timeout", "5",
                "-o", str(out)])


def panel_finding(result) -> dict:
    doc = json.loads(result.stdout)
    return next(f for f in doc["findings"] if f["check"].startswith("panel-"))


MALFORMED_RANGE = {"item-null": "[null]", "metric-string": '[{"metric": "x", "values": [[1, "1"]]}]',
                   "metric-list": '[{"metric": ["a"], "values": [[1, "1"]]}]',
                   "label-not-string": '[{"metric": {"a": 1}, "values": [[1, "1"]]}]',
                   "values-not-pairs": '[{"metric": {}, "values": [1, 2]}]',
                   "value-not-number": '[{"metric": {}, "values": [[1, "abc"]]}]', "result-object": '{"a": 1}',
                   "time-infinite": '[{"metric": {}, "values": [[1e400, "1"]]}]',
                   "time-year-9999": '[{"metric": {}, "values": [[253402300000, "1"]]}]'}


@pytest.mark.parametrize("name", list(MALFORMED_RANGE))
def test_a_malformed_range_answer_is_an_inconclusive_panel_naming_the_url(server, dashboard, tmp_path, name):
    server.server.responder = answering(query_range=MALFORMED_RANGE[name])
    result = validate(server.url, dashboard)
    assert result.exit_code in (1, 3) and "internal error" not in result.output, result.output[-2000:]
    found = panel_finding(result)
    assert found["check"] == "panel-query-error" and found["severity"] == "inconclusive", found
    assert f"{server.url}/api/v1/query_range: unexpected query_range answer" in found["message"]

    out = tmp_path / "p.html"
    result = preview(server.url, dashboard, out)
    assert result.exit_code == 3 and "internal error" not in result.output, result.output[-2000:]
    assert "unexpected query_range answer" in out.read_text()


@pytest.mark.parametrize("value", ["NaN", "+Inf", "-Inf", "1e400"])
def test_a_series_probe_answering_no_number_leaves_the_empty_panel_inconclusive(server, dashboard, tmp_path, value):
    server.server.responder = answering(count=value)
    result = validate(server.url, dashboard)
    assert result.exit_code in (1, 3) and "internal error" not in result.output, result.output[-2000:]
    found = panel_finding(result)
    assert found["check"] == "panel-no-data" and found["severity"] == "inconclusive", found
    assert "no series count for DCGM_FI_DEV_GPU_TEMP" in found["message"]
    result = preview(server.url, dashboard, tmp_path / "p.html")
    assert result.exit_code == 3 and "internal error" not in result.output, result.output[-2000:]


def test_label_values_that_are_not_strings_are_a_variable_error_not_a_crash(server, tmp_path):
    doc = {**DASHBOARD, "templating": {"list": [{"name": "gpu", "type": "query",
                                                 "query": "label_values(DCGM_FI_DEV_GPU_TEMP, gpu)"}]}}
    doc["panels"] = [{**DASHBOARD["panels"][0], "targets": [{"refId": "A", "expr": 'DCGM_FI_DEV_GPU_TEMP{gpu=~"$gpu"}'}]}]
    path = tmp_path / "dash.json"
    path.write_text(json.dumps(doc))
    server.server.responder = answering(label_values='[{"a": 1}, 2]')
    result = validate(server.url, path)
    assert result.exit_code in (1, 3) and "internal error" not in result.output, result.output[-2000:]
    assert "unexpected label values answer" in result.stdout


def test_an_echoed_token_is_not_printed_in_part_where_the_page_is_cut(server, dashboard, tmp_path):
    """The HTML excerpt is cut at 120 characters: the token straddling the cut is masked whole."""
    def echo(h, path, params):
        send(h, 500, "<html><body>" + "x" * 76 + "Authorization: " + h.headers["Authorization"] + " end</body></html>",
             "text/html")
    server.server.responder = echo
    token = tmp_path / "tok"
    token.write_text(TOKEN)
    result = validate(server.url, dashboard, "--bearer-token-file", str(token))
    assert result.exit_code == 2 and "Authorization: ****" in result.stdout, result.output[-2000:]
    assert TOKEN[:4] not in result.output and "Bearer" not in result.output
