"""The spec's ``overrides`` section (disable, severity, for, labels, annotations; per alert and per
field) changes the rendered rules and the generated promtool tests together; unknown names are
spec errors listing the valid ones; runbook templates in a ``runbooks/`` folder next to the spec
replace the bundled ones."""

from __future__ import annotations

import functools
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from gpumon import render, writer
from gpumon.cli import cli
from gpumon.runbooks import OWN_TEMPLATE_MARK
from gpumon.durations import parse_duration
from gpumon.rules import build_groups
from gpumon.spec import SpecError, load_spec, parse_spec

BASE = """\
version: 1
name: ovr
exporter:
  job: dcgm-exporter
  scrape_interval: 30s
  scrape_timeout: 10s
alerts:
  for: 5m
  runbook_url: https://git.example.com/ops/gpu/-/blob/main/output/runbooks
metrics:
  - name: DCGM_FI_DEV_GPU_TEMP
    kind: gauge
    unit: celsius
    presence: required
    range: [5, 110]
    thresholds:
      - {alert: GpuTemperatureHigh, severity: warning, op: ">", value: 83, for: 5m}
  - name: DCGM_FI_DEV_GPU_UTIL
    kind: gauge
    unit: percent
    presence: required
    range: [0, 100]
    thresholds:
      - {alert: GpuUtilizationSaturated, severity: info, op: ">", value: 95, for: 5m}
"""

OVERRIDES = """\
overrides:
  GpuUtilizationSaturated: {disable: true}
  GpuTemperatureHigh:
    for: 10m
    severity: critical
    labels: {team: gpu-infra}
    annotations: {playbook: "https://wiki.example/gpu-temp?a=1&b=<2>"}
  GpuMetricMissing:
    labels: {team: gpu-infra}
    fields:
      DCGM_FI_DEV_GPU_UTIL: {disable: true}
      DCGM_FI_DEV_GPU_TEMP: {for: 15m}
  GpuExporterDown:
    for: 3m
    annotations: {summary: "The GPU exporter is down: 'quotes' and \\"double quotes\\" stay text"}
  GpuLost: {severity: warning}
"""


def _render(tmp: Path, text: str) -> Path:
    tmp.mkdir(parents=True, exist_ok=True)
    spec = tmp / "gpumon.yaml"
    spec.write_text(text, "utf-8")
    writer.write(render.render(load_spec(spec)), tmp / "out")
    return tmp / "out"


@pytest.fixture(scope="module")
def plain_out(tmp_path_factory) -> Path:
    return _render(tmp_path_factory.mktemp("plain"), BASE)


@pytest.fixture(scope="module")
def over_out(tmp_path_factory) -> Path:
    return _render(tmp_path_factory.mktemp("over"), BASE + OVERRIDES)


def _rules(out: Path, alert: str) -> list[dict]:
    doc = yaml.safe_load((out / "rules/ovr.rules.yaml").read_text("utf-8"))
    return [r for g in doc["groups"] for r in g["rules"] if r.get("alert") == alert]


_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@functools.lru_cache(maxsize=4)
def _tests(out: Path) -> list[tuple[str, dict]]:
    """(scenario name, alert_rule_test) of every generated test."""
    out_ = []
    for path in sorted((out / "tests").glob("*.test.yaml")):
        for group in yaml.load(path.read_text("utf-8"), Loader=_Loader)["tests"]:
            out_ += [(group["name"], t) for t in group.get("alert_rule_test", [])]
    return out_


def _firing(out: Path, alert: str) -> list[tuple[float, dict]]:
    return [(parse_duration(t["eval_time"]), a) for _, t in _tests(out) if t["alertname"] == alert
            for a in t["exp_alerts"]]


# --------------------------------------------------------------------------- rules


def test_overrides_change_the_rules(over_out, plain_out):
    high = _rules(over_out, "GpuTemperatureHigh")
    assert [(r["for"], r["labels"]["severity"], r["labels"]["team"]) for r in high] == [("10m", "critical", "gpu-infra")]
    assert high[0]["annotations"]["playbook"] == "https://wiki.example/gpu-temp?a=1&b=<2>"
    assert list(high[0]["annotations"])[-1] == "playbook", "extra annotations follow the generated ones"
    assert _rules(over_out, "GpuUtilizationSaturated") == [] and _rules(plain_out, "GpuUtilizationSaturated")
    missing = {r["labels"]["dcgm_field"]: r for r in _rules(over_out, "GpuMetricMissing")}
    assert set(missing) == {"DCGM_FI_DEV_GPU_TEMP"}, "the per-field disable drops only that field's rule"
    assert missing["DCGM_FI_DEV_GPU_TEMP"]["for"] == "15m" and missing["DCGM_FI_DEV_GPU_TEMP"]["labels"]["team"] == "gpu-infra"
    down = _rules(over_out, "GpuExporterDown")[0]
    assert down["for"] == "3m" and "double quotes" in down["annotations"]["summary"]
    assert _rules(over_out, "GpuLost")[0]["labels"]["severity"] == "warning"
    # the same objects in the PrometheusRule, no runbook for the disabled alert
    crd = list(yaml.safe_load_all((over_out / "kubernetes/ovr-prometheusrule.yaml").read_text("utf-8")))
    assert not any(r.get("alert") == "GpuUtilizationSaturated" for d in crd for g in d["spec"]["groups"] for r in g["rules"])
    assert not (over_out / "runbooks/GpuUtilizationSaturated.md").exists()
    assert (plain_out / "runbooks/GpuUtilizationSaturated.md").exists()


def test_generated_tests_follow_the_overrides(over_out, plain_out):
    tests = _tests(over_out)
    assert tests and not any("GpuUtilizationSaturated" in name or t["alertname"] == "GpuUtilizationSaturated"
                             for name, t in tests), "a disabled alert has no test case and no expectation"
    assert any(t["alertname"] == "GpuUtilizationSaturated" for _, t in _tests(plain_out))
    # a longer ``for`` moves the expected firing time by the difference
    before, after = _firing(plain_out, "GpuTemperatureHigh"), _firing(over_out, "GpuTemperatureHigh")
    assert before and after
    assert min(t for t, _ in after) - min(t for t, _ in before) == 300
    assert all(a["exp_labels"]["severity"] == "critical" and a["exp_labels"]["team"] == "gpu-infra"
               and a["exp_annotations"]["playbook"].endswith("<2>") for _, a in after)
    # per field: GPU_UTIL's missing alert is never expected, GPU_TEMP's later and with the label
    fields = {a["exp_labels"]["dcgm_field"] for _, a in _firing(over_out, "GpuMetricMissing")}
    assert fields == {"DCGM_FI_DEV_GPU_TEMP"}
    assert {a["exp_labels"]["severity"] for _, a in _firing(over_out, "GpuLost")} == {"warning"}


def test_a_spec_without_overrides_renders_as_before(plain_out, tmp_path):
    same = _render(tmp_path, BASE + "overrides: {}\n")
    for path in sorted(p for p in plain_out.rglob("*") if p.is_file()):
        assert (same / path.relative_to(plain_out)).read_bytes() == path.read_bytes(), path


def _promtool(promtool: str, path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([promtool, "test", "rules", path.name], cwd=path.parent, capture_output=True,
                          text=True, timeout=900)


def test_promtool_passes_the_overridden_tests(over_out, promtool):
    files = sorted((over_out / "tests").glob("*.test.yaml"))
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda f: _promtool(promtool, f), files))
    failed = [f"{f.name}: {r.stdout[-3000:]}{r.stderr[-3000:]}" for f, r in zip(files, results) if r.returncode]
    assert not failed, "\n".join(failed)


#: BASE plus a counter without a range (only blanks and NaN are implausible) and a longer implausible ``for``
EVERY_FOR_BASE = BASE.replace("alerts:\n", "alerts:\n  implausible_for: 5m\n") + """\
  - name: DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION
    kind: counter
    unit: millijoules
    presence: required
"""


@pytest.mark.parametrize("parity", [0, 1], ids=["even-short", "even-long"])
def test_promtool_passes_when_every_alerts_for_differs(parity, tmp_path, promtool):
    """Each alert's ``for`` moved away from its neighbours' (1m / 10m alternating by name, then the
    other way round), so a scenario that expects two alerts at a step computed from one alert's
    ``for`` fails here: the whole class of the per-field GpuTelemetryImplausible override that made
    the fleet-wide blank test fail."""
    names = sorted({r.alert for g in build_groups(parse_spec(EVERY_FOR_BASE, "s.yaml")) for r in g.rules if r.alert})
    assert len(names) > 15, names
    lines = [f"  {n}: {{for: {'1m' if (i + parity) % 2 == 0 else '10m'}}}" for i, n in enumerate(names)]
    out = _render(tmp_path, EVERY_FOR_BASE + "overrides:\n" + "\n".join(lines) + "\n")
    files = sorted((out / "tests").glob("*.test.yaml"))
    if parity:  # the healthy-fleet file depends only on the longest ``for``: the same in both variants
        files = [f for f in files if not f.name.endswith(".healthy.test.yaml")]
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda f: _promtool(promtool, f), files))
    failed = [f"{f.name}: {r.stdout[-3000:]}{r.stderr[-3000:]}" for f, r in zip(files, results) if r.returncode]
    assert not failed, "\n".join(failed)


# --------------------------------------------------------------------------- spec errors


def _errors(text: str) -> list[str]:
    """Problems of the spec ``BASE + text``: from loading it, or (override names) from building its rules."""
    with pytest.raises(SpecError) as exc:
        build_groups(parse_spec(BASE + text, "spec.yaml"))
    return [str(p) for p in exc.value.problems]


def test_an_unknown_alert_name_lists_the_valid_ones():
    errors = _errors("overrides:\n  GpuTemperatureHi: {disable: true}\n")
    assert len(errors) == 1
    assert errors[0].startswith("spec.yaml:26:3: overrides.GpuTemperatureHi: no generated alert is called")
    assert "GpuTemperatureHigh" in errors[0] and "GpuExporterDown" in errors[0] and "GpuMetricMissing" in errors[0]


def test_the_cli_reports_an_unknown_name_as_a_spec_error(tmp_path):
    (tmp_path / "gpumon.yaml").write_text(BASE + "overrides:\n  GpuTemperatureHi: {disable: true}\n", "utf-8")
    result = CliRunner().invoke(cli, ["render", str(tmp_path / "gpumon.yaml"), "-o", str(tmp_path / "out")])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert ":26:3: overrides.GpuTemperatureHi: no generated alert is called 'GpuTemperatureHi'; did you mean " \
           "'GpuTemperatureHigh'?" in result.output
    assert not (tmp_path / "out").exists()


def test_an_unknown_field_lists_the_alerts_fields():
    errors = _errors("overrides:\n  GpuMetricMissing:\n    fields:\n      DCGM_FI_DEV_POWER_USAGE: {disable: true}\n")
    assert len(errors) == 1 and errors[0].startswith("spec.yaml:28:7:")
    assert "DCGM_FI_DEV_GPU_TEMP, DCGM_FI_DEV_GPU_UTIL" in errors[0]


@pytest.mark.parametrize("body, where, words", [
    ("GpuLost: {labels: {severity: page}}", "overrides.GpuLost.labels", "severity"),
    ("GpuLost: {labels: {Hostname: x}}", "overrides.GpuLost.labels.Hostname", "identifies the node or GPU"),
    ("GpuLost: {labels: {team-name: x}}", "overrides.GpuLost.labels", "team-name"),
    ("GpuLost: {annotations: {summary: 'GPU {{ $labels.UUID }} lost'}}", "overrides.GpuLost.annotations.summary",
     "Go template"),
    ("GpuLost: {labels: {team: \"a\\nb\"}}", "overrides.GpuLost.labels.team", "control character"),
    ("GpuLost: {for: 7h}", "overrides.GpuLost.for", "out of bounds"),
    ("GpuLost: {severity: page}", "overrides.GpuLost.severity", "page"),
    ("GpuLost: {colour: red}", "overrides.GpuLost.colour", "unknown key"),
    ("gpuLost: {disable: true}", "overrides", "gpuLost"),
    (f"GpuLost: {{annotations: {{note: {'x' * 2049}}}}}", "overrides.GpuLost.annotations.note", ""),
])
def test_override_values_are_checked(body, where, words):
    errors = _errors("overrides:\n  " + body + "\n")
    assert any(f": {where}:" in e and words in e for e in errors), errors
    assert all(e.startswith("spec.yaml:") for e in errors)


def test_the_schema_documents_overrides():
    from gpumon.spec import schema

    props = schema()["definitions"]["alertOverride"]["properties"]
    assert set(props) == {"disable", "severity", "for", "labels", "annotations", "fields"}


# --------------------------------------------------------------------------- runbook templates


def _cli_render(folder: Path):
    return CliRunner().invoke(cli, ["render", str(folder / "gpumon.yaml"), "-o", str(folder / "out")])


def test_runbook_templates_next_to_the_spec_win(tmp_path):
    (tmp_path / "runbooks").mkdir()
    (tmp_path / "gpumon.yaml").write_text(BASE, "utf-8")
    (tmp_path / "runbooks/GpuTemperatureHigh.md.j2").write_text("# {{ alert }}\n\nCall the GPU team on {{ job }}.\n")
    (tmp_path / "runbooks/gpu_lost.md.j2").write_text("# {{ alert }} (ours)\n\n{% include '_steps.md.j2' ignore missing %}\n")
    result = _cli_render(tmp_path)
    assert result.exit_code == 0, result.output
    out = tmp_path / "out/runbooks"
    # the page carries gpumon's mark (a hidden first line) so a later render may replace it
    assert (out / "GpuTemperatureHigh.md").read_text() == (f"<!-- {OWN_TEMPLATE_MARK} -->\n"
                                                           "# GpuTemperatureHigh\n\nCall the GPU team on dcgm-exporter.\n")
    assert (out / "GpuLost.md").read_text().startswith(f"<!-- {OWN_TEMPLATE_MARK} -->\n# GpuLost (ours)\n")
    assert "Call the GPU team" not in (out / "GpuTemperatureCritical.md").read_text() if (
        out / "GpuTemperatureCritical.md").exists() else True
    assert (out / "GpuExporterDown.md").read_text().startswith("# GpuExporterDown"), "bundled for the others"


@pytest.mark.parametrize("template, words", [
    ("{% if %}", "GpuTemperatureHigh.md.j2:1"),
    ("{{ no_such_variable }}", "no_such_variable"),
    ("{{ ''.__class__.__mro__ }}", "unsafe"),
])
def test_a_broken_runbook_template_is_a_usage_error(tmp_path, template, words):
    (tmp_path / "runbooks").mkdir()
    (tmp_path / "gpumon.yaml").write_text(BASE, "utf-8")
    (tmp_path / "runbooks/GpuTemperatureHigh.md.j2").write_text(template)
    result = _cli_render(tmp_path)
    assert result.exit_code == 2, result.output
    assert "runbook template" in result.output and words in result.output and "Traceback" not in result.output
