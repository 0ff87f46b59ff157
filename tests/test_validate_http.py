"""promapi + validate on answers a real local Prometheus cannot give (httpx.MockTransport): an auth
proxy's HTML login page, Mimir's plain-text 401, Thanos partial responses, timeouts, garbage.
Also the client's header, prefix and secret handling."""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest

from gpumon import reporters
from gpumon.promapi import PromClient, PromError
from gpumon.spec import default_spec_path, load_spec
from gpumon.validate import validate

SPEC = load_spec(default_spec_path())
TOKEN = "s3cr3t-token-value"


def ok(data, warnings=None):
    doc = {"status": "success", "data": data}
    if warnings:
        doc["warnings"] = warnings
    return httpx.Response(200, json=doc)


def vector(*samples):
    return {"resultType": "vector", "result": [{"metric": m, "value": [1.0, v]} for m, v in samples]}


def client(handler, **kw) -> PromClient:
    return PromClient(kw.pop("url", "http://prom.example:9090"), transport=httpx.MockTransport(handler), **kw)


def run(handler, **kw):
    with client(handler, **kw) as c:
        report, code = validate(SPEC, c, progress=False)
    return report, code, reporters.render(report, "text", width=200) + reporters.render(report, "json")


def test_html_login_page_is_auth_error_exit_2():
    page = "<!DOCTYPE html><html><body><h1>Sign in</h1><form action='/oauth/start'></form></body></html>"

    def handler(request):
        if request.url.path == "/oauth/start":
            return httpx.Response(200, text=page, headers={"content-type": "text/html; charset=utf-8"})
        return httpx.Response(302, headers={"location": "/oauth/start?rd=%2F"})

    report, code, out = run(handler)
    assert code == 2
    (f,) = report.findings
    assert f.check == "auth-error" and "received HTML (likely a login page" in f.message
    assert "HTTP 200" in f.message and "/oauth/start" in f.message  # final URL after the redirect
    assert "no series" not in out.lower() and "series-missing" not in out


def test_mimir_plain_text_401_no_org_id():
    seen = []

    def handler(request):
        seen.append(request)
        if request.headers.get("X-Scope-OrgID") != "team-gpu":
            return httpx.Response(401, text="no org id\n", headers={"content-type": "text/plain"})
        if request.url.path == "/prometheus/api/v1/targets":
            return httpx.Response(404, text="404 page not found\n")
        if request.url.path == "/prometheus/api/v1/rules":
            return ok({"groups": []})
        q = request.url.params.get("query", "")
        if q == "vector(1)":
            return ok({"resultType": "vector", "result": [{"metric": {}, "value": [1.0, "1"]}]})
        if q.startswith('up{job="dcgm-exporter"} != 1 or '):  # the targets not up, and how many there are
            return ok(vector(({"gpumon_targets": "all"}, "1")))
        return ok(vector())

    report, code, out = run(handler, path_prefix="/prometheus")
    assert code == 2 and report.findings[0].check == "auth-error"
    assert "HTTP 401" in report.findings[0].message and "no org id" in report.findings[0].message
    assert "--tenant" in report.findings[0].hint and "JSON" not in report.findings[0].message

    seen.clear()
    report, code, out = run(handler, path_prefix="/prometheus", tenant="team-gpu")
    assert seen and all(r.headers["X-Scope-OrgID"] == "team-gpu" for r in seen)
    assert all(r.url.path.startswith("/prometheus/api/v1/") for r in seen)
    checks = {f.check for f in report.findings}
    assert "targets-api-unavailable" in checks and "rules-not-loaded" in checks
    assert "target-missing" not in checks and "target-down" not in checks
    assert code == 1


def test_partial_response_warnings_are_inconclusive_exit_3():
    warn = ["partial response: store 10.0.0.9:10901 unavailable"]

    def handler(request):
        path = request.url.path
        if path == "/api/v1/targets":
            return ok({"activeTargets": [{"labels": {"job": "dcgm-exporter", "instance": "a:9400"}, "health": "up",
                                          "lastError": "", "lastScrapeDuration": 0.1, "scrapeTimeout": "10s"}],
                       "droppedTargets": []})
        if path == "/api/v1/rules":
            from gpumon.rules import build_groups
            return ok({"groups": [{"name": g.name, "rules": [{"name": r.name, "health": "ok",
                                                              "type": "alerting" if r.alert else "recording"}
                                                             for r in g.rules]} for g in build_groups(SPEC)]})
        q = request.url.params.get("query", "")
        if q == "vector(1)":
            return ok({"resultType": "vector", "result": [{"metric": {}, "value": [1.0, "1"]}]})
        return ok(vector(), warnings=warn)  # every data query is partial

    report, code, out = run(handler)
    assert code == 3
    assert report.count("error") == 0 and report.count("inconclusive") > 0
    assert "store 10.0.0.9:10901 unavailable" in out


def test_timeout_is_exit_2_with_hint():
    def handler(request):
        raise httpx.ReadTimeout("timed out", request=request)

    report, code, _ = run(handler, timeout=0.5)
    assert code == 2 and report.findings[0].check == "prometheus-timeout"
    assert "0.5s" in report.findings[0].message and "--timeout" in report.findings[0].hint


@pytest.mark.parametrize("resp, check, text", [
    (httpx.Response(200, text="hello world", headers={"content-type": "text/plain"}), "not-prometheus-api",
     "not a Prometheus API answer"),
    (httpx.Response(200, json={"foo": 1}), "not-prometheus-api", "not a Prometheus API answer"),
    (httpx.Response(404, text="404 page not found\n"), "api-not-found", "404 page not found"),
    (httpx.Response(400, json={"status": "error", "errorType": "bad_data", "error": "invalid parameter \"query\""}),
     "api-error", "bad_data: invalid parameter"),
    (httpx.Response(200, text="<!DOCTYPE html><title>Directory listing for /</title><ul><li>a.txt</li></ul>",
                    headers={"content-type": "text/html"}), "not-prometheus-api", "received an HTML page, not the"),
    (httpx.Response(502, text="<html>Bad Gateway</html>", headers={"content-type": "text/html"}), "http-error",
     "received an HTML error page"),
    (httpx.Response(403, text="<html><body>Forbidden. Sign in</body></html>", headers={"content-type": "text/html"}),
     "auth-error", "received HTML (likely a login page"),
    (httpx.Response(503, text="upstream connect error"), "http-error", "upstream connect error"),
])
def test_garbage_answers_exit_2(resp, check, text):
    report, code, _ = run(lambda request: resp)
    assert code == 2
    assert report.findings[0].check == check and text in report.findings[0].message


def test_query_error_inside_a_check_is_inconclusive():
    def handler(request):
        if request.url.path == "/api/v1/targets":
            return ok({"activeTargets": [{"labels": {"job": "dcgm-exporter", "instance": "a:9400"}, "health": "up",
                                          "lastScrapeDuration": 0.1, "scrapeTimeout": "10s"}]})
        if request.url.path == "/api/v1/rules":
            return httpx.Response(503, json={"status": "error", "errorType": "unavailable", "error": "rule manager down"})
        q = request.url.params.get("query", "")
        if q == "vector(1)":
            return ok({"resultType": "vector", "result": [{"metric": {}, "value": [1.0, "1"]}]})
        return ok(vector())

    report, code, _ = run(handler)
    inc = [f for f in report.findings if f.severity == "inconclusive"]
    assert inc and all("rule manager down" in f.message for f in inc if f.case.startswith("rules-loaded"))
    assert code == 3


def test_secrets_never_printed_nor_sent_cross_host(tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    seen = []

    def handler(request):
        seen.append((request.url.host, request.headers.get("authorization"), request.headers.get("x-api-key")))
        if request.url.host == "prom.example":
            return httpx.Response(307, headers={"location": "https://evil.example/login"})
        return httpx.Response(403, text="forbidden", headers={"content-type": "text/plain"})

    report, code, out = run(handler, bearer_token_file=str(token_file), headers={"X-Api-Key": "k3y-value"})
    assert code == 2
    # the redirect to another host is not followed at all (gpumon.promhttp), let alone with secrets
    assert seen == [("prom.example", f"Bearer {TOKEN}", "k3y-value")]
    assert "redirects to https://evil.example/login" in out
    assert TOKEN not in out and "k3y-value" not in out
    with client(handler, bearer_token_file=str(token_file)) as c:
        assert c.describe_headers()["Authorization"] == "Bearer ****"


def test_basic_auth_file_and_url_credentials(tmp_path):
    auth = tmp_path / "basic"
    auth.write_text("alice:pa55word\n")
    seen = []

    def handler(request):
        seen.append(request.headers.get("authorization"))
        return httpx.Response(401, text="unauthorized")

    with client(handler, basic_auth_file=str(auth)) as c:
        with pytest.raises(PromError) as err:
            c.query("vector(1)")
    assert seen[-1] == "Basic YWxpY2U6cGE1NXdvcmQ=" and "pa55word" not in str(err.value)
    with client(handler, url="http://bob:hunter2@prom.example:9090") as c:
        with pytest.raises(PromError) as err:
            c.query("vector(1)")
    assert "hunter2" not in str(err.value) and "bob" not in c.base
    bad = tmp_path / "empty"
    bad.write_text("")
    with pytest.raises(PromError, match="empty"):
        client(handler, bearer_token_file=str(bad))
    with pytest.raises(PromError, match="cannot read"):
        client(handler, basic_auth_file=str(tmp_path / "nope"))
    with pytest.raises(PromError, match="not an http"):
        PromClient("prom.example:9090")


def test_rules_pagination():
    pages = {None: {"groups": [{"name": "a", "rules": []}], "groupNextToken": "t1"},
             "t1": {"groups": [{"name": "b", "rules": []}]}}

    def handler(request):
        return ok(pages[request.url.params.get("group_next_token")])

    with client(handler) as c:
        assert [g["name"] for g in c.rules().data] == ["a", "b"]


def test_cli_usage_errors_exit_2(tmp_path):
    from click.testing import CliRunner

    from gpumon.cli import cli
    runner = CliRunner()
    res = runner.invoke(cli, ["validate", "--prom", "http://127.0.0.1:1", "--lookback", "soon"])
    assert res.exit_code == 2 and "not a Prometheus duration" in res.output
    res = runner.invoke(cli, ["validate", "--prom", "http://127.0.0.1:1", "--checks", "presense"])
    assert res.exit_code == 2 and "unknown check" in res.output
    res = runner.invoke(cli, ["validate", "--prom", "http://127.0.0.1:1", "--bearer-token-file", str(tmp_path / "x")])
    assert res.exit_code == 2 and "cannot read bearer token file" in res.output and "Traceback" not in res.output
    res = runner.invoke(cli, ["validate", "--prom", "http://127.0.0.1:1", "--timeout", "2"])
    assert res.exit_code == 2 and "prometheus-unreachable" in res.output
    assert json.loads(runner.invoke(cli, ["validate", "--prom", "http://127.0.0.1:1", "--format", "json"]).output)[
        "findings"][0]["check"] == "prometheus-unreachable"


def _targets_handler(active):
    def handler(request):
        if request.url.path == "/api/v1/targets":
            return ok({"activeTargets": active, "droppedTargets": []})
        q = request.url.params.get("query", "")
        if q == "vector(1)":
            return ok({"resultType": "vector", "result": [{"metric": {}, "value": [1.0, "1"]}]})
        return ok(vector())
    return handler


def test_target_classification_from_lasterror():
    """Message shapes from NVIDIA/dcgm-exporter#607, utkuozdemir/nvidia_gpu_exporter#389 and
    nginx/nginx-prometheus-exporter#917 (Prometheus 3's Content-Type refusal cannot be produced by
    the local 2.42)."""
    def t(inst, health, err="", took=0.1, timeout="10s"):
        return {"labels": {"job": "dcgm-exporter", "instance": inst}, "scrapeUrl": f"http://{inst}/metrics",
                "health": health, "lastError": err, "lastScrapeDuration": took, "scrapeTimeout": timeout}
    active = [
        t("a:9400", "down", 'Get "http://a:9400/metrics": context deadline exceeded', 10.001),
        t("b:9400", "down", 'received unsupported Content-Type "text/html; charset=utf-8" and no '
                            "fallback_scrape_protocol specified for target"),
        t("c:9835", "down", 'Get "http://c:9835/metrics": dial tcp 10.2.0.7:9835: connect: connection refused'),
        t("d:9400", "up", took=8.5),
        t("e:9400", "up", took=1.0),
        {"labels": {"job": "other", "instance": "z:1"}, "health": "down", "lastError": "x"},
    ]
    with client(_targets_handler(active)) as c:
        report, code = validate(SPEC, c, progress=False, checks=("targets",))
    got = {f.subject: f.check for f in report.findings}
    assert got == {"a:9400": "scrape-timeout", "b:9400": "scrape-content-type", "c:9835": "target-down",
                   "d:9400": "scrape-slow"}
    assert "fallback_scrape_protocol" in next(f for f in report.findings if f.subject == "b:9400").hint
    assert "connection refused" in next(f for f in report.findings if f.subject == "c:9835").message
    assert "85%" in next(f for f in report.findings if f.subject == "d:9400").message
    assert code == 1


def test_progress_line_on_a_tty_after_one_second(monkeypatch, capsys):
    import sys as _sys
    import time as _time

    from gpumon.validate.base import Context
    monkeypatch.setattr(_sys.stderr, "isatty", lambda: True, raising=False)

    def handler(request):
        _time.sleep(0.15)
        return ok({"resultType": "vector", "result": []})

    with client(handler) as c:
        ctx = Context(SPEC, c, concurrency=1, progress=True)
        ctx.queries_at_now({str(i): "vector(1)" for i in range(10)})
        ctx.close()
    err = capsys.readouterr().err
    assert "gpumon validate: " in err and "/10 queries" in err
    with client(handler) as c:
        ctx = Context(SPEC, c, concurrency=1, progress=True)
        ctx.queries_at_now({"one": "vector(1)"})  # quick: no progress line
        ctx.close()
    assert "queries" not in capsys.readouterr().err


def test_optional_fields_behind_a_partial_response_are_not_called_absent():
    """optional-absent must not list a field whose query came back partial (Thanos store down)."""
    gpu = {"job": "dcgm-exporter", "instance": "a:9400", "Hostname": "gpu-a1", "UUID": "GPU-aaaa", "gpu": "0"}

    def handler(request):
        q = request.url.params.get("query", "")
        if request.url.path == "/api/v1/targets":  # the shared targets fact: one healthy target
            return ok({"activeTargets": [{"labels": {"job": "dcgm-exporter", "instance": "a:9400"}, "health": "up",
                                          "scrapeInterval": "15s"}], "droppedTargets": []})
        if q == "vector(1)":
            return ok({"resultType": "vector", "result": [{"metric": {}, "value": [1.0, "1"]}]})
        # the field's own query (the reporting-GPU union names every field, GPU_TEMP first)
        if "DCGM_FI_PROF_GR_ENGINE_ACTIVE" in q and "DCGM_FI_DEV_GPU_TEMP" not in q:
            return ok(vector(), warnings=["partial response: store 10.0.0.9:10901 unavailable"])
        if "DCGM_FI_DEV_GPU_TEMP" in q:
            return ok(vector((gpu, "1")))
        return ok(vector())

    with client(handler) as c:
        report, code = validate(SPEC, c, progress=False, checks=("optional",))
    unsure = [f for f in report.findings if f.severity == "inconclusive"]
    assert [f.check for f in unsure] == ["optional-absent"] and "DCGM_FI_PROF_GR_ENGINE_ACTIVE" in unsure[0].message
    absent = " ".join(f.message for f in report.findings if f.severity != "inconclusive")
    assert "DCGM_FI_PROF_GR_ENGINE_ACTIVE" not in absent and "DCGM_FI_PROF_DRAM_ACTIVE" in absent
    assert code == 3


def test_streamed_answers_are_decoded_one_at_a_time_while_the_server_computes_them_side_by_side():
    """Answers folded as they are decoded (``each``) are the fleet-sized ones: requests for two of
    them are both sent before either is decoded (the server works on them in parallel), and their
    samples never interleave (the client holds one such body at a time)."""
    both_sent, arrived, order = threading.Event(), [], []
    lock = threading.Lock()

    def handler(req):
        with lock:
            arrived.append(req.url.params["query"])
            if len(arrived) == 2:
                both_sent.set()
        return ok(vector(*[({"UUID": f"GPU-{i}"}, "1") for i in range(200)]))

    def fold(name):
        def each(sample):
            assert both_sent.wait(5), "the second request was not sent while the first was decoded"
            order.append(name)
            time.sleep(0.001)  # lets the other thread run, were it decoding too
        return each

    with client(handler) as c:
        threads = [threading.Thread(target=c.query, args=(q,), kwargs={"each": fold(q)}) for q in ("a", "b")]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
    assert sorted(arrived) == ["a", "b"] and len(order) == 400
    runs = [k for i, k in enumerate(order) if i == 0 or order[i - 1] != k]
    assert len(runs) == 2, f"samples of the two answers interleaved: {runs[:10]}"


def test_streamed_samples_reach_each_and_are_not_kept():
    """``query(..., each=f)`` hands every sample to ``f`` as the answer is decoded and keeps
    none; a result with anything but samples, or not a vector, is a shape error, and an error
    status is a PromError whatever was streamed before it."""
    samples = [({"UUID": f"GPU-{i}", "gpu": str(i % 8)}, "1") for i in range(1000)]
    got = []
    with client(lambda req: ok(vector(*samples))) as c:
        ans = c.query("group by (UUID) (up)", each=got.append)
    assert ans.data == [] and [s["metric"] for s in got] == [m for m, _ in samples]
    hostile = {"resultType": "vector", "result": [{"metric": {"UUID": "GPU-1"}, "value": [1.0, "1"]}, 7]}
    matrix = {"resultType": "matrix", "result": [{"metric": {}, "values": [[1.0, "1"]]}]}
    for data in (hostile, matrix):
        with client(lambda req, data=data: ok(data)) as c, pytest.raises(PromError) as err:
            c.query("up", each=[].append)
        assert err.value.kind == "not-json" and "unexpected query answer" in err.value.message
    error = {"status": "error", "errorType": "execution", "error": "query timed out",
             "data": vector(*samples[:3])}
    with client(lambda req: httpx.Response(422, json=error)) as c, pytest.raises(PromError) as err:
        c.query("up", each=[].append)
    assert err.value.kind == "api" and "query timed out" in err.value.message


def test_a_group_listed_twice_in_a_partial_rules_answer_is_inconclusive():
    """A rules answer with warnings (a ruler or store did not answer) may list a group once more or
    fewer: two different copies of a group in it cannot prove an error."""
    groups = [{"name": "gpumon.gaps", "file": f, "rules": [{"type": "recording", "name": "x", "query": q}]}
              for f, q in (("a.yaml", "up"), ("b.yaml", "up * 1"))]

    def server(warnings):
        def handler(req):
            if req.url.path == "/api/v1/rules":
                return ok({"groups": groups}, warnings=warnings)
            return ok(vector(({}, "1")) if req.url.params.get("query") == "vector(1)" else vector())
        return handler

    for warnings, severity in ((["ruler b did not answer"], "inconclusive"), (None, "error")):
        with client(server(warnings)) as c:
            report, _ = validate(SPEC, c, progress=False, checks=("rules-loaded",))
        (twice,) = [f for f in report.findings if f.check == "rules-loaded-twice"]
        assert twice.severity == severity and ("partial response" in twice.message) == bool(warnings), twice
