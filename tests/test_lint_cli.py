"""gpumon lint as users run it: ignore comments, --disable, --fail-on, exit codes, output
formats (SARIF validated against the SARIF 2.1.0 schema), unreadable input, the rendered
output and the official dcgm-exporter dashboard."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from gpumon import reporters
from gpumon.cli import cli
from gpumon.lint import lint

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "lint_corpus"
DATA = HERE / "data"


def run(*args):
    return CliRunner().invoke(cli, ["lint", *map(str, args)])


# --------------------------------------------------------------------------- silencing


FOR_MISSING = """\
groups:
- name: corpus
  rules:
  # gpumon-lint: ignore for-missing
  - alert: GpuPowerHigh
    expr: max by (job, Hostname, UUID) (DCGM_FI_DEV_POWER_USAGE{job="dcgm-exporter"}) > 700
  - alert: GpuPowerVeryHigh
    expr: max by (job, Hostname, UUID) (DCGM_FI_DEV_POWER_USAGE{job="dcgm-exporter"}) > 900
  - alert: GpuPowerExtreme  # gpumon-lint: ignore for-missing, mig-sum-without-uuid
    expr: max by (job, Hostname, UUID) (DCGM_FI_DEV_POWER_USAGE{job="dcgm-exporter"}) > 1000
"""


def test_ignore_comment_silences_one_rule(tmp_path, default_spec):
    path = tmp_path / "rules.yaml"
    path.write_text(FOR_MISSING)
    report = lint([path], default_spec)
    assert [(f.check, f.subject, f.location.line) for f in report.findings] == [
        ("for-missing", "alert GpuPowerVeryHigh", 7)]


def test_ignore_file_comment(tmp_path, default_spec):
    path = tmp_path / "rules.yaml"
    path.write_text("# gpumon-lint: ignore-file for-missing\n" + FOR_MISSING)
    assert lint([path], default_spec).findings == []


def test_disable_option_and_unknown_id(tmp_path):
    path = tmp_path / "rules.yaml"
    path.write_text(FOR_MISSING)
    result = run(path, "--fail-on", "warning")
    assert result.exit_code == 1 and "for-missing" in result.output
    result = run(path, "--fail-on", "warning", "--disable", "for-missing,mig-sum-without-uuid")
    assert result.exit_code == 0, result.output
    result = run(path, "--disable", "no-such-check")
    assert result.exit_code == 2 and "unknown check id" in result.output


# --------------------------------------------------------------------------- exit codes


@pytest.mark.parametrize("fail_on, code", [("error", 0), ("warning", 1), ("info", 1), ("never", 0)])
def test_fail_on_chooses_severity(fail_on, code):
    result = run(CORPUS / "mig_sum.yaml", "--fail-on", fail_on)
    assert result.exit_code == code, result.output


def test_errors_fail_by_default():
    assert run(CORPUS / "absent_no_selector.yaml").exit_code == 1
    assert run(CORPUS / "clean_dashboard.json").exit_code == 0


def test_unreadable_input_exits_2(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("groups:\n- name: x\n  rules: [\n")
    result = run(bad, "-f", "json")
    assert result.exit_code == 2
    finding = json.loads(result.stdout)["findings"][0]
    assert finding["check"] == "input-unreadable" and finding["message"].startswith("YAML syntax error")
    assert (finding["location"]["line"], finding["location"]["column"]) == (4, 1)
    broken = tmp_path / "dash.json"
    broken.write_text('{"panels": [}')
    result = run(broken, "-f", "github")
    assert result.exit_code == 2
    assert f"::error file={broken},line=1,col=13" in result.output and "JSON syntax error" in result.output
    assert run(tmp_path / "missing.yaml").exit_code == 2


def test_bad_spec_exits_2(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text("version: 1\n")
    result = run(CORPUS / "mig_sum.yaml", "--spec", spec)
    assert result.exit_code == 2 and "problem(s) in the spec" in result.output


def test_non_rule_yaml_is_skipped(tmp_path, default_spec):
    (tmp_path / "values.yaml").write_text("image: nvidia/dcgm-exporter\nreplicas: 1\n")
    shutil.copy(CORPUS / "for_missing.yaml", tmp_path / "rules.yml")
    report = lint([tmp_path], default_spec)
    assert [f.check for f in report.findings] == ["for-missing"]
    assert report.summary["inputs"].startswith("2 files: 1 rules")


@pytest.mark.parametrize("name, text", [("x.json", "{}"), ("list.json", "[]"), ("null.yaml", "null\n"),
                                        ("values.yaml", "image: nvidia/dcgm-exporter\n"),
                                        ("cm.yaml", "kind: ConfigMap\ndata: {a: b}\n")])
def test_named_file_with_nothing_lintable_exits_2(tmp_path, name, text):
    """A file named on the command line that holds no rules or dashboard is a wrong path or format:
    reporting "0 errors" (exit 0) would let a CI check pass on nothing."""
    path = tmp_path / name
    path.write_text(text)
    result = run(path, "-f", "json")
    assert result.exit_code == 2, result.output
    (finding,) = json.loads(result.stdout)["findings"]
    assert finding["check"] == "input-unreadable" and "no Prometheus rule groups" in finding["message"]
    assert (finding["location"]["file"], finding["location"]["line"]) == (str(path), 1)


def test_empty_rule_groups_and_walked_folders_are_not_a_mistake(tmp_path):
    (tmp_path / "empty.yaml").write_text("groups: []\n")
    (tmp_path / "x.json").write_text("{}")
    assert run(tmp_path / "empty.yaml").exit_code == 0
    assert run(tmp_path).exit_code == 0   # found by walking a folder: anything may live there


# --------------------------------------------------------------------------- formats


def test_sarif_validates_against_the_sarif_schema(default_spec):
    schema = json.loads((DATA / "sarif-schema-2.1.0.json").read_text())
    report = lint([CORPUS], default_spec)
    log = json.loads(reporters.render(report, "sarif"))
    errors = list(jsonschema.Draft4Validator(schema).iter_errors(log))
    assert errors == []
    results = log["runs"][0]["results"]
    assert len(results) == len(report.findings)
    regions = {(r["ruleId"], r["locations"][0]["physicalLocation"]["region"]["startLine"]) for r in results}
    assert ("absent-no-selector", 5) in regions and ("dashboard-deprecated-panel", 83) in regions
    pointers = {r.get("properties", {}).get("jsonPointer") for r in results}
    assert "/panels/0/type" in pointers and "/__inputs" in pointers


def test_junit_and_github_formats():
    result = run(CORPUS / "for_missing.yaml", CORPUS / "promql_syntax.yaml", "-f", "junit")
    suite = ET.fromstring(result.output.split("\n", 1)[1]).find("testsuite")
    assert suite.get("failures") == "1"
    names = {case.get("name") for case in suite.iter("testcase")}
    assert "record job_node:gpu_temp:max" in names and "alert GpuPowerHigh" in names and "rule-invalid" in names
    result = run(CORPUS / "for_missing.yaml", "-f", "github")
    assert result.output.startswith(f"::warning file={CORPUS / 'for_missing.yaml'},line=4,col=5,title=for-missing")


def test_list_checks_documents_every_check():
    result = CliRunner().invoke(cli, ["lint", "--list-checks"])
    assert result.exit_code == 0
    for check in ("absent-no-selector (error)", "dashboard-variable-anchor (warning)", "Silence:"):
        assert check in result.output


# --------------------------------------------------------------------------- real inputs


def test_rendered_output_folder_lints_clean(root, default_spec):
    """Whatever output/ holds (rules, PrometheusRule, dashboards, tests, runbooks) lints clean."""
    report = lint([root / "output"], default_spec)
    assert report.summary["inputs"] and sum(1 for f in report.findings) == 0, "\n".join(
        f"{f.location} {f.check}: {f.message}" for f in report.findings)
    assert "rules" in report.summary["inputs"]


def test_fresh_render_lints_clean(default_render_dir, default_spec):
    report = lint([default_render_dir], default_spec)
    assert report.findings == []
    assert " 0 rules" not in report.summary["inputs"]


def test_official_dcgm_exporter_dashboard(default_spec):
    path = DATA / "dcgm-exporter-dashboard.json"
    report = lint([path], default_spec)
    found = sorted((f.check, f.location.pointer) for f in report.findings)
    graph_panels = [f"/panels/{i}/type" for i in (0, 2, 4, 5, 6, 7)]
    assert found == sorted(
        [("dashboard-deprecated-panel", p) for p in graph_panels]
        + [("dashboard-overlapping-panels", "/panels/7/gridPos"),  # Tensor Core over GPU Utilization
           ("dashboard-variable-anchor", "/templating/list/1/query"),  # label_values(DCGM_FI_DEV_GPU_TEMP, ...)
           ("dashboard-variable-anchor", "/templating/list/2/query"),
           ("volatile-identity", "/templating/list/1/name"),  # GPUs picked by exporter instance
           ("mig-sum-without-uuid", "/panels/1/targets/0/expr"),  # avg(DCGM_FI_DEV_GPU_TEMP)
           ("mig-sum-without-uuid", "/panels/3/targets/0/expr")])  # sum(DCGM_FI_DEV_POWER_USAGE)
    lines = path.read_text().splitlines()
    for f in report.findings:
        key = f.location.pointer.rsplit("/", 1)[1]
        assert lines[f.location.line - 1][f.location.column - 1:].startswith(f'"{key}"'), f


def test_variable_anchor_hints_a_query_that_has_the_label(default_spec, tmp_path):
    """The hint's query lists the variable's label: the GPU inventory keeps job and the identity
    labels only, ``up`` has the target's ``instance`` (after the node variable volatile-identity
    advises for it), other labels need the required fields."""
    def var(label):
        return {"name": label, "type": "query", "query": f"label_values(DCGM_FI_DEV_GPU_TEMP, {label})"}
    path = tmp_path / "d.json"
    path.write_text(json.dumps({"title": "D", "uid": "d", "panels": [],
                                "templating": {"list": [var("Hostname"), var("instance"), var("modelName")]}}))
    hints = [f.hint for f in lint([path], default_spec).findings if f.check == "dashboard-variable-anchor"]
    required = "|".join(m.name for m in default_spec.required_metrics)
    assert hints == ["use label_values(job_gpu:gpumon_inventory:group, Hostname)",
                     'use label_values(job_gpu:gpumon_inventory:group, Hostname) for a node variable (instance '
                     'changes when the exporter pod restarts), or label_values(up{job="dcgm-exporter"}, instance)',
                     f'use label_values({{__name__=~"{required}",job="dcgm-exporter"}}, modelName)'], hints


def test_macros_and_variables_substituted(default_spec):
    report = lint([CORPUS / "clean_dashboard.json"], default_spec)
    assert report.findings == []
    # 3 panel queries and the variable query (label_values wrapper removed)
    assert "4 PromQL queries" in report.summary["inputs"]


def test_helm_templates_are_skipped_not_unreadable(tmp_path, default_spec):
    (tmp_path / "servicemonitor.yaml").write_text(
        "{{- if .Values.serviceMonitor.enabled }}\napiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\n"
        "{{- end }}\n")
    shutil.copy(CORPUS / "mig_sum.yaml", tmp_path / "rules.yaml")
    report = lint([tmp_path], default_spec)
    assert [f.check for f in report.findings] == ["mig-sum-without-uuid"]
    assert report.summary["skipped"].startswith("1 Helm/Go template")
    assert run(tmp_path).exit_code == 0


def test_malformed_inputs_give_findings_not_tracebacks(tmp_path):
    (tmp_path / "a.yaml").write_text("groups: hello\n")
    (tmp_path / "b.yaml").write_text("groups:\n- 3\n- name: x\n  rules: 5\n- name: y\n  rules:\n  - 7\n  - alert: X\n"
                                     "  - alert: Y\n    expr: [1,2]\n    for: 5\n    labels: 3\n")
    (tmp_path / "c.yaml").write_text("kind: PrometheusRule\nmetadata: 3\nspec: 4\n")
    (tmp_path / "d.json").write_text(json.dumps({"panels": [3, {"targets": 5}, {"id": 1, "gridPos": {"x": "a"},
                                                 "targets": [{"expr": 5}, {"expr": "rate("}]}],
                                                 "templating": {"list": [3, {"name": "v", "type": "query",
                                                                             "query": 5}]}}))
    (tmp_path / "e.json").write_text("[1, 2]")
    (tmp_path / "f.yaml").write_bytes(b"\xff\xfe")
    result = run(tmp_path, "-f", "json")
    assert result.exit_code == 2, result.output
    found = sorted((f["check"], Path(f["location"]["file"]).name) for f in json.loads(result.stdout)["findings"])
    assert found == [("input-unreadable", "f.yaml"), ("prometheusrule-selector-labels", "c.yaml"),
                     ("promql-syntax", "b.yaml"), ("promql-syntax", "d.json"),
                     ("rule-invalid", "b.yaml"), ("rule-invalid", "b.yaml")]


def _legacy_reading_rule(default_spec):
    from gpumon.rules import build_groups
    return next(r for g in build_groups(default_spec) for r in g.rules
                if r.record and "dcgm_gpu_temp" in r.expr and "DCGM_FI_DEV_GPU_TEMP" not in r.expr)


def test_only_gpumons_own_rule_may_read_1x_names(tmp_path, default_spec):
    """gpumon's rule counting GPUs on 1.x names reads the 1.x names the spec declares on purpose;
    the same expression under a user's rule name, or gpumon's rule edited, is still an error."""
    rule = _legacy_reading_rule(default_spec)
    expr = "\n".join("      " + line for line in rule.expr.strip().splitlines())

    def lint_rule(name: str, text: str):
        path = tmp_path / f"{name.replace(':', '_')}.yaml"
        path.write_text(f"groups:\n- name: g\n  rules:\n  - record: {name}\n    expr: |\n{text}\n")
        return {f.check for f in lint([path], default_spec).findings if f.severity == "error"}

    assert lint_rule(rule.record, expr) == set()
    assert "unknown-metric" in lint_rule("job_gpu:team_legacy:group", expr)
    assert "unknown-metric" in lint_rule(rule.record, expr.replace("dcgm_gpu_temp{", "dcgm_gpu_temp{gpu!=\"\",", 1))


def test_text_report_shows_rich_markup_from_the_input_literally():
    """validate's tables read cell strings as rich markup: a panel titled "[/bold]" ended in an
    internal error, "[link=...]" made a terminal link. Subjects and messages are shown as written."""
    from gpumon.findings import Finding, Report

    subject = 'dashboard "x" panel 1 "[/bold] [red]x[/red] [link=https://evil.example]y[/link]"'
    finding = Finding(check="panel-empty", severity="error", subject=subject, message="reads [/] nothing",
                      hint="[b]fix[/b]", location=None, labels=())
    out = reporters.text(Report(tool="gpumon validate", findings=[finding]), color=True, width=400)
    assert "[/bold] [red]x[/red] [link=https://evil.example]y[/link]" in out
    assert "reads [/] nothing" in out and "[b]fix[/b]" in out and "\x1b]8;" not in out


def test_a_runbook_url_that_does_not_parse_is_a_finding_not_an_internal_error(tmp_path):
    """``urlparse`` refuses an unclosed IPv6 bracket (``ValueError``); a rule file's text is a
    finding, never exit 4."""
    rules = tmp_path / "r.rules.yaml"
    rules.write_text("groups:\n- name: g\n  rules:\n  - alert: A\n    expr: up == 0\n    for: 5m\n"
                     "    labels: {severity: warning}\n"
                     "    annotations: {summary: s, description: d, runbook_url: 'http://[::1/x'}\n")
    result = run(rules, "--format", "json")
    assert result.exit_code in (0, 1), result.output
    found = [f for f in json.loads(result.stdout)["findings"] if f["check"] == "runbook-url-not-absolute"]
    assert found and "is not a valid URL" in found[0]["message"]
