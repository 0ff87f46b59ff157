"""The fleet-scale benchmark (bench/fleet.py, issue 16): its pure parts in the fast tier (page
generator label set and faults, history file, floor groups, figure arithmetic), and one slow smoke
run at 16 GPUs so the benchmark does not rot."""

from __future__ import annotations

import io
import math
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import fleetlib as fl  # noqa: E402
from gpumon.spec import load_spec  # noqa: E402

LABELS = ["gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname", "DCGM_FI_DRIVER_VERSION"]
LABEL = re.compile(r'(\w+)="([^"]*)"')


def series(page: fl.Page) -> dict[tuple[str, str], str]:
    """{(metric, gpu index): value} of a page."""
    out = {}
    for name, labels, value in fl.page_series(page.body.decode()):
        out[(name, dict(LABEL.findall(labels))["gpu"])] = value
    return out


def test_pages_carry_the_dcgm_exporter_4_label_set_in_order():
    pages = fl.render_pages(3)
    assert list(pages) == ["gpu-node-1", "gpu-node-2", "gpu-node-3"]
    rows = fl.page_series(pages["gpu-node-2"].body.decode())
    assert rows and {n for n, _, _ in rows} >= {"DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_XID_ERRORS"}
    for name, labels, _ in rows:
        keys = [k for k, _ in LABEL.findall(labels)]
        expected = LABELS + (["err_code", "err_msg"] if name == "DCGM_FI_DEV_XID_ERRORS" else [])
        assert keys == expected, name
        assert dict(LABEL.findall(labels))["Hostname"] == "gpu-node-2"
    assert {dict(LABEL.findall(lb))["gpu"] for _, lb, _ in rows} == {str(g) for g in range(8)}
    uuids = {dict(LABEL.findall(lb))["UUID"] for p in pages.values() for _, lb, _ in fl.page_series(p.body.decode())}
    assert len(uuids) == 3 * 8


def test_faults_missing_field_node_down_gpu_gone_and_blank_value():
    healthy, faulted = fl.render_pages(6), fl.render_pages(6, fl.fault_set(6))
    one = series(faulted["gpu-node-1"])
    assert [("DCGM_FI_DEV_GPU_UTIL", str(g)) in one for g in range(8)] == [False] * 4 + [True] * 4
    assert not any(n == "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE" for n, _ in series(faulted["gpu-node-2"]))
    three = series(faulted["gpu-node-3"])
    assert not any(g == "7" for _, g in three) and any(g == "6" for _, g in three)
    assert series(faulted["gpu-node-4"])[("DCGM_FI_DEV_POWER_USAGE", "1")] == "140737488355330.000000"
    assert series(healthy["gpu-node-4"])[("DCGM_FI_DEV_POWER_USAGE", "1")] != "140737488355330.000000"
    assert faulted["gpu-node-5"].status == 500 and healthy["gpu-node-5"].status == 200
    assert faulted["gpu-node-6"] == healthy["gpu-node-6"]


def test_fault_copies_use_distinct_nodes_and_stop_at_the_fleet_edge():
    assert len(fl.fault_set(125, 3)) == 3 * 8
    assert {f.node for f in fl.fault_set(125, 2)} == {f"gpu-node-{i}" for i in range(1, 11)}
    small = fl.fault_set(2, 4)
    assert {f.node for f in small} == {"gpu-node-1", "gpu-node-2"}
    assert not any(f.kind == "http500" for f in small)


def test_scrape_config_one_target_per_node_on_one_port():
    cfg = fl.scrape_config("dcgm-exporter", "127.0.0.1:5000", ["gpu-node-1", "gpu-node-2"], 15, 10)
    assert cfg["scrape_interval"] == "15s" and cfg["scrape_timeout"] == "10s"
    assert [sc["labels"] for sc in cfg["static_configs"]] == [
        {"__metrics_path__": "/metrics/gpu-node-1", "instance": "gpu-node-1:9400"},
        {"__metrics_path__": "/metrics/gpu-node-2", "instance": "gpu-node-2:9400"}]
    assert {t for sc in cfg["static_configs"] for t in sc["targets"]} == {"127.0.0.1:5000"}


def test_history_is_openmetrics_families_contiguous_times_ascending():
    pages = fl.render_pages(2, fl.fault_set(2))
    pages["gpu-node-2"] = fl.Page("gpu-node-2", 500, b"")  # a down target gets no history
    out = io.StringIO()
    n = fl.write_history(out, pages, "dcgm-exporter", 1000.0, 1030.0, 15)
    lines = out.getvalue().splitlines()
    assert lines[-1] == "# EOF"
    samples = [ln for ln in lines if not ln.startswith("#")]
    assert n == len(samples) == 3 * (len(fl.page_series(pages["gpu-node-1"].body.decode())) + 1)
    order, last = [], {}
    for ln in samples:
        name_labels, value, stamp = ln.rsplit(" ", 2)
        name = name_labels.split("{")[0]
        if not order or order[-1] != name:
            assert name not in order, f"family {name} split"
            order.append(name)
        assert 'job="dcgm-exporter"' in name_labels and 'instance="gpu-node-1:9400"' in name_labels
        assert float(stamp) > last.get(name_labels, 0)
        last[name_labels] = float(stamp)
    assert {float(s.rsplit(" ", 1)[1]) for s in samples} == {1000.0, 1015.0, 1030.0}
    assert 'up{job="dcgm-exporter",instance="gpu-node-1:9400"} 1 1000.000' in samples


def test_floor_groups_one_group_by_identity_per_metric(default_spec):
    required, spec_d = fl.floor_groups(default_spec, 15)
    assert (required["name"], spec_d["name"]) == ("floor.required", "floor.spec")
    assert required["interval"] == spec_d["interval"] == "15s"
    assert [r["record"] for r in required["rules"]] == [fl.floor_record(m.name) for m in default_spec.required_metrics]
    assert len(spec_d["rules"]) == len(default_spec.metrics) > len(required["rules"])
    assert required["rules"][0]["expr"] == \
        'group by (job, Hostname, UUID, gpu, GPU_I_ID) (DCGM_FI_DEV_GPU_TEMP{job="dcgm-exporter"})'
    assert fl.recorded_names([required, spec_d]) == [r["record"] for r in spec_d["rules"]]


def metrics_text(group: str, stamp: float, duration: float, iterations: int, missed: int, interval: float = 30) -> str:
    lab = f'rule_group="/tmp/rules-0-gpumon.rules.yaml;{group}"'
    return "\n".join([
        "# HELP prometheus_rule_group_last_duration_seconds The duration of the last rule group evaluation.",
        f"prometheus_rule_group_last_duration_seconds{{{lab}}} {duration}",
        f"prometheus_rule_group_interval_seconds{{{lab}}} {interval}",
        f"prometheus_rule_group_last_evaluation_timestamp_seconds{{{lab}}} {stamp}",
        f"prometheus_rule_group_iterations_total{{{lab}}} {iterations}",
        f"prometheus_rule_group_iterations_missed_total{{{lab}}} {missed}",
        f"prometheus_rule_group_rules{{{lab}}} 7",
        'prometheus_rule_evaluations_total{rule_group="x;y"} 3'])


def test_eval_figures_count_each_evaluation_once_and_skip_the_one_before_the_window():
    s = fl.GroupSamples()
    for stamp, dur, it, missed in [(100, 9.0, 10, 1), (100, 9.0, 10, 1), (130, 2.0, 11, 1), (130, 2.0, 11, 1),
                                   (160, 4.0, 12, 3)]:
        s.add(fl.parse_rule_metrics(metrics_text("gpumon.values", stamp, dur, it, missed))["gpumon.values"])
    fig = fl.eval_figures({"gpumon.values": s, "idle": fl.GroupSamples()})
    assert list(fig) == ["gpumon.values"]
    f = fig["gpumon.values"]
    assert (f.evaluations, f.rules, f.interval, f.missed) == (2, 7, 30, 2)
    assert f.mean == 3.0 and f.median == 3.0 and f.per_minute == pytest.approx(6.0)


def test_totals_and_ratios():
    mk = lambda n, pm: fl.GroupFigure(n, 1, 30, 1, 0, 0, pm, 0)  # noqa: E731
    figs = {"gpumon.values": mk("gpumon.values", 6.0), "gpumon.gaps": mk("gpumon.gaps", 1.5),
            "floor.spec": mk("floor.spec", 0.5), "floor.required": mk("floor.required", 0.25)}
    assert fl.total_per_minute(figs, False) == 7.5
    assert fl.total_per_minute(figs, True, "floor.spec") == 0.5
    assert fl.ratio(7.5, 0.25) == 30
    assert fl.ratio(1, 0) == math.inf and math.isnan(fl.ratio(0, 0))


def test_naive_queries_one_per_metric_and_gpu_escaped(default_spec):
    qs = fl.naive_queries(default_spec, ["GPU-a", 'GPU-"b'])
    assert len(qs) == 2 * len(default_spec.metrics)
    assert qs[0] == 'count(DCGM_FI_DEV_GPU_TEMP{job="dcgm-exporter",UUID="GPU-a"})'
    assert 'UUID="GPU-\\"b"' in qs[-1]


@pytest.mark.slow
def test_smoke_16_gpus(tmp_path):
    """The whole benchmark at 16 GPUs with a 30 s window: every group measured, both floors,
    series counted, validate and the naive validator run through the proxy."""
    import json
    import subprocess
    out = tmp_path / "fleet.json"
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "fleet.py"), "--gpus", "16", "--window", "30",
                           "--warmup", "5", "--history", "300", "--naive-sample", "200", "--json", str(out)],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "ratio" in proc.stdout and "naive" in proc.stdout
    (res,) = json.loads(out.read_text())
    assert res["gpus"] == 16 and res["history_samples"] > 0
    figs = res["healthy"]["figures"]
    assert {"floor.required", "floor.spec", "gpumon.values", "gpumon.inventory"} <= set(figs)
    healthy, faulted = res["healthy"]["series"], res["faults_phase"]["series"]
    assert healthy["raw"] > faulted["raw"] > 0 and healthy["gpumon"] > 0
    assert 0 < healthy["floor"] <= healthy["raw"]
    v = res["validate"]
    assert v["exit"] == 1 and v["requests"] > 0 and v["bytes"] > 0 and v["rss"] > 0 and v["findings"]
    assert res["naive"]["sampled"] == 200 and res["naive"]["queries"] > 200


def test_energy_counter_rises_with_the_clock_everything_else_is_fixed():
    page = fl.render_pages(1)["gpu-node-1"]
    t0 = fl.RENDER_CLOCK + 3600
    a, b = (dict(((n, lb), v) for n, lb, v in fl.page_series(page.render(t).decode())) for t in (t0, t0 + 15))
    assert a.keys() == b.keys() and len(a) == len(fl.page_series(page.body.decode()))
    moved = {k for k in a if a[k] != b[k]}
    assert {n for n, _ in moved} == {fl.ENERGY} and len(moved) == 8
    assert all(int(b[k]) - int(a[k]) == 15 * fl.ENERGY_RATE for k in moved)
    out = io.StringIO()
    fl.write_history(out, {"gpu-node-1": page}, "j", t0 - 30, t0, 15)
    hist = [ln.rsplit(" ", 2) for ln in out.getvalue().splitlines() if ln.startswith(fl.ENERGY + "{")]
    key = next(k for k in moved)
    mine = [int(v) for lb, v, _ in hist if lb.startswith(key[0] + key[1][:-1])]
    assert mine == sorted(mine) and len(set(mine)) == 3 and mine[-1] == int(a[key])


def test_history_slices_keep_the_grid_and_the_size():
    """The streamed backfill: every sample time in exactly one slice, no slice over the size asked."""
    start, step = 1_700_000_000.0, 15.0
    slices = fl.history_chunks(start, start + 3600, step, step_bytes=100, max_bytes=1000)
    times = [t for first, last in slices for t in fl_times(first, last, step)]
    assert times == fl_times(start, start + 3600, step)
    assert all(len(fl_times(a, b, step)) * 100 <= 1000 for a, b in slices)
    assert fl.history_chunks(start, start + 60, step, step_bytes=10**9, max_bytes=1) == \
        [(start + i * step, start + i * step) for i in range(5)]


def fl_times(first: float, last: float, step: float) -> list[float]:
    return [first + i * step for i in range(int((last - first) / step + 1e-9) + 1)]


def test_naive_required_asks_each_required_metric_per_gpu():
    spec = load_spec(ROOT / "gpumon.yaml")
    queries = fl.naive_required_queries(spec, ["GPU-a", "GPU-b"])
    assert len(queries) == 2 * len(spec.required_metrics)
    assert queries[0] == f'count({spec.required_metrics[0].name}{{job="{spec.exporter.job}",UUID="GPU-a"}})'


def test_costliest_sums_rules_of_one_name_and_ranks_by_seconds_per_minute():
    def groups(values_s: float, slow_s: float) -> list[dict]:
        return [{"name": "gpumon.values", "interval": 30, "rules": [
                    {"name": "GpuTemperatureHigh", "evaluationTime": values_s},
                    {"name": "GpuTemperatureHigh", "evaluationTime": values_s}]},
                {"name": "gpumon.plausibility", "interval": 60, "rules": [
                    {"name": "job_gpu:dcgm_field_implausible:unless", "evaluationTime": slow_s}]},
                {"name": "floor.spec", "interval": 15, "rules": [{"name": "floor:x", "evaluationTime": 9.0}]}]
    snaps = [fl.rule_families(groups(0.1, 0.9)), fl.rule_families(groups(0.3, 0.5)), fl.rule_families(groups(0.2, 0.7))]
    assert snaps[0][("gpumon.values", "GpuTemperatureHigh")] == (0.2, 30.0)
    rows = fl.costliest(snaps)
    # values: median of the sums 0.2/0.6/0.4 = 0.4 s every 30 s = 0.8 s/min; plausibility 0.7 s every 60 s
    assert [(g, n) for g, n, _, _ in rows] == [("gpumon.values", "GpuTemperatureHigh"),
                                               ("gpumon.plausibility", "job_gpu:dcgm_field_implausible:unless")]
    assert rows[0][2:] == pytest.approx((0.4, 0.8)) and rows[1][2:] == pytest.approx((0.7, 0.7))
    assert [n for _, n, _, _ in fl.costliest(snaps, floor=True)] == ["floor:x"]
    assert len(fl.costliest(snaps, top=1)) == 1


def test_a_group_without_an_evaluation_in_the_window_is_named():
    """A 3m group sampled for 30 s finishes no evaluation: the report must say the total lacks it."""
    figs = {"gpumon.values": fl.GroupFigure("gpumon.values", 13, 30.0, 2, 1.0, 1.0, 2.0, 0)}
    assert fl.unmeasured(figs, ["gpumon.values", "gpumon.gaps"]) == ["gpumon.gaps"]
    assert fl.unmeasured(figs, ["gpumon.values"]) == []


def test_a_second_rule_file_runs_beside_the_first_without_touching_it():
    """--also-rules: the renamed copy records, alerts and reads only its own names, so in one server
    neither copy reads (or overwrites) the other's series."""
    import yaml
    groups = yaml.safe_load((ROOT / "output" / "rules" / "gpumon.rules.yaml").read_text())["groups"]
    copy = fl.prefixed(groups)
    own = {r["record"] for g in groups for r in g["rules"] if "record" in r}
    alerts = {r["alert"] for g in groups for r in g["rules"] if "alert" in r}
    assert [g["name"] for g in copy] == [fl.ALSO_PREFIX + g["name"] for g in groups]
    assert all(r.get("record", "also:").startswith("also:") and r.get("alert", "Also").startswith("Also")
               for g in copy for r in g["rules"])
    for g in copy:
        for r in g["rules"]:
            expr = r["expr"]
            read = set(re.findall(r"(?<![A-Za-z0-9_:])([a-z_]+:[A-Za-z0-9_:]+)", expr))
            assert not read & own, f"{r.get('record') or r.get('alert')} reads the original's {read & own}"
            for names in re.findall(r'alertname=~?"([^"]*)"', expr):
                assert not set(names.split("|")) & alerts
            for group in re.findall(r'rule_group=~?"([^"]*)"', expr):
                assert group.startswith(fl.ALSO_PREFIX)
    # the original is left as it was
    assert {r["record"] for g in groups for r in g["rules"] if "record" in r} == own


def test_the_renamed_copy_reads_its_own_split_groups_heartbeats():
    """A split group's readers match its parts' heartbeats by a regex of escaped names."""
    groups = [{"name": "gpumon.coverage", "rules": [
        {"record": "job:x:count", "expr": 'max(timestamp(rule_group:gpumon_evaluation:timestamp'
                                          '{rule_group=~"gpumon\\\\.coverage|gpumon\\\\.coverage-2|other"}))'}]},
        {"name": "gpumon.coverage-2", "rules": []}]
    expr = fl.prefixed(groups)[0]["rules"][0]["expr"]
    assert 'rule_group=~"also\\\\.gpumon\\\\.coverage|also\\\\.gpumon\\\\.coverage-2|other"' in expr
