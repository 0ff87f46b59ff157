"""Rendered promtool rule tests and runbooks (issue 5): run the real promtool on what gpumon
renders for the bundled spec and for a modified spec, and check coverage by parsing the files."""

from __future__ import annotations

import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml

from gpumon import render, writer
from gpumon.ruletests import series
from gpumon.ruletests.gotemplate import TemplateError, expand, go_float, humanize_duration, humanize_percentage
from gpumon.spec import default_spec_path, load_spec

MODIFIED_SPEC_EDITS = {
    # another job name and label names, a cluster label, extra alert labels, another runbook base,
    # a slower scrape and shorter windows: the rendered tests must follow all of it
    "job: dcgm-exporter ": "job: nvidia-dcgm-exporter ",
    "node: Hostname ": "node: hostname ",
    "cluster: null ": "cluster: cluster ",
    "labels: {}": "labels: {team: gpu-infra}",
    "runbook_url: ../runbooks ": "runbook_url: https://git.example.com/ops/gpu/-/blob/main/output/runbooks ",
    "scrape_interval: 15s ": "scrape_interval: 30s ",
    "gap_window: 30m ": "gap_window: 20m ",
    "inventory_lookback: 1h ": "inventory_lookback: 45m ",
    "implausible_for: 0s": "implausible_for: 2m",
}


def _render_to(spec_path: Path, out: Path) -> Path:
    writer.write(render.render(load_spec(spec_path)), out)
    return out


@pytest.fixture(scope="module")
def default_out(tmp_path_factory) -> Path:
    return _render_to(default_spec_path(), tmp_path_factory.mktemp("default"))


@pytest.fixture(scope="module")
def modified_out(tmp_path_factory) -> Path:
    text = default_spec_path().read_text("utf-8")
    for old, new in MODIFIED_SPEC_EDITS.items():
        assert old in text, f"bundled spec changed: {old!r} not found; update MODIFIED_SPEC_EDITS"
        text = text.replace(old, new, 1)
    folder = tmp_path_factory.mktemp("modified")
    spec = folder / "modified.yaml"
    spec.write_text(text, "utf-8")
    return _render_to(spec, folder / "output")


MINIMAL_SPEC = """\
version: 1
name: mini
exporter:
  job: gpu
  scrape_interval: 2m
  scrape_timeout: 1m
metrics:
  - name: DCGM_FI_DEV_GPU_TEMP
    kind: gauge
    unit: celsius
    presence: required
    thresholds:
      - {op: "<", value: 10, severity: warning, for: 4m}
  - name: DCGM_FI_DEV_XID_ERRORS
    kind: gauge
    unit: code
    presence: sparse
"""


@pytest.fixture(scope="module")
def minimal_out(tmp_path_factory) -> Path:
    """One required field (no node/GPU tiers), a 2m scrape (2m steps), a low threshold, no range."""
    folder = tmp_path_factory.mktemp("minimal")
    spec = folder / "mini.yaml"
    spec.write_text(MINIMAL_SPEC, "utf-8")
    return _render_to(spec, folder / "output")


def _test_files(out: Path) -> list[Path]:
    files = sorted((out / "tests").glob("*.test.yaml"))
    assert files, f"no rule tests rendered under {out}/tests"
    return files


def _promtool(promtool: str, path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([promtool, "test", "rules", path.name], cwd=path.parent,
                          capture_output=True, text=True, timeout=600)


def _assert_promtool_passes(promtool: str, out: Path) -> None:
    files = _test_files(out)
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda f: _promtool(promtool, f), files))
    failed = [(f, r) for f, r in zip(files, results) if r.returncode != 0]
    report = "\n".join(f"--- {f.name} (exit {r.returncode})\nstderr:\n{r.stderr[-6000:]}\nstdout:\n{r.stdout[-6000:]}"
                       for f, r in failed)
    assert not failed, f"promtool test rules failed:\n{report}"


def _rule_file(out: Path) -> Path:
    files = sorted((out / "rules").glob("*.rules.yaml"))
    assert len(files) == 1
    return files[0]


def _alert_rules(out: Path) -> list[dict]:
    doc = yaml.safe_load(_rule_file(out).read_text("utf-8"))
    return [r for g in doc["groups"] for r in g["rules"] if "alert" in r]


def _alert_tests(out: Path) -> list[dict]:
    tests = []
    for path in _test_files(out):
        doc = yaml.safe_load(path.read_text("utf-8"))
        for group in doc["tests"]:
            tests += group.get("alert_rule_test", [])
    return tests


# --------------------------------------------------------------------------- promtool


def test_promtool_passes_on_rendered_tests(default_out, promtool):
    _assert_promtool_passes(promtool, default_out)


def test_promtool_passes_for_a_modified_spec(modified_out, promtool):
    _assert_promtool_passes(promtool, modified_out)
    firing = [a["exp_labels"] for t in _alert_tests(modified_out) for a in t["exp_alerts"]]
    assert all(lab["team"] == "gpu-infra" for lab in firing)
    assert all(lab.get("job") == "nvidia-dcgm-exporter" for lab in firing)
    per_gpu = [lab for lab in firing if "UUID" in lab]
    assert per_gpu and all("hostname" in lab and "Hostname" not in lab and lab["cluster"] for lab in per_gpu)
    # the fleet tier runs per cluster: its firing cases carry the cluster label
    absent = [a["exp_labels"] for t in _alert_tests(modified_out) if t["alertname"] == "GpuMetricAbsent"
              for a in t["exp_alerts"]]
    assert absent and {lab["cluster"] for lab in absent} == {"gpu-cluster-a"}
    intervals = {g["interval"] for p in _test_files(modified_out)
                 for g in yaml.safe_load(p.read_text("utf-8"))["tests"]}
    assert intervals == {"1m"}


def test_promtool_passes_for_a_minimal_spec(minimal_out, promtool):
    _assert_promtool_passes(promtool, minimal_out)
    names = {r["alert"] for r in _alert_rules(minimal_out)}
    assert "GpuMetricMissing" not in names and "GpuMetricAbsent" in names
    intervals = {g["interval"] for g in _groups(minimal_out)}
    assert intervals == {"2m"}


def test_a_wrong_rule_fails_its_generated_test(default_out, tmp_path, promtool):
    """The generated tests can fail: loosen the flapping rule so it also fires on a clean
    outage, and the flapping scenario's quiet case must fail in promtool."""
    shutil.copytree(default_out, tmp_path / "out")
    rules = _rule_file(tmp_path / "out")
    text = rules.read_text("utf-8")
    broken = text.replace("changes(up{job=\"dcgm-exporter\"}[10m]) > 2", "changes(up{job=\"dcgm-exporter\"}[10m]) > 0")
    assert broken != text
    rules.write_text(broken, "utf-8")
    result = _promtool(promtool, tmp_path / "out" / "tests" / "gpumon.exporter.test.yaml")
    assert result.returncode != 0
    assert "GpuExporterFlapping" in result.stdout + result.stderr


# --------------------------------------------------------------------------- coverage


@pytest.mark.parametrize("which", ["default_out", "modified_out", "minimal_out"])
def test_every_alerting_rule_has_a_firing_case(which, request):
    out = request.getfixturevalue(which)
    firing = [(t["alertname"], a["exp_labels"]) for t in _alert_tests(out) for a in t["exp_alerts"]]
    missing = []
    for rule in _alert_rules(out):
        want = {k: str(v) for k, v in rule.get("labels", {}).items()}
        if not any(name == rule["alert"] and want.items() <= {k: str(v) for k, v in labels.items()}.items()
                   for name, labels in firing):
            missing.append(f"{rule['alert']} {want}")
    assert not missing, "alerting rules without a firing case:\n" + "\n".join(missing)


def test_every_alert_name_has_a_quiet_case(default_out):
    quiet = {t["alertname"] for t in _alert_tests(default_out) if not t["exp_alerts"]}
    names = {r["alert"] for r in _alert_rules(default_out)}
    assert names - quiet == set()


def test_tests_load_the_rendered_plain_rule_file(default_out):
    rule_file = _rule_file(default_out).resolve()
    for path in _test_files(default_out):
        doc = yaml.safe_load(path.read_text("utf-8"))
        assert [(path.parent / f).resolve() for f in doc["rule_files"]] == [rule_file]
        assert not Path(doc["rule_files"][0]).is_absolute()


def test_eval_times_sit_between_samples(default_out):
    """prometheus/prometheus#7887, no evaluation on a sample, so 2.x closed and 3.x left-open windows agree."""
    from gpumon.durations import parse_duration
    for path in _test_files(default_out):
        doc = yaml.safe_load(path.read_text("utf-8"))
        assert parse_duration(doc["evaluation_interval"]) * 2 in {parse_duration(g["interval"]) for g in doc["tests"]}
        for group in doc["tests"]:
            step = parse_duration(group["interval"])
            for t in group.get("alert_rule_test", []) + group.get("promql_expr_test", []):
                assert parse_duration(t["eval_time"]) % step == step / 2, (group["name"], t["eval_time"])


def _groups(out: Path) -> list[dict]:
    return [g for p in _test_files(out) for g in yaml.safe_load(p.read_text("utf-8"))["tests"]]


def test_issue_scenarios_are_present(default_out):
    groups = _groups(default_out)
    values = " ".join(s["values"] for g in groups for s in g["input_series"])
    assert "9223372036854775794" in values and "NaN" in values and "stale" in values
    # flapping: GpuExporterFlapping fires while GpuExporterDown stays quiet at the same time
    flap = next(g for g in groups if any(t["alertname"] == "GpuExporterFlapping" and t["exp_alerts"]
                                        for t in g.get("alert_rule_test", [])))
    assert any(t["alertname"] == "GpuExporterDown" and not t["exp_alerts"] for t in flap["alert_rule_test"])
    # MIG: four instances of one GPU at 100 W read 100 W on the node
    mig = next(g for g in groups if any(t["expr"] == "job_node:DCGM_FI_DEV_POWER_USAGE:sum"
                                       for t in g.get("promql_expr_test", [])))
    assert sum('GPU_I_ID="' in s["series"] and "DCGM_FI_DEV_POWER_USAGE" in s["series"]
               for s in mig["input_series"]) == 4
    assert {s["value"] for t in mig["promql_expr_test"] for s in t["exp_samples"]} == {100}
    # target down: the exporter alert fires, the per-GPU alert is asserted quiet
    down = next(g for g in groups if g["name"].startswith("target down"))
    fired = {t["alertname"] for t in down["alert_rule_test"] if t["exp_alerts"]}
    quiet = {t["alertname"] for t in down["alert_rule_test"] if not t["exp_alerts"]}
    assert fired == {"GpuExporterDown"} and {"GpuMetricMissing", "GpuLost"} <= quiet


# --------------------------------------------------------------------------- runbooks


PLACEHOLDER = re.compile(r"\{\{|\}\}|\{%|%\}|\{#|#\}|\[\[|\]\]|\bNone\b|Undefined")


@pytest.mark.parametrize("which", ["default_out", "modified_out"])
def test_every_runbook_url_resolves_to_a_rendered_runbook(which, request):
    out = request.getfixturevalue(which)
    for rule in _alert_rules(out):
        url = rule["annotations"]["runbook_url"]
        parsed = urlparse(url)
        if parsed.scheme:
            # an absolute base: the published path ends in runbooks/<AlertName>.md
            target = out / "runbooks" / Path(parsed.path).name
            assert parsed.path.endswith(f"/runbooks/{rule['alert']}.md")
        else:
            target = (_rule_file(out).parent / url).resolve()
        assert target.is_file(), f"{rule['alert']}: runbook_url {url} -> {target} missing"


def test_runbooks_are_complete_and_fully_rendered(default_out):
    books = {p.stem: p.read_text("utf-8") for p in (default_out / "runbooks").glob("*.md")}
    assert set(books) == {r["alert"] for r in _alert_rules(default_out)}
    for name, text in books.items():
        assert not PLACEHOLDER.search(text), f"{name}: unrendered placeholder {PLACEHOLDER.search(text).group()!r}"
        for needle in ("## What it means", "```promql", 'curl -s "http://$INSTANCE/metrics"',
                       "## Diagnose", "## Fix", "gpumon validate"):
            assert needle in text, f"{name}: missing {needle!r}"
    everything = "\n".join(books.values())
    for step in ("Failed to initialize NVML", "not supported", "ls -l /dev/nvidia", "libnvidia-ml.so.1",
                 "nvidia-smi -q", "nvidia-smi -pm 1", "default-counters.csv", "runtimeClassName",
                 "nvidia-device-plugin", "kubectl -n \"$NS\" top pod", "serviceMonitorSelector", "ruleSelector"):
        assert step in everything, f"no runbook covers {step!r}"
    assert "serviceMonitorSelector" in books["GpuExporterTargetMissing"]
    assert "default-counters.csv" in books["GpuMetricAbsent"]
    assert "libnvidia-ml.so.1" in books["GpuExporterDown"] and "nvidia-smi -pm 1" in books["GpuMetricIntermittent"]


def test_runbooks_follow_the_spec(modified_out):
    text = (modified_out / "runbooks" / "GpuNodeMetricMissing.md").read_text("utf-8")
    assert 'hostname="$NODE"' in text and "Hostname" not in text


def test_render_is_deterministic(default_out, tmp_path):
    again = _render_to(default_spec_path(), tmp_path)
    for sub in ("tests", "runbooks"):
        for path in (default_out / sub).iterdir():
            assert (again / sub / path.name).read_bytes() == path.read_bytes()


# --------------------------------------------------------------------------- helpers


def test_series_notation_compresses_runs():
    c08 = [i * 18000000 for i in range(6)] + [1000 + i * 18000000 for i in range(6)]
    assert series.compress(c08) == "0+18000000x5 1000+18000000x5"
    assert series.compress([1, 0, 1, "stale", "_", "_", 9223372036854775794, float("nan")]) == \
        "1 0 1 stale _x2 9223372036854775794 NaN"


def test_go_formatting_matches_prometheus_templates():
    # Go fmt.Sprint(float64) and Prometheus' humanize* functions (template/template.go)
    assert [go_float(v) for v in (1e6, 123456.0, 0.5, 9223372036854775794.0, 3689342859416.54, float("nan"))] == \
        ["1e+06", "123456", "0.5", "9.223372036854776e+18", "3.68934285941654e+12", "NaN"]
    assert humanize_percentage(0.5) == "50%" and humanize_percentage(5 / 11) == "45.45%"
    assert humanize_duration(9) == "9s" and humanize_duration(90) == "1m 30s" and humanize_duration(0.25) == "250ms"
    assert expand("{{ $labels.a }} {{$labels.missing}}={{ $value }}", {"a": "x"}, 2) == "x =2"
    with pytest.raises(TemplateError):
        expand("{{ humanize $value }}", {}, 1)


@pytest.mark.parametrize("which", ["default_out", "modified_out"])
def test_annotations_only_use_labels_the_alert_has(which, request):
    """An annotation ``{{ $labels.X }}`` whose alert has no label X renders empty in every
    notification; check it against the labels of every generated firing case."""
    out = request.getfixturevalue(which)
    firing: dict[str, list[dict]] = {}
    for t in _alert_tests(out):
        for a in t["exp_alerts"]:
            firing.setdefault(t["alertname"], []).append(a["exp_labels"])
    problems = set()
    for rule in _alert_rules(out):
        used = set(re.findall(r"\$labels\.([A-Za-z_][A-Za-z0-9_]*)", " ".join(rule["annotations"].values())))
        for labels in firing.get(rule["alert"], []):
            if {k: str(v) for k, v in rule.get("labels", {}).items()}.items() <= {k: str(v) for k, v in labels.items()}.items():
                problems.update(f"{rule['alert']}: $labels.{x}" for x in used - set(labels))
    assert not problems, sorted(problems)


def test_kubernetes_spec_healthy_fleet_stays_quiet(tmp_path, promtool):
    """With a ``kubernetes`` section the rule file has a kubernetes group; the rendered tests
    still load it and the healthy-fleet scenarios pass (the kubernetes alerts have their own file)."""
    example = default_spec_path().parent / "examples" / "kubernetes.yaml"
    out = _render_to(example, tmp_path)
    assert any(r["alert"] == "GpuNodeExporterMissing" for r in _alert_rules(out))
    result = _promtool(promtool, out / "tests" / f"{load_spec(example).name}.healthy.test.yaml")
    assert result.returncode == 0, result.stderr + result.stdout
    for rule in _alert_rules(out):
        text = (out / "runbooks" / f"{rule['alert']}.md").read_text("utf-8")
        assert not PLACEHOLDER.search(text) and "without a dedicated runbook" not in text, rule["alert"]


STATIC_SECTION = """
kubernetes:
  static:
    nodes: [{name: dgx-a1, gpus: 8}]
    patterns: [{match: "l4-.*", gpus: 4}]
    default: 8
"""


@pytest.mark.parametrize("variant", ["capacity", "cluster", "static"])
def test_kubernetes_alerts_have_generated_tests_that_pass(tmp_path, variant, promtool):
    """Every kubernetes alert gets a generated firing case (and the healthy cluster a quiet one for
    each); promtool runs them on the rendered rules. ``cluster``: the example with a cluster label,
    where the DaemonSet and kube-state-metrics alerts are per cluster."""
    example = default_spec_path().parent / "examples" / "kubernetes.yaml"
    if variant == "static":
        example = tmp_path / "static.yaml"
        example.write_text(default_spec_path().read_text("utf-8") + STATIC_SECTION, "utf-8")
    elif variant == "cluster":
        text = example.read_text("utf-8")
        example = tmp_path / "cluster.yaml"
        example.write_text(text.replace("    cluster: null ", "    cluster: cluster "), "utf-8")
        assert example.read_text("utf-8") != text
    out = _render_to(example, tmp_path)
    path = out / "tests" / f"{load_spec(example).name}.kubernetes.test.yaml"
    result = _promtool(promtool, path)
    assert result.returncode == 0, result.stderr + result.stdout
    fired = {t["alertname"] for t in yaml.safe_load(path.read_text("utf-8"))["tests"]
             for t in t.get("alert_rule_test", []) if t["exp_alerts"]}
    from gpumon.rules import kubernetes as krules
    kube_alerts = {r.alert for r in krules.rules(load_spec(example)) if r.alert}
    if variant != "static":
        assert fired == kube_alerts
    else:
        assert fired == {"GpuNodeExporterMissing"}


def test_a_wrong_kubernetes_rule_fails_its_generated_test(tmp_path, promtool):
    example = default_spec_path().parent / "examples" / "kubernetes.yaml"
    out = _render_to(example, tmp_path)
    rules = _rule_file(out)
    text = rules.read_text("utf-8")
    broken = text.replace("kube_node_status_allocatable", "kube_node_status_capacity", 1)
    assert broken != text
    rules.write_text(broken, "utf-8")
    result = _promtool(promtool, out / "tests" / f"{load_spec(example).name}.kubernetes.test.yaml")
    assert result.returncode != 0 and "GpuDevicePluginUnhealthy" in result.stdout + result.stderr


def test_reading_kube_state_metrics_at_the_instant_fails_the_failed_scrape_test(tmp_path, promtool):
    """The expected GPUs read without holding the last capacity: one failed kube-state-metrics
    scrape ends GpuNodeGpusMissing (to page again ``for`` later), and its generated test says so."""
    example = default_spec_path().parent / "examples" / "kubernetes.yaml"
    out = _render_to(example, tmp_path)
    rules = _rule_file(out)
    text = rules.read_text("utf-8")
    broken = re.sub(r"last_over_time\((kube_node_status_capacity\{[^}]*\})\[[^\]]+\]\)", r"\1", text, count=1)
    assert broken != text
    rules.write_text(broken, "utf-8")
    result = _promtool(promtool, out / "tests" / f"{load_spec(example).name}.kubernetes.test.yaml")
    output = result.stdout + result.stderr
    assert result.returncode != 0 and "one kube-state-metrics scrape fails" in output, output[-2000:]
