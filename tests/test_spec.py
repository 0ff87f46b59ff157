"""Spec loading: the bundled spec loads; broken specs give every error as FILE:LINE:COL: path: message."""

from __future__ import annotations

import json
import subprocess
import sys

import jsonschema
import pytest
import yaml

from gpumon.spec import load_spec, parse_spec, schema

from .small_spec import BASE, errors_of, load


def test_bundled_spec_loads_with_dcgm_defaults(default_spec):
    assert default_spec.exporter.job == "dcgm-exporter"
    assert default_spec.exporter.scrape_interval == 15 and default_spec.exporter.collect_interval == 30
    assert default_spec.exporter.labels.identity == ("Hostname", "UUID", "gpu", "GPU_I_ID")
    required = {m.name for m in default_spec.required_metrics}
    assert {"DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED",
            "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"} <= required
    assert default_spec.metric("DCGM_FI_DEV_XID_ERRORS").presence == "sparse"
    assert ("release", "kube-prometheus-stack") in default_spec.prometheus_rule.labels


def test_bundled_spec_kinds_match_the_exporter_csv(default_spec):
    """Kinds come from dcgm-exporter's default-counters.csv, except where the field misbehaves
    (NVLINK_BANDWIDTH_TOTAL is typed counter but goes down: dcgm-exporter#417)."""
    from gpumon.fields import default_counters
    csv = default_counters()
    for m in default_spec.metrics:
        if m.name in csv and m.name != "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL":
            assert csv[m.name].kind == m.kind, m.name


def test_unknown_key_gets_did_you_mean(tmp_path):
    errs = errors_of(tmp_path, BASE.replace("  job: dcgm-exporter\n", "  job: dcgm-exporter\n  scrape_intervall: 15s\n"))
    assert errs == ["spec.yaml:4:3: exporter.scrape_intervall: unknown key 'scrape_intervall'; did you mean 'scrape_interval'?"]


def test_all_errors_at_once_in_file_order(tmp_path):
    text = BASE.replace("unit: celsius", "unit: celcius") + """\
  - name: DCGM_FI_DEV_GPU_TEMP
    kind: gauge
    unit: celsius
    presence: always
    range: [110, 5]
    thresholds:
      - {severity: warning, op: ">", value: 83, for: 5 minutes}
"""
    assert errors_of(tmp_path, text) == [
        "spec.yaml:7:11: metrics[0].unit: 'celcius' is not one of celsius, watts, millijoules, joules, percent, "
        "ratio, MHz, MiB, bytes, bytes_per_second, count, code, state, none; did you mean 'celsius'?",
        "spec.yaml:9:11: metrics[1].name: duplicate metric 'DCGM_FI_DEV_GPU_TEMP' (first at metrics[0])",
        "spec.yaml:12:15: metrics[1].presence: 'always' is not one of required, optional, sparse",
        "spec.yaml:13:12: metrics[1].range: range minimum 110 is above its maximum 5",
        "spec.yaml:15:54: metrics[1].thresholds[0].for: '5 minutes' is not a Prometheus duration (use e.g. 30s, 5m, 1h)",
    ]


def test_volatile_identity_label_and_timeout_rejected(tmp_path):
    text = BASE.replace("  job: dcgm-exporter\n", "  job: dcgm-exporter\n  scrape_interval: 15s\n"
                        "  scrape_timeout: 20s\n  labels:\n    node: instance\n")
    assert errors_of(tmp_path, text) == [
        "spec.yaml:5:19: exporter.scrape_timeout: scrape_timeout (20s) must not exceed scrape_interval (15s); "
        "Prometheus rejects such a scrape config",
        "spec.yaml:7:11: exporter.labels.node: 'instance' changes on restarts and with honor_labels; it must not "
        "identify a node or GPU (use Hostname/hostname, UUID, gpu, GPU_I_ID)",
    ]


def test_missing_required_key_and_typo_in_field_name(tmp_path):
    text = BASE.replace("DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_GPU_TMP").replace("    presence: required\n", "")
    assert errors_of(tmp_path, text) == [
        "spec.yaml:5:5: metrics[0]: 'presence' is a required property; add it: one of required, optional, sparse",
    ]  # the typo is a warning (tests/test_fields.py), shown once the spec loads
    # a missing key without a fixed list of values is named as before
    assert errors_of(tmp_path, BASE.replace("  job: dcgm-exporter\n", "  scrape_interval: 15s\n")) == [
        "spec.yaml:3:3: exporter: 'job' is a required property"]


def test_semantic_rules_on_kinds(tmp_path):
    text = BASE.replace("presence: required", "presence: required\n    frozen_check: true")
    text += ("  - name: DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION\n    kind: counter\n    unit: millijoules\n"
             "    presence: required\n    thresholds: [{severity: warning, op: '>', value: 1}]\n")
    assert errors_of(tmp_path, text) == [
        "spec.yaml:9:19: metrics[0].frozen_check: frozen_check needs kind: counter (it checks that the counter increases)",
        "spec.yaml:14:18: metrics[1].thresholds[0]: a threshold on a counter compares an ever-growing total; add "
        "`rate: 5m` to compare its per-second rate (reset safe)",
    ]


def test_rate_thresholds_on_counters(tmp_path):
    """Counters take thresholds on their per-second rate, with a window >= 2 x max(scrape, collect)
    (issue 11, item 9); a gauge cannot take a rate."""
    counter = ("  - name: DCGM_FI_DEV_ECC_SBE_VOL_TOTAL\n    kind: counter\n    unit: count\n    presence: optional\n"
               "    thresholds: [{alert: GpuEccStorm, severity: warning, op: '>', value: 10, rate: 30s}]\n")
    assert errors_of(tmp_path, BASE + counter) == [
        "spec.yaml:13:84: metrics[1].thresholds[0].rate: rate window 30s is shorter than 2 x max(scrape, collect "
        "interval) = 1m: rate() would often see one sample and return nothing"]
    spec = parse_spec(BASE + counter.replace("rate: 30s", "rate: 5m"))
    assert spec.metrics[1].thresholds[0].rate == 300
    gauge = BASE.replace("presence: required", "presence: required\n    thresholds: [{severity: warning, op: '>', value: 1, rate: 5m}]")
    assert errors_of(tmp_path, gauge)[0].endswith("rate needs kind: counter (a gauge is compared as it is)")


def test_yaml_syntax_error_and_non_mapping(tmp_path):
    assert errors_of(tmp_path, "version: 1\nexporter:\n  job: x\n   bad: 1\n") == [
        "spec.yaml:4:7: <root>: YAML syntax error: mapping values are not allowed here"]
    assert errors_of(tmp_path, "- just\n- a list\n") == [
        "spec.yaml:1:1: <root>: the spec must be a YAML mapping (see gpumon.yaml)"]
    assert errors_of(tmp_path, BASE + "exporter:\n  job: y\n")[0].startswith("spec.yaml:9:1: <root>: YAML syntax error")


def test_cli_prints_errors_and_exits_2_without_traceback(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(BASE.replace("gauge", "gage"))
    proc = subprocess.run([sys.executable, "-m", "gpumon.cli", "render", str(path), "-o", str(tmp_path / "out")],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert f"{path}:6:11: metrics[0].kind: 'gage' is not one of gauge, counter; did you mean 'gauge'?" in proc.stderr
    assert not (tmp_path / "out").exists()


def test_schema_is_valid_draft7_and_accepts_the_bundled_spec(default_spec):
    jsonschema.Draft7Validator.check_schema(schema())
    doc = yaml.safe_load(open(default_spec.path, encoding="utf-8"))
    jsonschema.Draft7Validator(schema()).validate(json.loads(json.dumps(doc)))


def test_modeline_points_to_the_shipped_schema(root):
    first = (root / "gpumon.yaml").read_text().splitlines()[0]
    assert first == "# yaml-language-server: $schema=./generator/gpumon/schema/gpumon.schema.json"
    assert (root / "generator/gpumon/schema/gpumon.schema.json").is_file()


KUBE = """\
kubernetes:
  kube_state_metrics:
    job: kube-state-metrics
  exporter:
    namespace: gpu-operator
    daemonset: nvidia-dcgm-exporter
"""


def test_specs_differing_only_in_a_section_are_different_models(tmp_path):
    """Every section is part of the model: two specs that differ only in ``kubernetes`` (or
    ``dashboards``) compare and hash unequal, so nothing cached per spec mixes them up."""
    plain = parse_spec(BASE, "spec.yaml")
    kube = parse_spec(BASE + KUBE, "spec.yaml")
    dash = parse_spec(BASE + "dashboards:\n  title_prefix: 'prod: '\n", "spec.yaml")
    assert plain.kubernetes is None and kube.kubernetes is not None
    assert dash.dashboards.title_prefix == "prod: "
    assert len({plain, kube, dash}) == 3


def test_dashboards_of_one_spec_never_show_another_specs_alerts():
    """Regression: rendering a spec without a kubernetes section, then the same spec with one,
    used to hand the second the first one's alert names (a cache keyed by a spec whose equality
    ignored the section), so its dashboards missed the kubernetes alerts."""
    from gpumon import dashboards
    from gpumon.dashboards.output import to_json
    from gpumon.rules import all_rules, build_groups

    plain = parse_spec(BASE, "spec.yaml")
    kube = parse_spec(BASE + KUBE, "spec.yaml")
    for spec in (plain, kube):
        text = "".join(to_json(m) for m in dashboards.build_all(spec, build_groups(spec)).values())
        alerts = {r.alert for r in all_rules(spec) if r.alert}
        assert all(name in text for name in alerts), sorted(a for a in alerts if a not in text)
    kube_only = {r.alert for r in all_rules(kube) if r.alert} - {r.alert for r in all_rules(plain) if r.alert}
    assert kube_only and all(name not in "".join(map(to_json, dashboards.build_all(plain, build_groups(plain)).values()))
                         for name in kube_only)


def test_nothing_reads_the_raw_document_after_loading():
    assert not hasattr(parse_spec(BASE, "spec.yaml"), "raw")


def test_threshold_that_can_never_fire_is_a_spec_error(tmp_path):
    """Thresholds only see plausible readings: > 183 on [5, 110] renders a dead alert (issue 11, item 10)."""
    text = BASE.replace("presence: required", "presence: required\n    range: [5, 110]\n    thresholds:\n"
                        "      - {alert: GpuTempDead, severity: critical, op: '>', value: 183}\n"
                        "      - {alert: GpuTempEdge, severity: warning, op: '>=', value: 110}\n"
                        "      - {alert: GpuTempCold, severity: warning, op: '<', value: 5}\n"
                        "      - {alert: GpuTempColdEdge, severity: warning, op: '<=', value: 5}")
    assert errors_of(tmp_path, text) == [
        "spec.yaml:11:66: metrics[0].thresholds[0].value: threshold > 183 can never fire: thresholds only see "
        "plausible readings and the plausible maximum 110 does not pass it; lower the threshold or widen `range`",
        "spec.yaml:13:65: metrics[0].thresholds[2].value: threshold < 5 can never fire: thresholds only see "
        "plausible readings and the plausible minimum 5 does not pass it; raise the threshold or widen `range`",
    ]
    # without a maximum only the DCGM blank codes bound the readings
    text = BASE.replace("presence: required", "presence: required\n    thresholds:\n"
                        "      - {alert: GpuTempBlank, severity: warning, op: '>', value: 140737488355328}")
    assert "can never fire" in errors_of(tmp_path, text)[0]


def test_threshold_every_plausible_reading_crosses_is_a_spec_error(tmp_path):
    """> -49 on [-44, 224] fires on every healthy GPU, and its rendered tests could find no
    healthy reading (found by the spec fuzzer); the edges themselves are fine."""
    text = BASE.replace("presence: required", "presence: required\n    range: [5, 110]\n    thresholds:\n"
                        "      - {alert: GpuTempAlways, severity: critical, op: '>', value: 4}\n"
                        "      - {alert: GpuTempAlwaysToo, severity: warning, op: '>=', value: 5}\n"
                        "      - {alert: GpuTempEdge, severity: info, op: '>', value: 5}\n"
                        "      - {alert: GpuTempCold, severity: warning, op: '<', value: 111}\n"
                        "      - {alert: GpuTempColdEdge, severity: info, op: '<', value: 110}")
    errors = errors_of(tmp_path, text)
    always = [e for e in errors if "always fires:" in e]
    assert [e.split(": ")[1] for e in always] == ["metrics[0].thresholds[0].value", "metrics[0].thresholds[1].value",
                                                 "metrics[0].thresholds[3].value"], errors
    assert "threshold > 4 always fires: the plausible minimum 5 already crosses it" in always[0]
    assert "lower the threshold or narrow `range`" in always[2]


def test_counter_range_above_zero_is_a_spec_error(tmp_path):
    """Counters restart from 0 with the exporter: a minimum above 0 flags every restart as
    implausible (the fuzzer's XID counter with range [797, null] paged a healthy fleet)."""
    text = BASE + ("  - {name: DCGM_FI_DEV_ECC_DBE_VOL_TOTAL, kind: counter, unit: count, presence: optional,\n"
                   "     range: [797, null]}\n")
    assert errors_of(tmp_path, text) == [
        "spec.yaml:10:14: metrics[1].range[0]: a counter's range cannot start above 0 (797): counters restart from 0 "
        "with the exporter, and every restart would read as implausible"]
    assert parse_spec(text.replace("[797, null]", "[0, null]"), "spec.yaml").metrics[1].range_min == 0


def test_one_alert_name_at_two_severities_is_a_spec_error(tmp_path):
    """kube-prometheus-stack's inhibit rule (equal: [namespace, alertname]) would let one GPU's
    critical mute every GPU's warning of the same name (issue 11, item 11)."""
    text = BASE.replace("presence: required", "presence: required\n    thresholds:\n"
                        "      - {alert: GpuTempHot, severity: warning, op: '>', value: 83}\n"
                        "      - {alert: GpuTempHot, severity: critical, op: '>', value: 90}\n"
                        "      - {severity: warning, op: '>', value: 80}\n"
                        "      - {severity: critical, op: '>', value: 95}\n"
                        "      - {alert: GpuLost, severity: critical, op: '>', value: 99}")
    errors = errors_of(tmp_path, text)
    assert errors[0].startswith("spec.yaml:11:17: metrics[0].thresholds[1].alert: alert 'GpuTempHot' is already "
                                "used at severity warning (metrics[0].thresholds[0].alert); give the critical level")
    # default names derive from the metric: two unnamed levels of one direction collide
    assert errors[1].startswith("spec.yaml:13:20: metrics[0].thresholds[3].severity: alert 'GpuGpuTempHigh' is "
                                "already used at severity warning")
    assert errors[2] == ("spec.yaml:14:17: metrics[0].thresholds[4].alert: alert name 'GpuLost' is one of "
                         "gpumon's own alerts; name the threshold differently")
    assert len(errors) == 3


def test_builtin_alert_names_are_the_rendered_ones(default_spec, root):
    from gpumon.rules import all_rules
    from gpumon.alertnames import builtin_alerts
    specs = (default_spec, load_spec(root / "examples" / "kubernetes.yaml"), load_spec(root / "examples" / "mixed-fleet.yaml"))
    threshold_names = {t.alert for s in specs for m in s.metrics for t in m.thresholds}
    rendered = {r.alert for s in specs for r in all_rules(s) if r.alert}
    assert rendered - threshold_names == builtin_alerts()


def test_relative_runbook_url_needs_saying_so(tmp_path):
    """A relative runbook base is a broken link in every notification (issue 11, item 12)."""
    text = BASE + "alerts:\n  runbook_url: ../runbooks\n"
    assert errors_of(tmp_path, text) == [
        "spec.yaml:10:16: alerts.runbook_url: runbook_url '../runbooks' is relative: Alertmanager notifications and "
        "Grafana carry it verbatim, so every link is broken; use an absolute base (https://…/output/runbooks), or set "
        "runbook_url_relative: true if the links are only read in a git forge's view of output/rules/"]
    ok = parse_spec(text + "  runbook_url_relative: true\n")
    assert ok.alerts.runbook_url == "../runbooks"
    # no base at all: alerts carry no runbook_url rather than a broken one
    from gpumon.rules import all_rules
    bare = parse_spec(BASE)
    assert all("runbook_url" not in dict(r.annotations) for r in all_rules(bare) if r.alert)


@pytest.mark.parametrize("url", ["javascript:alert(1)//", "JavaScript:x", "data:text/html,x", "file:///etc/passwd",
                                 "vbscript:x", "docs:8080/runbooks"])
def test_runbook_links_are_http_or_relative(tmp_path, url):
    """Every notification and Grafana show runbook_url as a link: a javascript:, data: or file: base
    is a script or a local file one click away, relative flag or not; the same for a link
    annotation an override sets."""
    base = BASE + f"alerts:\n  runbook_url: '{url}'\n  runbook_url_relative: true\n"
    scheme = url.split(":", 1)[0]
    assert errors_of(tmp_path, base) == [
        f"spec.yaml:10:16: alerts.runbook_url: runbook_url {url!r} has the scheme {scheme!r}; runbook links must be "
        "http(s) (https://…/output/runbooks) or, with runbook_url_relative: true, a relative path"]
    over = BASE + f"overrides:\n  GpuLost: {{annotations: {{runbook_url: '{url}', note: 'Note: any text'}}}}\n"
    errors = errors_of(tmp_path, over)
    assert len(errors) == 1 and "overrides.GpuLost.annotations.runbook_url:" in errors[0], errors
    for good in ("https://wiki.example/runbooks", "HTTP://wiki.example/r", "../runbooks", "runbooks"):
        parse_spec(BASE + f"alerts:\n  runbook_url: '{good}'\n  runbook_url_relative: true\n")
        parse_spec(BASE + f"overrides:\n  GpuLost: {{annotations: {{runbook_url: '{good}'}}}}\n")


def test_alerts_carry_the_namespace_label(tmp_path):
    from gpumon.rules import all_rules
    spec = parse_spec(BASE)
    assert {r.label_map.get("namespace") for r in all_rules(spec) if r.alert} == {"monitoring"}
    spec = parse_spec(BASE + "prometheus_rule:\n  namespace: gpu-ops\n")
    assert {r.label_map.get("namespace") for r in all_rules(spec) if r.alert} == {"gpu-ops"}
    spec = parse_spec(BASE + "alerts:\n  namespace: null\n")
    assert {r.label_map.get("namespace") for r in all_rules(spec) if r.alert} == {None}


def test_xid_policy_is_checked(tmp_path):
    text = BASE.replace("presence: required", "presence: required\n    xid: {critical: [79], info: [79, 13]}")
    assert errors_of(tmp_path, text) == [
        "spec.yaml:9:10: metrics[0].xid: an XID policy needs unit: code (the value is the code of the last XID)",
        "spec.yaml:9:34: metrics[0].xid.info[0]: XID 79 is already listed under critical"]
    # the XID field is sparse; a spec needs one required field beside it (issue #15)
    spec = parse_spec(BASE + "  - {name: DCGM_FI_DEV_XID_ERRORS, kind: gauge, unit: code, presence: sparse,\n"
                             "     xid: {window: 10m, ignore: [13]}}\n")
    policy = spec.metrics[1].xid
    assert policy.window == 600 and policy.ignore == (13,) and 79 in policy.critical and policy.other == "warning"


def test_one_legacy_name_belongs_to_one_field(tmp_path):
    """Found by the spec fuzzer: a 1.x name under two metrics was served, counted and tested twice."""
    text = BASE + ("    legacy_names: [dcgm_gpu_temp]\n  - name: DCGM_FI_DEV_POWER_USAGE\n    kind: gauge\n"
                   "    unit: watts\n    presence: required\n    legacy_names: [dcgm_power_usage, dcgm_gpu_temp]\n")
    assert errors_of(tmp_path, text) == [
        "spec.yaml:14:38: metrics[1].legacy_names[1]: 'dcgm_gpu_temp' is already a legacy name of metrics[0]; "
        "a 1.x name belongs to one field"]


def test_a_flapping_window_too_short_for_the_ratio_is_a_spec_error(tmp_path):
    """Found by the spec fuzzer: GpuExporterFlapping needs one success in int(1/ratio) + 1 scrapes and
    more than two changes in the window; 30s of 15s scrapes hold 2, so it could never fire (its
    generated test failed)."""
    text = BASE + "alerts:\n  flapping_min_up_ratio: 0.8\n  flapping_window: 30s\n"
    errors = [e for e in errors_of(tmp_path, text) if "flapping_min_up_ratio 0.8 means" in e]
    assert errors == ["spec.yaml:10:26: alerts.flapping_min_up_ratio: flapping_min_up_ratio 0.8 means one success in 2 "
                      "scrapes, but flapping_window (30s) holds only 2 scrapes: GpuExporterFlapping could never fire; "
                      "raise the ratio or lengthen the window"], errors_of(tmp_path, text)


def test_rule_group_intervals_stay_under_the_lookback(tmp_path):
    """A slow or gaps group evaluated less often than Prometheus' 5 min lookback loses its records
    between evaluations: an error at the key, saying why; 4m and the defaults load."""
    text = BASE.replace("metrics:\n", "alerts:\n  slow_group_interval: 5m\n  gaps_group_interval: 10m\nmetrics:\n")
    errs = errors_of(tmp_path, text)
    assert [e.split(": ")[0:2] for e in errs] == [["spec.yaml:5:24", "alerts.slow_group_interval"],
                                                 ["spec.yaml:6:24", "alerts.gaps_group_interval"]], errs
    assert all("5 minute lookback" in e and "vmalert" in e for e in errs), errs
    ok = load(tmp_path, BASE.replace("metrics:\n", "alerts:\n  slow_group_interval: 4m\n  gaps_group_interval: 4m\nmetrics:\n"))
    assert (ok.alerts.slow_group_interval, ok.alerts.gaps_group_interval) == (240.0, 240.0)
    assert load(tmp_path, BASE).alerts.gaps_group_interval == 180.0


def test_a_name_the_schema_refuses_is_explained_in_words(tmp_path):
    """A name outside the schema's pattern said only "'Acme GPU' does not match '^[a-z][a-z0-9-]*$'":
    the common name patterns are said in words, with the pattern after them."""
    text = BASE.replace("version: 1\n", "version: 1\nname: Acme GPU\n").replace(
        "  job: dcgm-exporter\n", "  job: dcgm-exporter\n  labels:\n    node: kube-node\n")
    assert errors_of(tmp_path, text) == [
        "spec.yaml:2:7: name: 'Acme GPU' must be lower-case letters, digits and '-', starting with a letter "
        "(e.g. acme-gpu) (pattern ^[a-z][a-z0-9-]*$)",
        "spec.yaml:6:11: exporter.labels.node: 'kube-node' must be a Prometheus label name: letters, digits and "
        "'_', not starting with a digit (pattern ^[a-zA-Z_][a-zA-Z0-9_]*$)",
    ]
