"""gpumon lint on tests/lint_corpus/: one small bad file per check, each giving exactly the
expected finding(s) at the expected position, and nothing else."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpumon import lint as lintmod
from gpumon.lint import lint

CORPUS = Path(__file__).resolve().parent / "lint_corpus"

#: file -> [(check, severity, line, column, JSON pointer or None)]
EXPECTED = {
    "rule_invalid.yaml": [("rule-invalid", "error", 4, 5, None)],
    "promql_syntax.yaml": [("promql-syntax", "error", 5, 11, None)],
    "unknown_metric.yaml": [("unknown-metric", "error", 5, 41, None), ("unknown-metric", "error", 9, 9, None)],
    "counter_fn_on_gauge.yaml": [("counter-fn-on-gauge", "error", 5, 41, None),
                                 ("counter-fn-on-gauge", "error", 8, 41, None)],
    "delta_on_counter.yaml": [("delta-on-counter", "error", 5, 41, None), ("delta-on-counter", "error", 9, 9, None)],
    "absent_no_selector.yaml": [("absent-no-selector", "error", 5, 11, None)],
    "absent_regex_matcher.yaml": [("absent-regex-matcher", "warning", 5, 69, None)],
    "for_missing.yaml": [("for-missing", "warning", 4, 5, None)],
    "rate_window.yaml": [("rate-window-too-small", "error", 5, 41, None),
                         ("rate-window-too-small", "warning", 7, 41, None)],
    "volatile_identity.yaml": [("volatile-identity", "warning", 5, 19, None)],
    # a `kind: List` holding a PrometheusRule (kubectl get -o yaml)
    "recording_cardinality.yaml": [("recording-rule-high-cardinality", "warning", 17, 15, None)],
    "mig_sum.yaml": [("mig-sum-without-uuid", "warning", 5, 11, None)],
    "annotation_labels.yaml": [("annotation-label-missing", "error", 8, 23, None)],
    # a relative link; an absolute one and the spec's declared relative base pass
    "runbook_url.yaml": [("runbook-url-not-absolute", "warning", 10, 20, None)],
    # absolute links on a placeholder host or with placeholder text: their own check, not "not absolute"
    "runbook_url_placeholder.yaml": [("runbook-url-placeholder", "warning", 11, 20, None),
                                     ("runbook-url-placeholder", "warning", 18, 20, None)],
    "label_name_mismatch.yaml": [("label-name-mismatch", "error", 5, 24, None)],
    "rule_selector_labels.yaml": [("prometheusrule-selector-labels", "error", 21, 3, None)],
    # YAML aliases expanded as kubectl does: 95 copies of one group pass the annotation limit
    "object_size.yaml": [("object-too-large-to-apply", "error", 6, 1, None)],
    "dashboard_datasource_placeholder.json": [
        ("dashboard-datasource-placeholder", "error", 41, 9, "/panels/0/datasource/uid"),
        ("dashboard-datasource-placeholder", "error", 105, 3, "/__inputs")],
    "dashboard_hardcoded_datasource.json": [
        ("dashboard-hardcoded-datasource", "warning", 97, 13, "/panels/1/targets/0/datasource/uid")],
    "dashboard_duplicate_panel_id.json": [("dashboard-duplicate-panel-id", "error", 74, 7, "/panels/1/id")],
    "dashboard_overlapping_panels.json": [("dashboard-overlapping-panels", "warning", 77, 7, "/panels/1/gridPos")],
    "dashboard_deprecated_panel.json": [("dashboard-deprecated-panel", "error", 31, 7, "/panels/0/type")],
    "dashboard_variable_anchor.json": [("dashboard-variable-anchor", "warning", 19, 9, "/templating/list/1/query")],
    "dashboard_promql_syntax.json": [("promql-syntax", "error", 68, 11, "/panels/0/targets/0/expr")],
    "dashboard_label_name_mismatch.json": [
        ("label-name-mismatch", "error", 69, 11, "/panels/0/targets/0/legendFormat")],
    "dashboard_volatile_legend.json": [("volatile-identity", "warning", 69, 11, "/panels/0/targets/0/legendFormat")],
    # a dashboard in a ConfigMap: positions are lines of the YAML file
    "configmap_dashboard.yaml": [("dashboard-deprecated-panel", "error", 83, 11, "/panels/1/type")],
    "clean_dashboard.json": [],
}


def _found(report):
    return sorted((f.check, f.severity, f.location.line, f.location.column, f.location.pointer)
                  for f in report.findings)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus_file(name, default_spec):
    report = lint([CORPUS / name], default_spec)
    assert _found(report) == sorted(EXPECTED[name]), "\n".join(f"{f.location} {f.check}: {f.message}"
                                                               for f in report.findings)
    for f in report.findings:
        assert f.location.file == str(CORPUS / name)


def test_every_check_has_a_corpus_file():
    covered = {check for items in EXPECTED.values() for check, *_ in items}
    assert covered == set(lintmod.check_ids())
    assert sorted(p.name for p in CORPUS.iterdir()) == sorted(EXPECTED)


def test_every_check_module_documents_itself():
    for check_id, severity, doc in lintmod.describe():
        assert doc.startswith(f"``{check_id}``"), check_id
        assert "Why:" in doc and "Silence:" in doc, check_id
        assert severity in ("error", "warning", "info")


def test_directory_walk_finds_every_corpus_file(default_spec):
    report = lint([CORPUS], default_spec)
    assert len(report.findings) == sum(len(v) for v in EXPECTED.values())


def test_findings_carry_useful_text(default_spec):
    report = lint([CORPUS / "counter_fn_on_gauge.yaml", CORPUS / "unknown_metric.yaml"], default_spec)
    xid = next(f for f in report.findings if f.check == "counter-fn-on-gauge" and "increase" in f.message)
    assert "increase() on DCGM_FI_DEV_XID_ERRORS, a gauge" in xid.message and "XID" in xid.message
    assert xid.subject == "alert GpuXidErrorsIncreasing"
    messages = sorted(f.message + " | " + f.hint for f in report.findings if f.check == "unknown-metric")
    assert "did you mean DCGM_FI_DEV_GPU_TEMP?" in messages[0]
    assert "dcgm_gpu_temp is a dcgm-exporter 1.x name" in messages[1] and "use DCGM_FI_DEV_GPU_TEMP" in messages[1]


def test_a_datasource_uid_the_spec_pins_is_not_hardcoded(default_spec):
    """``dashboards.datasource_uid`` is a key the schema accepts, and the check honours it (it used
    to read keys the schema rejects, so the documented exemption could never apply)."""
    from gpumon.spec import parse_spec

    text = Path(default_spec.path).read_text(encoding="utf-8")
    head = "\ndashboards:"
    assert head in text
    line_end = text.index("\n", text.index(head) + 1)
    pinned = parse_spec(text[:line_end] + "\n  datasource_uid: PBFA97CFB590B2093" + text[line_end:], default_spec.path)
    assert pinned.dashboards.datasource_uid == "PBFA97CFB590B2093"
    name = "dashboard_hardcoded_datasource.json"
    assert [f.check for f in lint([CORPUS / name], default_spec).findings] == ["dashboard-hardcoded-datasource"]
    assert lint([CORPUS / name], pinned).findings == []
