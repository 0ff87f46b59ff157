"""``gpumon validate --dashboards`` against a REAL Prometheus (each engine) scraping the simulator
with faults: gpumon's own dashboards (rendered from the test spec), NVIDIA's official dashboard
and a dashboard of traps (tests/data/dashboards/traps.json).

The oracle is independent of the code under test: a panel "reads" a faulted field when the field
appears as a selector name in one of its targets (a regex on the raw JSON). Every faulted field
must flag exactly the panels that read it, with the verdict the fault implies; every other panel
must be ok, or one of the few verdicts that hold on a healthy fleet too (listed below).
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from gpumon import render
from gpumon.cli import cli
from gpumon.findings import Finding
from gpumon.localprom import LocalPrometheus
from gpumon.promapi import PromClient
from gpumon.reporters import render as render_report
from gpumon.simfaults import Fault
from gpumon.simserve import Simulator
from gpumon.simulate import Fleet
from gpumon.spec import parse_spec
from gpumon.validate import validate
from gpumon.validate.dashboards.judge import Judge

from . import browser
from .conftest import ROOT

DATA = Path(__file__).parent / "data"
#: the test spec with rule groups evaluated every second (the slow groups default to 1m)
SPEC_TEXT = (DATA / "validate-spec.yaml").read_text().replace("  for: 5m\n", "  for: 5m\n  slow_group_interval: 1s\n  gaps_group_interval: 1s\n", 1)
FAULTS = [
    Fault("drop", metric="DCGM_FI_DEV_FB_USED", node="gpu-node-2"),          # one node
    Fault("drop", metric="DCGM_FI_DEV_SM_CLOCK", node="gpu-node-1", gpu=1),  # one GPU
    Fault("drop", metric="DCGM_FI_DEV_MEM_COPY_UTIL"),                       # every GPU (NVIDIA/dcgm-exporter#571)
    Fault("no-profiling"),                                                    # every DCGM_FI_PROF_* (optional)
]
#: faulted field -> verdict of every panel reading it (a fleet-wide loss empties the panel, a
#: partial one leaves fewer GPUs in it); PROF fields are optional: no data, but only a warning
FAULTED = {"DCGM_FI_DEV_FB_USED": "panel-partial", "DCGM_FI_DEV_SM_CLOCK": "panel-partial",
           "DCGM_FI_DEV_MEM_COPY_UTIL": "panel-no-data"}
PROF = r"DCGM_FI_PROF_\w+"
#: (title, verdict) that hold without any fault: the simulator never serves the vGPU-only field,
#: no alert fires, no XID happened, no GPU was lost, no field has gaps
HEALTHY_BASELINE = {("vGPU licence status", "panel-no-data"), ("Firing gpumon alerts", "panel-expected-empty"),
                    ("Last XID error: last value per GPU", "panel-expected-empty"),
                    ("Last XID error over time", "panel-expected-empty"),
                    ("GPUs lost (known, silent now)", "panel-expected-empty"),
                    ("Gaps per GPU and field (share of scrapes carrying it, 30m)", "panel-expected-empty"),
                    # the gap ratio is recorded only below 1 (issue 16): a GPU without gaps has none
                    ("Scrapes carrying each field (30m)", "panel-expected-empty")}


def reads(panel: dict, metric: str) -> bool:
    """The metric (a regex) is a selector name in one of the panel's targets (not an alternative
    in a label regex such as ``dcgm_field=~"A|B"``)."""
    pattern = re.compile(rf'(?<![\w"|:]){metric}(?![\w"|:])')
    return any(pattern.search(t.get("expr") or "") for t in panel.get("targets") or [])


def panels(doc: dict):
    for p in doc.get("panels") or []:
        yield p
        yield from p.get("panels") or []


@pytest.fixture(scope="module")
def env(tmp_path_factory, engine):
    tmp = tmp_path_factory.mktemp("dashboards")
    spec = parse_spec(SPEC_TEXT, "<test>")
    files = render.render(spec)
    (tmp / "rules.yaml").write_text(files["rules/gpumon.rules.yaml"])
    for name, text in files.items():
        if name.startswith("dashboards/"):
            (tmp / name.split("/")[1]).write_text(text)
    with Simulator(Fleet(3, 2, FAULTS)) as sim:
        with LocalPrometheus({"dcgm-exporter": list(sim.targets.values())}, rule_files=[tmp / "rules.yaml"],
                             scrape_interval="1s", scrape_timeout="1s", evaluation_interval="1s",
                             binary=engine.prometheus) as prom:
            # 20 s of history and every recording rule the dashboards read evaluated on it (the
            # sparse ones, such as the gap ratio, record nothing on healthy GPUs: wait on the groups)
            ready = prom.wait_for(lambda: len(prom.query('count_over_time(up{job="dcgm-exporter"}[1m]) >= 20')) == 3
                                  and prom.query("job_dcgm_field:gpumon_coverage:ratio")
                                  and prom.query("job:gpumon_gpu_devices_known:count"), 120)
            assert ready and prom.settle(), prom.logs()
            yield {"prom": prom, "spec": spec, "dir": tmp}


def run(env, paths, **kw):
    with PromClient(env["prom"].url) as client:
        return validate(env["spec"], client, lookback=20.0, progress=False, dashboards=tuple(map(str, paths)), **kw)


@pytest.fixture(scope="module")
def verdicts(env):
    report, code = run(env, [env["dir"], DATA / "dcgm-exporter-dashboard.json"])
    return report, code


def test_every_fault_flags_exactly_the_panels_that_read_it(env, verdicts):
    report, code = verdicts
    assert code == 1
    by_title = {}
    for v in report.panels:
        by_title[(v["file"].rsplit("/", 1)[-1], v["title"])] = v
    docs = {p.name: json.loads(p.read_text()) for p in sorted(env["dir"].glob("*.json"))}
    docs["dcgm-exporter-dashboard.json"] = json.loads((DATA / "dcgm-exporter-dashboard.json").read_text())
    checked = 0
    for file, doc in docs.items():
        for p in panels(doc):
            if p.get("type") == "row" or not p.get("targets"):
                continue
            v = by_title[(file, p["title"])]
            faulted = [m for m in FAULTED if reads(p, m)]
            prof = reads(p, PROF)
            if faulted:
                expected = {FAULTED[m] for m in faulted}
                assert v["verdict"] in expected, (file, p["title"], v)
                assert v["causes"], (file, p["title"], v)  # linked to the presence finding
            elif prof:
                assert (v["verdict"], v["severity"]) == ("panel-no-data", "warning"), (file, p["title"], v)
                # linked to the note that lists every absent profiling field
                assert any(c.startswith("optional-absent: ") for c in v["causes"]), (file, p["title"], v)
            elif (p["title"], v["verdict"]) in HEALTHY_BASELINE:
                pass
            else:
                assert v["verdict"] == "panel-ok", (file, p["title"], v)
            checked += 1
    assert checked == len(report.panels) == 91
    # empty because nothing is wrong: said as such, naming the sparse series it reads beside the others
    lost = by_title[("gpumon-health.json", "GPUs lost (known, silent now)")]["message"]
    assert lost.startswith("every series it reads exists but the sparse ones (job_gpu:gpumon_legacy_inventory:group"), lost
    gaps = by_title[("gpumon-health.json", "Gaps per GPU and field (share of scrapes carrying it, 30m)")]["message"]
    assert gaps.startswith("reads only sparse series (job_gpu:dcgm_field_samples:ratio30m)"), gaps
    # the official dashboard: its SM clock and framebuffer lines lack the faulted GPUs, the
    # tensor-core panel is empty; nothing else is flagged (issue #14)
    official = {v["title"]: v for v in report.panels if v["file"].endswith("dcgm-exporter-dashboard.json")}
    assert "shows 5 of 6 GPUs" in official["GPU SM Clocks"]["message"]
    assert "gpu-node-1 gpu 1" in official["GPU SM Clocks"]["message"]
    assert "shows 4 of 6 GPUs" in official["GPU Framebuffer Mem Used"]["message"]
    assert official["GPU SM Clocks"]["causes"] == ["series-missing: DCGM_FI_DEV_SM_CLOCK on gpu-node-1"]
    assert official["Tensor Core Utilization"]["verdict"] == "panel-no-data"
    assert sum(v["verdict"] == "panel-ok" for v in official.values()) == 5


def test_every_flagged_panel_is_a_finding_with_its_location(verdicts):
    report, _ = verdicts
    flagged = [v for v in report.panels if v["verdict"] != "panel-ok"]
    findings = [f for f in report.findings if f.check.startswith("panel-")]
    assert len(findings) == len(flagged)
    for f in findings:
        assert f.location is not None and f.location.line > 1
        assert f.case.startswith("dashboards/")
    no_data = next(f for f in findings if f.check == "panel-no-data" and "Memory utilisation" in f.subject)
    assert no_data.severity == "error" and "DCGM_FI_DEV_MEM_COPY_UTIL" in no_data.message
    assert "series-missing: DCGM_FI_DEV_MEM_COPY_UTIL" in no_data.hint


def test_traps(env):
    report, code = run(env, [DATA / "dashboards" / "traps.json"], checks=())
    got = {v["title"]: v for v in report.panels}
    assert set(got) == {"Temperature by an empty picker", "Memory copy utilisation, masked", "Many-to-many join",
                        "Exporter logs", "Power by node over $window",
                        "Temperature by a framebuffer-anchored picker"}  # the text panel has no queries
    assert got["Temperature by an empty picker"]["verdict"] == "panel-variable-empty"
    assert "$host" in got["Temperature by an empty picker"]["message"]
    assert got["Memory copy utilisation, masked"]["verdict"] == "panel-masked"
    assert "DCGM_FI_DEV_MEM_COPY_UTIL" in got["Memory copy utilisation, masked"]["message"]
    assert got["Many-to-many join"]["verdict"] == "panel-query-error"
    # the server's own words: 3.x "many-to-many matching not allowed", 2.42 "found duplicate series
    # for the match group ... on the right hand-side" (whichever side the engine meets first)
    message = got["Many-to-many join"]["message"]
    assert "many-to-many matching not allowed" in message or "found duplicate series for the match group" in message
    assert got["Exporter logs"]["verdict"] == "panel-unsupported" and "loki" in got["Exporter logs"]["message"]
    # inside a collapsed row, a custom variable and $__rate_interval: the panel shows data
    power = got["Power by node over $window"]
    assert power["verdict"] == "panel-ok" and power["row"] == "Collapsed"
    assert "[10m]" in power["queries"][0] and "[4s]" in power["queries"][1]
    assert 'Hostname=~"(gpu-node-1|gpu-node-2|gpu-node-3)"' in power["queries"][0]
    # a picker anchored on a field gpu-node-2 lacks: its GPUs vanish from the panel (NVIDIA/dcgm-exporter#236)
    picker = got["Temperature by a framebuffer-anchored picker"]
    assert (picker["verdict"], picker["severity"]) == ("panel-variable-empty", "warning"), picker
    assert picker["message"].startswith("$fbnode (label_values(DCGM_FI_DEV_FB_USED{") and "but not gpu-node-2" in picker["message"]
    assert 'Hostname=~"(gpu-node-1|gpu-node-3)"' in picker["queries"][0]
    assert code == 1


def test_query_cap_is_said(env):
    report, code = run(env, [DATA / "dcgm-exporter-dashboard.json"], checks=(), dashboard_max_queries=5)
    (cap,) = [f for f in report.findings if f.check == "dashboard-query-cap"]
    assert cap.severity == "inconclusive" and "stopped at 5 queries" in cap.message
    assert any(v["verdict"] == "panel-not-evaluated" for v in report.panels)
    assert not any(v["verdict"] == "panel-ok" for v in report.panels if v["verdict"] == "panel-not-evaluated")
    assert code == 3


def test_cli_without_a_spec(env, tmp_path, monkeypatch):
    # no SPEC: only the dashboards are checked, with the label names of the nearest gpumon.yaml (a
    # folder with none stops with exit 2: never a guess)
    (tmp_path / "gpumon.yaml").write_text((ROOT / "gpumon.yaml").read_text())
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(cli, ["validate", "--prom", env["prom"].url, "--lookback", "20s",
                                   "--dashboards", str(DATA / "dcgm-exporter-dashboard.json"), "--format", "json"])
    assert res.exit_code == 0, res.output  # partial and optional no-data panels warn, nothing fails
    doc = json.loads(res.output)
    assert [c for c in doc["checks"] if not c.startswith("dashboards/")] == ["reachability/query-api"]
    assert {p["title"]: p["verdict"] for p in doc["panels"]}["GPU SM Clocks"] == "panel-partial"
    assert doc["summary"]["dashboards"].startswith("8 panels in 1 dashboard(s): 5 ok, 1 no data, 2 partial")
    assert doc["summary"]["spec"] == "gpumon.yaml"
    assert doc["summary"]["spec use"] == ("label names only (the nearest gpumon.yaml from the working directory "
                                          "upwards); no spec check ran: pass SPEC to check the fleet too")


class _Dom(HTMLParser):
    """Elements with data-* attributes, as (tag, attrs) pairs."""

    def __init__(self):
        super().__init__()
        self.elements: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if any(k.startswith("data-") or k == "id" for k in attrs):
            self.elements.append((tag, attrs))


def test_html_report_in_chromium(verdicts, tmp_path):
    """The HTML report opens in a real browser; its coverage matrix has one missing cell per
    (GPU, required field) the fleet lacks, each linked to a series-missing finding, and every
    series-missing finding is behind at least one cell."""
    report, _ = verdicts
    page = tmp_path / "report.html"
    page.write_text(render_report(report, "html"))
    source = page.read_text()
    assert "<link" not in source and "<script" not in source and "url(" not in source and "@import" not in source
    dom = _Dom()
    dom.feed(browser.dump_dom(page))
    cells = [a for t, a in dom.elements if t == "td" and "data-state" in a]
    missing = [a for a in cells if a["data-state"] == "missing"]
    # FB_USED on both GPUs of gpu-node-2, SM_CLOCK on gpu-node-1 gpu 1, MEM_COPY_UTIL on all 6
    assert len(missing) == 2 + 1 + 6
    rows = {a["id"]: a for t, a in dom.elements if t == "tr" and a.get("id", "").startswith("f")}
    series_missing = {i for i, a in rows.items() if a["data-check"] == "series-missing"}
    assert {a["data-finding"] for a in missing} == series_missing
    assert len(series_missing) == sum(f.check == "series-missing" for f in report.findings) == 3
    assert len(cells) == 6 * len(report.coverage["fields"])
    panels = [a for t, a in dom.elements if t == "tr" and "data-verdict" in a]
    assert len(panels) == len(report.panels)
    assert sum(a["data-verdict"] == "panel-ok" for a in panels) == sum(v["verdict"] == "panel-ok" for v in report.panels)
    shot = browser.screenshot(page, tmp_path / "report.png")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20000


def test_documented_example_still_occurs(verdicts):
    """docs/checks/validate/dashboards.md shows a finding recorded from this fleet."""
    example = json.loads((DATA / "validate-examples.json").read_text())["dashboards"]
    report, _ = verdicts
    found = {(f.check, f.severity, f.subject, f.message, f.hint) for f in report.findings}
    assert (example["check"], example["severity"], example["subject"], example["message"], example["hint"]) in found


def test_without_an_inventory_the_dashboards_own_gpus_are_expected(env):
    """A spec whose job the server does not have (or none): the GPUs the dashboard's panels show
    between them are the ones every per-GPU panel should show."""
    spec = parse_spec(SPEC_TEXT.replace("job: dcgm-exporter", "job: not-this-one"), "<other job>")
    with PromClient(env["prom"].url) as client:
        report, _ = validate(spec, client, lookback=20.0, progress=False, checks=(),
                             dashboards=(str(DATA / "dcgm-exporter-dashboard.json"),))
    got = {v["title"]: v for v in report.panels}
    assert got["GPU SM Clocks"]["verdict"] == "panel-partial"
    assert got["GPU SM Clocks"]["message"].startswith("shows 5 of 6 GPUs")
    assert got["GPU Temperature"]["verdict"] == "panel-ok"


def test_rate_over_too_few_samples_is_inconclusive_not_no_data(env, tmp_path):
    """A counter panel on a young server (or a window under two scrapes) is empty although every
    series exists: rate() needs two samples. That is "run again later" (inconclusive), not a broken
    panel; a window holding enough samples on the same series still shows data."""
    sel = 'DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{job="dcgm-exporter"}'
    doc = {"uid": "young", "title": "Young server", "schemaVersion": 39, "panels": [
        {"id": 1, "type": "timeseries", "title": "Energy rate over 900ms", "datasource": {"type": "prometheus"},
         "targets": [{"refId": "A", "expr": f"sum by (Hostname) (rate({sel}[900ms]))"}]},
        {"id": 2, "type": "timeseries", "title": "Energy rate over the rate interval", "datasource": {"type": "prometheus"},
         "targets": [{"refId": "A", "expr": f"sum by (Hostname) (rate({sel}[$__rate_interval]))"}]},
        {"id": 3, "type": "timeseries", "title": "A join on a label nobody has", "datasource": {"type": "prometheus"},
         "targets": [{"refId": "A", "expr": f"rate({sel}[10s]) * on (no_such_label, Hostname) group_left "
                                             "DCGM_FI_DEV_GPU_TEMP{no_such_label=\"x\"}"}]}]}
    path = tmp_path / "young.json"
    path.write_text(json.dumps(doc))
    report, code = run(env, [path], checks=())
    got = {v["title"]: v for v in report.panels}
    young = got["Energy rate over 900ms"]
    assert (young["verdict"], young["severity"]) == ("panel-too-little-history", "inconclusive"), young
    # the probe usually counts at most 1 sample in the window; a late scrape can put two in it, and the
    # window is named as too short then (the panel's own query may have seen either)
    assert (f"{sel} has at most 1 sample in [900ms]" in young["message"]
            or f"{sel} is read over [900ms], under two scrape intervals (1s)" in young["message"]), young
    assert young["message"].endswith("widen the window ($__rate_interval)"), young  # waiting would not help
    assert got["Energy rate over the rate interval"]["verdict"] == "panel-ok"
    # a real no-data stays one: the joined series does not exist at all
    assert got["A join on a label nobody has"]["verdict"] == "panel-no-data"
    assert code == 1  # the real no-data is a finding
    doc["panels"] = doc["panels"][:2]
    path.write_text(json.dumps(doc))
    assert run(env, [path], checks=())[1] == 3  # only the young panel: inconclusive, not "all good"


def test_a_window_shorter_than_some_targets_scrapes_is_too_little_history_not_missing_gpus(engine, tmp_path):
    """One node scraped every second, two every 10 s (a ServiceMonitor with its own interval): a
    rate() over 3 s shows the first node's GPUs and, at most moments, not the others', although
    every series exists. The panel is short of samples, not of GPUs: the verdict names the window
    and how many series it leaves with fewer than two samples, and blames no exporter."""
    sel = 'DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{job="dcgm-exporter"}'
    doc = {"uid": "mixed", "title": "Mixed intervals", "schemaVersion": 39, "panels": [
        {"id": 1, "type": "timeseries", "title": "Energy rate over 3s", "datasource": {"type": "prometheus"},
         "targets": [{"refId": "A", "expr": f"rate({sel}[3s])"}]}]}
    path = tmp_path / "mixed.json"
    path.write_text(json.dumps(doc))
    spec = parse_spec(SPEC_TEXT, "<test>")
    with Simulator(Fleet(3, 2, [])) as sim:
        fast, *slow = sorted(sim.targets.values())
        as_job = [{"target_label": "job", "replacement": "dcgm-exporter"}]
        configs = [{"job_name": name, "scrape_interval": every, "scrape_timeout": "1s",
                    "static_configs": [{"targets": addrs}], "relabel_configs": as_job}
                   for name, every, addrs in (("dcgm-fast", "1s", [fast]), ("dcgm-slow", "10s", slow))]
        with LocalPrometheus({}, more_scrape_configs=configs, binary=engine.prometheus) as prom:
            # the panel's step is the slow interval: the fast node needs history 10 s + 3 s back
            assert prom.wait_for(lambda: len(prom.query(f"count_over_time({sel}[20s]) >= 15")) == 2
                                 and len(prom.query(f"last_over_time({sel}[20s])")) == 6, 60), prom.logs()
            with PromClient(prom.url) as client:
                report, code = validate(spec, client, lookback=20.0, progress=False, checks=(),
                                        dashboards=(str(path),))
    (panel,) = report.panels
    assert (panel["verdict"], panel["severity"]) == ("panel-too-little-history", "inconclusive"), panel["message"]
    assert f"{sel} has at most 1 sample in [3s] on 4 series" in panel["message"]
    assert panel["message"].startswith("shows 2 of 6 GPUs") and panel["causes"] == []
    assert panel["message"].endswith("widen the window ($__rate_interval)"), panel["message"]  # waiting would not help
    assert code == 3


def test_a_panel_on_absent_optional_fields_links_the_note_that_lists_them():
    """optional-absent names every absent profiling field in one finding whose subject is the job:
    a panel reading one of them is explained by it (and not by a note on other fields)."""
    spec = parse_spec(SPEC_TEXT, "<test>")
    note = Finding("optional-absent", "info", "dcgm-exporter",
                   "none of the 6 GPUs reports the DCGM_FI_PROF_* (profiling) field(s) DCGM_FI_PROF_GR_ENGINE_ACTIVE, "
                   "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE; none seen in the last 1h", labels=(("job", "dcgm-exporter"),))
    judge = Judge(SimpleNamespace(spec=spec), [note], {}, {})
    assert judge.causes("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE") == ["optional-absent: dcgm-exporter"]
    assert judge.causes("DCGM_FI_PROF_GR_ENGINE") == [] and judge.causes("DCGM_FI_DEV_GPU_TEMP") == []


@pytest.mark.parametrize("counted, says", [
    (1, "has at most 1 sample in [900ms]"),
    # a late scrape put two samples in the window when the probe ran, after the panel's query saw none
    (2, "is read over [900ms], under two scrape intervals (1s)"),
])
def test_an_empty_rate_panel_under_two_scrapes_is_too_little_history_whatever_the_probe_counted(counted, says):
    from gpumon.promanswer import Answer
    from gpumon.validate.dashboards import exprs
    from gpumon.validate.dashboards.verdicts import short_history
    sel = 'DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{job="dcgm-exporter"}'
    target = SimpleNamespace(ast=exprs.parse(f"rate({sel}[900ms])")[0], answers=[Answer(data=[])])
    panel = SimpleNamespace(unsupported=False, capped=False, targets=[target])
    assert short_history(panel, {("history", sel, "900ms"): counted}, scrape=1.0) == [f"{sel} {says}"]
    # over a window of two scrapes and more, two samples counted means the history is there: not short
    target.ast = exprs.parse(f"rate({sel}[2s])")[0]
    assert short_history(panel, {("history", sel, "2s"): 2}, scrape=1.0) == []


@pytest.mark.parametrize("expr, verdict", [
    # gpumon's sparse set, recorded within the lookback (the probe counts its series) and not now:
    # the fault it showed has cleared, the healthy state of the panel
    ('job_gpu:dcgm_field_missing:group{job="dcgm-exporter"}', "panel-expected-empty"),
    ('count by (Hostname) (job_gpu:dcgm_field_missing:group{job="dcgm-exporter"})', "panel-expected-empty"),
    # a join of raw fields that returns nothing while both exist: a real no-data finding
    ('DCGM_FI_DEV_GPU_TEMP{job="dcgm-exporter"} * on (Hostname) DCGM_FI_DEV_POWER_USAGE{job="dcgm-exporter"}',
     "panel-no-data"),
])
def test_an_empty_panel_of_sparse_sets_seen_in_the_lookback_is_expected_empty(expr, verdict):
    from gpumon.promanswer import Answer
    from gpumon.validate.dashboards import exprs
    spec = parse_spec(SPEC_TEXT, "<test>")
    ast = exprs.parse(expr)[0]
    target = SimpleNamespace(ast=ast, expr=expr, answers=[Answer(data=[])], used=(), mask_lhs=None, ref="A")
    dash = SimpleNamespace(title="GPU health", doc={"uid": "h"}, file="h.json")
    panel = SimpleNamespace(dash=dash, doc={"id": 1, "title": "GPUs missing a required field now", "type": "table"},
                            row="", targets=[target], unsupported=False, capped=False, pointer="/panels/0")
    series = {s.text: 3 for s in exprs.selectors(ast)} | {s.metric: 3 for s in exprs.selectors(ast)}
    ctx = SimpleNamespace(spec=spec, scrape_interval=15.0, lookback=3600.0, gpu=lambda labels: None)
    v = Judge(ctx, [], series, {}).verdict(panel)
    assert v.verdict == verdict, v.message
