"""Fallback sources (issue 13) on a REAL Prometheus (each engine: 2.42 and 3.x): the field guide's
case end to end. dcgm-exporter serves node-a fully and node ``localhost`` without one GPU's
temperature; utkuozdemir/nvidia_gpu_exporter (on ``localhost``, node from ``instance``) serves
that temperature, hot. Node ``localhost`` also still serves DCGM's old clock-reasons name.

Checked: the temperature alert fires for that GPU from the fallback, exactly one fallback warning
per node and field, node power sums equal the primary's (each GPU once), and ``gpumon validate``
reports the fallback as a warning (not series-missing) and the renamed field as alias-split.
"""

from __future__ import annotations

import shutil

import pytest

from gpumon.localprom import LocalPrometheus
from gpumon.loopback import ExpositionServer
from gpumon.promapi import PromClient
from gpumon.rules import build_groups
from gpumon.rules.output import files as rule_files
from gpumon.spec import parse_spec
from gpumon.validate import validate

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not shutil.which("prometheus"), reason="prometheus not installed")]

SPEC = """\
version: 1
exporter: {job: dcgm-exporter, scrape_interval: 1s, scrape_timeout: 1s, collect_interval: 1s}
alerts: {for: 2s}
metrics:
  - name: DCGM_FI_DEV_GPU_TEMP
    kind: gauge
    unit: celsius
    presence: required
    range: [5, 110]
    thresholds: [{alert: GpuTemperatureHigh, severity: warning, op: ">", value: 83, for: 2s}]
    sources: [{preset: nvidia_gpu_exporter, job: nvsmi}]
  - name: DCGM_FI_DEV_POWER_USAGE
    kind: gauge
    unit: watts
    presence: required
    range: [1, 2000]
    sources: [{preset: nvidia_gpu_exporter, job: nvsmi}]
  - name: DCGM_FI_DEV_CLOCKS_EVENT_REASONS
    kind: gauge
    unit: state
    presence: optional
    sources: [dcgm-renames]
"""

UUID = {("node-a", 0): "GPU-a0000000-0000-4000-8000-000000000000",
        ("node-a", 1): "GPU-a0000000-0000-4000-8000-000000000001",
        ("localhost", 0): "GPU-b0000000-0000-4000-8000-000000000000",
        ("localhost", 1): "GPU-b0000000-0000-4000-8000-000000000001"}


def _dcgm_page(node: str, skip_temp_gpu: int | None, clock_name: str) -> str:
    lines = []
    for gpu in (0, 1):
        labels = f'gpu="{gpu}",UUID="{UUID[(node, gpu)]}",modelName="NVIDIA H100 80GB HBM3",Hostname="{node}"'
        if gpu != skip_temp_gpu:
            lines.append(f"DCGM_FI_DEV_GPU_TEMP{{{labels}}} 45")
        lines.append(f"DCGM_FI_DEV_POWER_USAGE{{{labels}}} {300 + gpu}")
        lines.append(f"{clock_name}{{{labels}}} 0")
    return "\n".join(lines) + "\n"


def _smi_page() -> str:
    """nvidia_gpu_exporter's names and labels (uuid without the GPU- prefix, no node label: its
    docs/METRICS.md); power deliberately differs
    from dcgm-exporter's so a sum that counted both would show it."""
    lines = []
    for gpu in (0, 1):
        labels = f'uuid="{UUID[("localhost", gpu)][4:]}",name="NVIDIA H100 80GB HBM3"'
        lines.append(f"nvidia_smi_temperature_gpu{{{labels}}} {91 if gpu == 1 else 50}")
        lines.append(f"nvidia_smi_power_draw_watts{{{labels}}} 999")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def env(tmp_path_factory, engine):
    spec = parse_spec(SPEC, "<sources>")
    tmp = tmp_path_factory.mktemp("sources")
    rules = tmp / "gpumon.rules.yaml"
    rules.write_text(rule_files(spec, build_groups(spec))["rules/gpumon.rules.yaml"])
    a = ExpositionServer(lambda: _dcgm_page("node-a", None, "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"))
    b = ExpositionServer(lambda: _dcgm_page("localhost", 1, "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"), host="localhost")
    smi = ExpositionServer(_smi_page, host="localhost")
    with a, b, smi:
        targets = {"dcgm-exporter": [a.address, b.address], "nvsmi": [smi.address]}
        with LocalPrometheus(targets, rule_files=[rules], binary=engine.prometheus) as prom:
            ok = prom.wait_for(lambda: len(prom.query('ALERTS{alertname="GpuMetricFallbackServing",'
                                                      'alertstate="firing"}')) >= 2
                               and prom.query('ALERTS{alertname="GpuTemperatureHigh",alertstate="firing"}'), 60)
            assert ok, prom.logs()
            yield {"prom": prom, "spec": spec}


def test_threshold_fires_from_the_fallback(env):
    firing = env["prom"].query('ALERTS{alertname="GpuTemperatureHigh",alertstate="firing"}')
    # nvidia_gpu_exporter has no GPU index label: the index comes from the GPU's other dcgm-exporter series
    assert [(a["metric"]["Hostname"], a["metric"]["UUID"], a["metric"].get("gpu")) for a in firing] == \
        [("localhost", UUID[("localhost", 1)], "1")]


def test_one_fallback_warning_per_node_and_field(env):
    firing = env["prom"].query('ALERTS{alertname="GpuMetricFallbackServing",alertstate="firing"}')
    got = sorted((a["metric"]["dcgm_field"], a["metric"]["Hostname"], a["metric"]["source"]) for a in firing)
    assert got == [("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "localhost", "dcgm-renames"),
                   ("DCGM_FI_DEV_GPU_TEMP", "localhost", "nvidia_gpu_exporter")]
    # both missing stays the tiered alerts: nothing is unserved here, so none of them fires
    assert not env["prom"].query('ALERTS{alertname=~"GpuMetricMissing|GpuNodeMetricMissing|GpuMetricAbsent"}')


def test_each_gpu_read_once_and_sums_unchanged(env):
    prom = env["prom"]
    norm = prom.query('job_gpu:dcgm_field_value:normalized{dcgm_field="DCGM_FI_DEV_GPU_TEMP"}')
    got = sorted((s["metric"]["UUID"], s["metric"]["source"], s["value"][1]) for s in norm)
    assert got == [(UUID[("node-a", 0)], "dcgm-exporter", "45"), (UUID[("node-a", 1)], "dcgm-exporter", "45"),
                   (UUID[("localhost", 0)], "dcgm-exporter", "45"), (UUID[("localhost", 1)], "nvidia_gpu_exporter", "91")]
    sums = {s["metric"]["Hostname"]: s["value"][1] for s in prom.query("job_node:DCGM_FI_DEV_POWER_USAGE:sum")}
    assert sums == {"node-a": "601", "localhost": "601"}     # 300 + 301: never the fallback's 999 as well


def test_validate_reports_sources(env):
    with PromClient(env["prom"].url) as client:
        report, code = validate(env["spec"], client, lookback=60.0, progress=False)
    by = {}
    for f in report.findings:
        by.setdefault(f.check, []).append(f)
    assert not [f for f in by.get("series-missing", []) if "GPU_TEMP" in f.subject], by.get("series-missing")
    serving = sorted((f.subject, f.severity, dict(f.labels)["source"]) for f in by["fallback-serving"])
    assert serving == [("DCGM_FI_DEV_CLOCKS_EVENT_REASONS on localhost", "warning", "dcgm-renames"),
                       ("DCGM_FI_DEV_GPU_TEMP on localhost", "warning", "nvidia_gpu_exporter")]
    temp = next(f for f in by["fallback-serving"] if "GPU_TEMP" in f.subject)
    assert "1 GPU(s) of node localhost" in temp.message and "nvidia_smi_temperature_gpu" in temp.message
    split = by["alias-split"]
    assert [f.message for f in split] == ["DCGM_FI_DEV_CLOCKS_EVENT_REASONS: node node-a on "
                                          "DCGM_FI_DEV_CLOCKS_EVENT_REASONS; node localhost on "
                                          "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"]
    # the seed's case (one GPU of a node on the fallback, the rest on the primary) is no alias split
    assert all("GPU_TEMP" not in f.subject for f in split)
    served = {f.subject: f.message for f in by["sources-served"]}
    assert served["DCGM_FI_DEV_GPU_TEMP"] == ("DCGM_FI_DEV_GPU_TEMP is read from dcgm-exporter (DCGM_FI_DEV_GPU_TEMP) "
                                              "on localhost, node-a; nvidia_gpu_exporter (nvidia_smi_temperature_gpu) "
                                              "on localhost")
    assert not [f for f in report.findings if f.severity == "error"], [f for f in report.findings if f.severity == "error"]
    assert code == 0


def test_the_documented_example_still_occurs(env):
    """docs/checks/validate/sources.md shows tests/data/validate-examples.json's finding: it must
    be what a real run reports."""
    import json
    from pathlib import Path
    example = json.loads((Path(__file__).parent / "data" / "validate-examples.json").read_text())["sources"]
    with PromClient(env["prom"].url) as client:
        report, _ = validate(env["spec"], client, lookback=60.0, progress=False, checks=("sources",))
    assert any((f.check, f.severity, f.subject, f.message, f.hint) ==
               (example["check"], example["severity"], example["subject"], example["message"], example["hint"])
               for f in report.findings), [f.message for f in report.findings]


def test_dashboard_panel_shows_the_fallback_source(env):
    """The per-GPU temperature panel reads the normalized series: the GPU the fallback serves is
    on the panel with source nvidia_gpu_exporter in its legend; the primary's GPUs carry no source."""
    from gpumon.dashboards import queries as q
    m = env["spec"].metric("DCGM_FI_DEV_GPU_TEMP")
    result = env["prom"].query(q.per_gpu(env["spec"], m, q.FLEET, only_plausible=True))
    got = sorted((s["metric"]["UUID"], s["metric"].get("source"), s["value"][1]) for s in result)
    assert got == [(UUID[("node-a", 0)], None, "45"), (UUID[("node-a", 1)], None, "45"),
                   (UUID[("localhost", 0)], None, "45"), (UUID[("localhost", 1)], "nvidia_gpu_exporter", "91")]
    assert q.legend(env["spec"], m).endswith(" {{source}}")


def test_coverage_matrix_marks_fallback_cells(env):
    with PromClient(env["prom"].url) as client:
        report, _ = validate(env["spec"], client, lookback=60.0, progress=False)
    rows = {(r["node"], r["gpu"]): r["cells"] for r in report.coverage["rows"]}
    cell = rows[("localhost", "1")]["DCGM_FI_DEV_GPU_TEMP"]
    assert cell == {"state": "fallback", "finding": "fallback-serving: DCGM_FI_DEV_GPU_TEMP on localhost"}
    assert rows[("localhost", "0")]["DCGM_FI_DEV_GPU_TEMP"] == {"state": "present"}
    assert rows[("node-a", "1")]["DCGM_FI_DEV_GPU_TEMP"] == {"state": "present"}
