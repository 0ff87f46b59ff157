"""Hostile spec input, second round: every spec value that reaches PromQL is bounded by the schema
and written through one escaping path (legacy names, source label mappings), and inputs that used
to end in an internal error (exit 4) are clean exit-2 messages with a position."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys

import promql_parser
import pytest
import yaml
from click.testing import CliRunner

from gpumon import promqltext, writer
from gpumon.cli import cli
from gpumon.render import render
from gpumon.rules import exporter
from gpumon.spec import SpecError, parse_spec

from .conftest import ROOT
from .test_spec_hostile import BASE, KUBE

#: two more required fields, so a source's GPU index can come from the GPU's other series
FIELDS = """\
  - name: DCGM_FI_DEV_POWER_USAGE
    kind: gauge
    unit: watts
    presence: required
    range: [0, 1500]
  - name: DCGM_FI_DEV_SM_CLOCK
    kind: gauge
    unit: MHz
    presence: required
    range: [0, 5000]
"""
INJECTION = "up or on() vector(1) + up"


def _with(key_line: str) -> str:
    """BASE with ``key_line`` added to its one metric (after ``title:``), plus :data:`FIELDS`."""
    return BASE.replace("    title: GPU temperature\n", f"    title: GPU temperature\n    {key_line}\n") + FIELDS


def _cli_render(tmp_path, text: str):
    spec = tmp_path / "spec.yaml"
    spec.write_text(text)
    return subprocess.run([sys.executable, "-m", "gpumon.cli", "render", str(spec), "-o", str(tmp_path / "o")],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)


def _errors(text: str) -> list[str]:
    with pytest.raises(SpecError) as info:
        parse_spec(text, "spec.yaml")
    assert all(p.line >= 1 and p.column >= 1 for p in info.value.problems)
    return [str(p) for p in info.value.problems]


# --------------------------------------------------------------------------- legacy names

def test_injected_legacy_name_is_a_positioned_spec_error(tmp_path):
    """It rendered (exit 0) an alert that fired for every target of every job."""
    proc = _cli_render(tmp_path, _with(f"legacy_names: ['{INJECTION}']"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert re.search(r"spec\.yaml:14:\d+: metrics\[0\]\.legacy_names\[0\]: ", proc.stderr), proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "o").exists()


def test_legal_legacy_name_renders_rules_promtool_accepts(tmp_path):
    spec = parse_spec(_with("legacy_names: [dcgm_gpu_temp]"), "spec.yaml")
    files = render(spec)
    writer.write(files, tmp_path / "o")
    check = subprocess.run(["promtool", "check", "rules", str(tmp_path / "o" / "rules" / "gpumon.rules.yaml")],
                           capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    assert 'dcgm_gpu_temp{job="dcgm-exporter"}' in exporter.legacy_names(spec).expr
    run = subprocess.run(["promtool", "test", "rules", "gpumon.exporter.test.yaml"], cwd=tmp_path / "o" / "tests",
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout[-3000:]


def test_a_name_that_is_not_a_metric_name_cannot_add_operators():
    """Behind the schema: a name that got past it is one quoted ``__name__`` matcher."""
    spec = parse_spec(_with("legacy_names: [dcgm_gpu_temp]"), "spec.yaml")
    metric = dataclasses.replace(spec.metrics[0], legacy_names=(INJECTION,))
    spec = dataclasses.replace(spec, metrics=(metric,) + spec.metrics[1:])
    expr = exporter.legacy_names(spec).expr
    promql_parser.parse(expr)
    assert "vector(1)" not in expr.replace(promqltext.quote(INJECTION), "")
    assert promqltext.series("up", 'job="x"') == 'up{job="x"}' and promqltext.series("up", bare=True) == "up"
    assert promqltext.series("a b", 'job="x"') == '{__name__="a b",job="x"}'


def test_a_dollar_in_a_job_never_reaches_grafana_as_a_variable(tmp_path):
    """Grafana replaces `$node` in a panel's query with the node variable before sending it: the
    job `exp-$node` reached Prometheus as `exp-(gpu-node-1|...)`. Every `$` left in a rendered
    dashboard's queries is a variable the dashboard defines (or Grafana's own `$__...`), and the
    rules still read the job as written."""
    text = BASE.replace("job: dcgm-exporter", 'job: "exp-$node"')
    files = render(parse_spec(text, "spec.yaml"))
    seen = 0
    for path, body in files.items():
        if not (path.startswith("dashboards/") and path.endswith(".json")):
            continue
        board = json.loads(body)
        variables = {v["name"] for v in board.get("templating", {}).get("list", [])}
        for expr in re.findall(r'"expr": "((?:[^"\\]|\\.)*)"', body):
            expr = json.loads(f'"{expr}"')
            assert all(v in variables or v.startswith("__") for v in re.findall(r"\$\{?(\w+)", expr)), expr
            seen += "exp-\\x24node" in expr
    assert seen, "no panel reads the job"
    rules = files["rules/gpumon.rules.yaml"]
    assert 'job="exp-\\x24node"' in rules
    assert any(m.value == "exp-$node" for m in promql_parser.parse('up{job="exp-\\x24node"}').matchers.matchers)


# --------------------------------------------------------------------------- source labels

SOURCE = "sources: [{name: smi_temp, job: smi, labels: {node: NODE, gpu: uuid}}]"


@pytest.mark.parametrize("entry,path,what", [
    (SOURCE.replace("NODE", "job"), "labels.node", "job is the scrape job's"),
    (SOURCE.replace("NODE", "uuid"), "labels.node", "is already labels.gpu"),
    (SOURCE.replace("NODE", "dcgm_field"), "labels.node", "gpumon's rules write it"),
    (SOURCE.replace("NODE", "source"), "labels.node", "gpumon's rules write it"),
    (SOURCE.replace("NODE", "__name__"), "labels.node", "Prometheus' own"),
    (SOURCE.replace("NODE", "pod"), "labels.node", "names a target or pod"),
    (SOURCE.replace("NODE", "host, gpu_index: uuid"), "labels.gpu_index", "is already labels.gpu"),
    ("sources: [{name: smi_temp, labels: {node: UUID}}]", "labels.node", "is already labels.gpu"),  # exporter's gpu
    ("sources: [{preset: nvidia_gpu_exporter, labels: {node: job}}]", "labels.node", "job is the scrape job's"),
])
def test_source_label_mapping_gets_the_exporter_label_checks(entry, path, what):
    """node: job and node equal to the GPU label loaded, and their rendered rule tests failed."""
    errors = _errors(_with(entry))
    assert any(f"metrics[0].sources[0].{path}: " in e and what in e for e in errors), errors


def test_exporter_label_cannot_be_one_gpumon_writes():
    errors = _errors(BASE.replace("  scrape_interval: 15s\n", "  scrape_interval: 15s\n  labels: {node: dcgm_field}\n"))
    assert any("exporter.labels.node: " in e and "gpumon's rules write it" in e for e in errors), errors


@pytest.mark.parametrize("entry", [
    SOURCE.replace("NODE", "instance"),
    SOURCE.replace("NODE", "host"),
    'sources: [{preset: nvidia_gpu_exporter, job: "x\\",job=~\\".+"}]',
    'sources: [{preset: nvidia_gpu_exporter, job: "$1 a\\\\b"}]',
])
def test_specs_that_load_render_tests_that_pass(tmp_path, entry):
    """The invariant: a spec that loads renders rules promtool accepts and tests that pass."""
    _renders_passing_tests(tmp_path, _with(entry))


#: identity labels named as the labels dcgm-exporter writes beside them (its device file, the MIG
#: profile): the rule tests' series carried both under one name and the tests failed (or render ended
#: in an internal error: two MIG instances became one series)
EXPORTER_LABEL_NAMES = ["{gpu_index: device, mig_instance: GPU_I_PROFILE}", "{node: device}"]


@pytest.mark.parametrize("labels", EXPORTER_LABEL_NAMES)
def test_identity_labels_named_like_the_exporters_other_labels_render_tests_that_pass(tmp_path, labels):
    _renders_passing_tests(tmp_path, BASE.replace("  scrape_interval: 15s\n", f"  scrape_interval: 15s\n  labels: {labels}\n"))


@pytest.mark.parametrize("name", ["severity", "alertname", "alertstate"])
def test_an_identity_label_every_alert_sets_itself_is_refused(name):
    """It loaded, and the GPU's alerts lost its node (their own severity or alertname won)."""
    errors = _errors(BASE.replace("  scrape_interval: 15s\n", f"  scrape_interval: 15s\n  labels: {{node: {name}}}\n"))
    assert any("exporter.labels.node: " in e and "every alert sets its own" in e for e in errors), errors


#: a threshold on the range's bound (>= max, <= min: the bound itself fires, the test fed one past it,
#: an implausible reading) and a rate threshold whose rate the test fed as 2 x 1e-06 + 1 per second
#: (Prometheus' rate read back 1.0000020000000007, not the annotation's 1.000002)
AT_THE_BOUNDS = BASE.replace('op: ">", value: 83', 'op: ">=", value: 110}\n      - {severity: critical, op: "<=", value: 5') + """\
  - name: DCGM_FI_DEV_PCIE_REPLAY_COUNTER
    kind: counter
    unit: count
    presence: optional
    thresholds:
      - {severity: warning, op: ">", value: 0.000001, rate: 5m, for: 5m}
"""


def test_thresholds_at_the_range_bounds_and_tiny_rates_render_tests_that_pass(tmp_path):
    _renders_passing_tests(tmp_path, AT_THE_BOUNDS)


@pytest.mark.parametrize("line,path,what", [
    ("name: up", "metrics[0].name", "Prometheus writes itself"),
    ("name: ALERTS", "metrics[0].name", "Prometheus writes itself"),
    ("name: job_gpu:gpumon_inventory:group", "metrics[0].name", "reserves colons for recording rules"),
    ("name: DCGM_FI_DEV_GPU_TEMP\n    legacy_names: [DCGM_FI_DEV_GPU_TEMP]", "metrics[0].legacy_names[0]",
     "the metric's own name"),
    ("name: DCGM_FI_DEV_GPU_TEMP\n    legacy_names: [ALERTS_FOR_STATE]", "metrics[0].legacy_names[0]",
     "Prometheus writes itself"),
])
def test_a_metric_named_as_a_series_prometheus_or_gpumon_writes_is_refused(line, path, what):
    """Each loaded: `up` rendered rules Prometheus refused at evaluation (many-to-many), `ALERTS`
    and gpumon's own record names rendered failing tests (a record's name an internal error)."""
    errors = _errors(BASE.replace("name: DCGM_FI_DEV_GPU_TEMP", line))
    assert any(f"{path}: " in e and what in e for e in errors), errors


def test_a_rate_threshold_past_the_dcgm_blank_codes_is_refused():
    """`> 1e12/s`: the counter passes 2^47 (dropped as a blank code) before the alert's `for`."""
    errors = _errors(AT_THE_BOUNDS.replace("value: 0.000001", "value: 999999999999"))
    assert any("metrics[1].thresholds[0].value: " in e and "passes 2^47" in e for e in errors), errors
    assert parse_spec(AT_THE_BOUNDS.replace("value: 0.000001", "value: 1000000"), "spec.yaml").metrics[1].thresholds


def _renders_passing_tests(tmp_path, text: str) -> None:
    files = render(parse_spec(text, "spec.yaml"))
    writer.write(files, tmp_path)
    check = subprocess.run(["promtool", "check", "rules", "rules/gpumon.rules.yaml"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    tests = sorted(p.name for p in (tmp_path / "tests").glob("*.test.yaml"))
    run = subprocess.run(["promtool", "test", "rules", *tests], cwd=tmp_path / "tests", capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:]


# --------------------------------------------------------------------------- exit 4 -> exit 2

def test_angle_bracket_named_group_is_refused(tmp_path):
    """`(?<n>a)`: RE2 takes it, Prometheus 2.42 and Python's re do not (exit 4 in render)."""
    proc = _cli_render(tmp_path, KUBE.replace("POD", "(?<n>a)"))
    assert proc.returncode == 2, proc.stderr
    assert re.search(r"spec\.yaml:\d+:\d+: kubernetes\.exporter\.pod_regex: .*\(\?P<name>", proc.stderr), proc.stderr
    assert parse_spec(KUBE.replace("POD", "nvidia-dcgm-exporter-(?P<id>[a-z0-9]{5})"), "spec.yaml").kubernetes


def test_mapping_where_a_label_name_is_expected(tmp_path):
    proc = _cli_render(tmp_path, BASE.replace("  scrape_interval: 15s\n",
                                              "  scrape_interval: 15s\n  labels: {cluster: {name: x}}\n"))
    assert proc.returncode == 2, proc.stderr
    assert re.search(r"spec\.yaml:\d+:\d+: exporter\.labels\.cluster: ", proc.stderr), proc.stderr


@pytest.mark.parametrize("nesting", ["x:\n" + "- " * 3000 + "a\n",
                                     "x:\n" + "".join(" " * i + "a:\n" for i in range(300)) + " " * 300 + "b: 1\n"])
def test_deep_block_nesting_names_its_line(nesting):
    """Thousands of block levels exhausted the parser's stack: an error at 1:1."""
    [problem] = _errors(BASE + nesting)
    line = int(problem.split(":")[1])
    assert line > BASE.count("\n") + 1 and "nested more than" in problem, problem


@pytest.mark.parametrize("option,value", [("--header", "X-Tenant=tën"), ("--tenant", "tënant")])
def test_non_ascii_header_values_are_usage_errors(option, value):
    result = CliRunner().invoke(cli, ["validate", str(ROOT / "gpumon.yaml"), "--prom", "http://127.0.0.1:9",
                                      option, value])
    assert result.exit_code == 2 and "non-ASCII" in result.output, result.output
    assert "tën" not in result.output


def test_non_ascii_token_is_a_usage_error(tmp_path, monkeypatch):
    token = tmp_path / "token"
    token.write_text("tökén-s3cret\n")
    monkeypatch.setenv("GPUMON_BEARER_TOKEN", "")
    result = CliRunner().invoke(cli, ["validate", str(ROOT / "gpumon.yaml"), "--prom", "http://127.0.0.1:9",
                                      "--bearer-token-file", str(token)])
    assert result.exit_code == 2 and "non-ASCII" in result.output and "s3cret" not in result.output, result.output


@pytest.mark.parametrize("layout", ["self", "pair", "inside"])
def test_symlink_loop_in_the_output_folder_names_the_path(tmp_path, layout):
    out = tmp_path / "out"
    if layout == "self":
        out.symlink_to(out)
    elif layout == "pair":
        (tmp_path / "b").symlink_to(out)
        out.symlink_to(tmp_path / "b")
    else:
        out.mkdir()
        (out / "rules").symlink_to(out / "rules2")
        (out / "rules2").symlink_to(out / "rules")
    for check in ([], ["--check"]):
        result = CliRunner().invoke(cli, ["render", str(ROOT / "gpumon.yaml"), "-o", str(out), *check])
        assert result.exit_code == 2 and "symlink loop" in result.stderr, result.output
        assert str(out) in result.stderr and "internal error" not in result.stderr


# --------------------------------------------------------------------------- smaller

def test_severity_in_alert_labels_is_refused():
    """It was dropped without a word: every alert sets its own severity."""
    errors = _errors(BASE.replace("  for: 5m\n", "  for: 5m\n  labels: {severity: critical}\n"))
    assert any("alerts.labels.severity: " in e and "thresholds[].severity" in e for e in errors), errors


SIDECAR = BASE + "textfile_sidecar:\n  textfile_directory: DIR\n"


@pytest.mark.parametrize("folder", ["/", "//", "/etc", "/etc/", "/proc", "/sys/fs", "/var", "/usr", "/var/lib/..",
                                    "/dev/shm"])
def test_sidecar_refuses_system_folders(folder):
    errors = _errors(SIDECAR.replace("DIR", folder))
    assert any("textfile_sidecar.textfile_directory: " in e and "read-write" in e for e in errors), errors


def test_sidecar_takes_a_textfile_folder():
    spec = parse_spec(SIDECAR.replace("DIR", "/var/lib/node_exporter/textfile_collector"), "spec.yaml")
    assert spec.textfile_sidecar.textfile_directory == "/var/lib/node_exporter/textfile_collector"
    assert yaml.safe_load_all(render(spec)["kubernetes/gpumon-nvidia-smi-textfile.yaml"])


def test_one_source_series_under_two_metrics_is_refused():
    """Found by the spec fuzzer: rendering ended in an internal error (a rule-test series twice)."""
    entry = "sources: [{name: gpu_reading, job: smi, labels: {gpu: uuid, node: instance}}]"
    text = _with(entry).replace("    range: [0, 1500]\n", f"    range: [0, 1500]\n    {entry}\n")
    errors = _errors(text)
    assert any("metrics[1].sources[0]: " in e and "already metrics[0].sources[0]" in e for e in errors), errors
