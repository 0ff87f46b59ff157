"""Sources per metric (issue 13): presets, custom mappings, unit conversion and their spec errors."""

from __future__ import annotations

import pytest

from gpumon.spec.presets import conversion
from gpumon.spec import load_spec

from .small_spec import BASE, errors_of, load


def test_presets_resolve_to_series_labels_and_units(tmp_path):
    spec = load(tmp_path, BASE + "    legacy_names: [dcgm_gpu_temp_old]\n"
                "    sources: [dcgm-exporter-1.x, nvidia_gpu_exporter]\n"
                "  - {name: DCGM_FI_DEV_GPU_UTIL, kind: gauge, unit: percent, presence: required,\n"
                "     sources: [{preset: nvidia_gpu_exporter, job: nvsmi}]}\n"
                "  - {name: DCGM_FI_DEV_CLOCKS_EVENT_REASONS, kind: gauge, unit: state, presence: optional,\n"
                "     sources: [dcgm-renames]}\n")
    old, smi = spec.metrics[0].sources
    # the metric's own legacy name wins over the preset's table; 1.x keeps the exporter's job and node label
    assert (old.series, old.job, old.gpu, old.node, old.gpu_index, old.label) == \
        ("dcgm_gpu_temp_old", "dcgm-exporter", "uuid", "Hostname", "gpu", "dcgm-exporter-1.x")
    assert (smi.series, smi.job, smi.gpu, smi.node, smi.gpu_index, smi.convert, smi.gpu_prefix) == \
        ("nvidia_smi_temperature_gpu", "nvidia-gpu-exporter", "uuid", "instance", None, ("*", 1.0), "add")
    util = spec.metrics[1].sources[0]
    assert (util.series, util.job, util.unit, util.convert) == ("nvidia_smi_utilization_gpu_ratio", "nvsmi", "ratio",
                                                                ("*", 100.0))
    renamed = spec.metrics[2].sources[0]
    assert (renamed.series, renamed.job, renamed.gpu, renamed.node) == \
        ("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "dcgm-exporter", "UUID", "Hostname")


def test_a_spec_without_sources_has_none(default_spec):
    assert all(m.sources == () for m in default_spec.metrics)


def test_custom_source_with_mapping_and_conversion(tmp_path):
    spec = load(tmp_path, BASE.replace("celsius", "watts").replace("GPU_TEMP", "POWER_USAGE")
                + "    sources:\n      - {name: smi_power_mw, job: smi, unit: milliwatts, gpu_prefix: add,\n"
                  "         labels: {gpu: gpu_uuid, node: node_name, gpu_index: index}}\n")
    src = spec.metrics[0].sources[0]
    assert (src.series, src.label, src.gpu, src.node, src.gpu_index, src.gpu_prefix, src.convert) == \
        ("smi_power_mw", "smi_power_mw", "gpu_uuid", "node_name", "index", "add", ("/", 1000.0))


def test_source_errors_have_positions(tmp_path):
    text = BASE + ("    sources:\n"
                   "      - nvidia_gpu_exportr\n"
                   "      - {name: foo_temp, job: other}\n"
                   "      - {name: x_temp, unit: ratio}\n"
                   "      - dcgm-renames\n"
                   "      - {name: DCGM_FI_DEV_GPU_TEMP}\n"
                   "      - {name: y, job: j, labels: {gpu: instance, node: instance}}\n"
                   "      - {name: z, label: dcgm-exporter}\n")
    assert errors_of(tmp_path, text) == [
        "spec.yaml:10:9: metrics[0].sources[0]: unknown source preset 'nvidia_gpu_exportr'; "
        "did you mean 'nvidia_gpu_exporter'?",
        "spec.yaml:11:9: metrics[0].sources[1]: source 'foo_temp' (job 'other') does not say which label holds the "
        "GPU UUID: add labels: {gpu: <label>} (e.g. uuid); without it no reading can be matched to a GPU",
        "spec.yaml:11:9: metrics[0].sources[1]: source 'foo_temp' (job 'other') does not say which label holds the "
        "node: add labels: {node: <label>}, or node: instance for the target's address without the port",
        "spec.yaml:12:30: metrics[0].sources[2].unit: source unit 'ratio' cannot convert to the metric's unit "
        "'celsius'",
        "spec.yaml:13:9: metrics[0].sources[3]: preset 'dcgm-renames' has no series for 'DCGM_FI_DEV_GPU_TEMP'; it "
        "covers DCGM_EXP_CLOCK_EVENTS_COUNT, DCGM_FI_DEV_CLOCKS_EVENT_REASONS, DCGM_FI_DEV_CLOCK_THROTTLE_REASONS, "
        "DCGM_FI_EXP_CLOCK_THROTTLE_REASONS_COUNT (or give `name:`)",
        "spec.yaml:14:9: metrics[0].sources[4]: 'DCGM_FI_DEV_GPU_TEMP' under the exporter's job is the metric itself, "
        "not another source",
        "spec.yaml:15:41: metrics[0].sources[5].labels.gpu: 'instance' names a target or pod, not a GPU",
        "spec.yaml:16:9: metrics[0].sources[6]: source label 'dcgm-exporter' is the primary's; give `label:` "
        "another value",
    ]


def test_duplicate_sources_are_errors(tmp_path):
    text = BASE + "    sources: [nvidia_gpu_exporter, {preset: nvidia_gpu_exporter}]\n"
    errors = errors_of(tmp_path, text)
    assert errors == ["spec.yaml:9:36: metrics[0].sources[1]: 'nvidia_smi_temperature_gpu' (job "
                      "'nvidia-gpu-exporter') is already sources[0]"]


def test_schema_rejects_unknown_source_keys(tmp_path):
    errors = errors_of(tmp_path, BASE + "    sources: [{preset: nvidia_gpu_exporter, jobb: x}]\n")
    assert errors == ["spec.yaml:9:45: metrics[0].sources[0].jobb: unknown key 'jobb'; did you mean 'job'?"]


def test_unit_conversions():
    assert conversion("ratio", "percent") == ("*", 100.0)
    assert conversion("bytes", "MiB") == ("/", 1048576.0)
    assert conversion("milliwatts", "watts") == ("/", 1000.0)
    assert conversion("celsius", "celsius") == ("*", 1.0)
    assert conversion("ratio", "celsius") is None


def test_cli_exits_2_on_source_errors(tmp_path):
    import subprocess
    import sys
    path = tmp_path / "spec.yaml"
    path.write_text(BASE + "    sources: [{name: t, unit: bytes}]\n")
    proc = subprocess.run([sys.executable, "-m", "gpumon.cli", "render", str(path), "-o", str(tmp_path / "o")],
                          capture_output=True, text=True)
    assert proc.returncode == 2, proc.stderr
    assert "metrics[0].sources[0].unit: source unit 'bytes' cannot convert" in proc.stderr + proc.stdout


# --------------------------------------------------------------------------- rules


SOURCED = BASE + """\
    range: [5, 110]
    thresholds: [{alert: GpuTemperatureHigh, severity: warning, op: ">", value: 83}]
    legacy_names: [dcgm_gpu_temp]
    sources: [dcgm-exporter-1.x, nvidia_gpu_exporter]
  - name: DCGM_FI_DEV_POWER_USAGE
    kind: gauge
    unit: watts
    presence: required
"""


def test_no_sources_no_source_rules(default_spec):
    from gpumon.rules import all_rules
    from gpumon.rules import names
    rules = all_rules(default_spec)
    assert not [r for r in rules if names.NORMALIZED in r.expr or r.record == names.NORMALIZED]
    assert "GpuMetricFallbackServing" not in {r.alert for r in rules}


def test_normalized_rule_primary_first_then_fallbacks_per_uuid(tmp_path):
    from gpumon.rules import all_rules, names
    spec = load(tmp_path, SOURCED)
    rules = all_rules(spec)
    norm = [r for r in rules if r.record == names.NORMALIZED]
    assert [r.label_map for r in norm] == [{"dcgm_field": "DCGM_FI_DEV_GPU_TEMP"}]
    expr = norm[0].expr
    parts = expr.split("\nor on (job, UUID)\n")
    assert len(parts) == 3   # primary, 1.x, nvidia_gpu_exporter: in spec order
    assert 'DCGM_FI_DEV_GPU_TEMP{job="dcgm-exporter"}' in parts[0] and '"source", "dcgm-exporter"' in parts[0]
    assert 'dcgm_gpu_temp{job="dcgm-exporter"}' in parts[1] and '"UUID", "$1", "uuid", "(.+)"' in parts[1]
    assert 'nvidia_smi_temperature_gpu{job="nvidia-gpu-exporter"}' in parts[2]
    assert '"Hostname", "$1", "instance", "(.+?)(?::[0-9]+)?"' in parts[2]
    assert '"UUID", "GPU-$1", "uuid", "(?:GPU-)?(.+)"' in parts[2]     # nvidia_gpu_exporter drops NVML's prefix
    assert '"job", "dcgm-exporter", "", ""' in parts[2]
    # thresholds and implausible readings read the normalized series; the field without sources does not
    high = next(r for r in rules if r.alert == "GpuTemperatureHigh")
    assert f'{names.NORMALIZED}{{job="dcgm-exporter",dcgm_field="DCGM_FI_DEV_GPU_TEMP"}} >= 5 <= 110' in high.expr
    power = next(r for r in rules if r.record == names.node_sum("DCGM_FI_DEV_POWER_USAGE"))
    assert names.NORMALIZED not in power.expr
    # the 1.x name is a served source now: the legacy-names page is not rendered for it
    assert "GpuExporterLegacyNames" not in {r.alert for r in rules}
    fallback = [r for r in rules if r.alert == "GpuMetricFallbackServing"]
    assert len(fallback) == 1 and 'source!="dcgm-exporter"' in fallback[0].expr


def test_source_values_are_quoted(tmp_path):
    """A job holding a quote or a ``$`` stays one value (promqltext.quote; ``$$`` in replacements)."""
    from gpumon.rules import all_rules, names
    text = SOURCED.replace("job: dcgm-exporter", "job: 'dc\"gm$1'").replace(
        "sources: [dcgm-exporter-1.x, nvidia_gpu_exporter]", "sources: [{preset: nvidia_gpu_exporter, job: 'a\"b'}]")
    spec = load(tmp_path, text)
    norm = next(r for r in all_rules(spec) if r.record == names.NORMALIZED)
    assert 'nvidia_smi_temperature_gpu{job="a\\"b"}' in norm.expr
    assert '"job", "dc\\"gm$$1", "", ""' in norm.expr
    import promql_parser
    promql_parser.parse(norm.expr)


def test_sourced_rules_pass_promtool_check(tmp_path):
    import shutil
    import subprocess
    from gpumon.rules import build_groups
    from gpumon.rules.output import files
    spec = load(tmp_path, SOURCED)
    path = tmp_path / "rules.yaml"
    path.write_text(files(spec, build_groups(spec))["rules/gpumon.rules.yaml"])
    for promtool in (shutil.which("promtool"),):
        if promtool:
            proc = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True)
            assert proc.returncode == 0, proc.stdout + proc.stderr


# --------------------------------------------------------------------------- generated promtool tests

ROOT = __import__("pathlib").Path(__file__).resolve().parent.parent
MIXED = ROOT / "examples" / "mixed-fleet.yaml"


def _render_to(spec_path, out):
    from gpumon.render import render
    spec = load_spec(spec_path)
    for rel, text in render(spec).items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text(text, "utf-8")
    return out


def _promtool(promtool, path):
    import subprocess
    return subprocess.run([promtool, "test", "rules", path.name], cwd=path.parent, capture_output=True, text=True,
                          timeout=600)


@pytest.fixture(scope="module")
def mixed_out(tmp_path_factory):
    return _render_to(MIXED, tmp_path_factory.mktemp("mixed"))


@pytest.fixture(scope="module")
def relabelled_out(tmp_path_factory):
    """The mixed fleet with a cluster label, ``hostname`` and a custom source without the GPU-
    prefix whose node label has another name."""
    text = MIXED.read_text("utf-8").replace("  collect_interval: 30s\n", "  collect_interval: 30s\n  labels: "
                                            "{node: hostname, cluster: cluster}\n")
    text = text.replace("sources: [dcgm-exporter-1.x, nvidia_gpu_exporter]   # nvidia_smi_memory_used_bytes",
                        "sources: [{name: smi_fb_used_bytes, job: smi, unit: bytes, gpu_prefix: add, labels: "
                        "{gpu: gpu_uuid, node: node_name, gpu_index: index}}]   #")
    folder = tmp_path_factory.mktemp("relabelled")
    (folder / "spec.yaml").write_text(text, "utf-8")
    assert load_spec(folder / "spec.yaml").metric("DCGM_FI_DEV_FB_USED").sources[0].gpu_prefix == "add"
    return _render_to(folder / "spec.yaml", folder / "out")


@pytest.mark.slow
@pytest.mark.parametrize("which", ["mixed_out", "relabelled_out"])
def test_generated_source_tests_pass(which, request, promtool):
    out = request.getfixturevalue(which)
    for path in sorted((out / "tests").glob("*.test.yaml")):
        result = _promtool(promtool, path)
        assert result.returncode == 0, f"{path.name}:\n{result.stdout[-4000:]}{result.stderr[-2000:]}"


def test_source_scenarios_cover_fires_and_quiet(mixed_out):
    import yaml
    doc = yaml.safe_load((mixed_out / "tests" / "gpumon.sources.test.yaml").read_text("utf-8"))
    cases = [t for g in doc["tests"] for t in g.get("alert_rule_test", [])]
    fired = {(t["alertname"], a["exp_labels"].get("dcgm_field"), a["exp_labels"].get("source"))
             for t in cases for a in t["exp_alerts"]}
    for field in ("DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED"):
        assert ("GpuMetricFallbackServing", field, "dcgm-exporter-1.x") in fired
        assert ("GpuMetricFallbackServing", field, "nvidia_gpu_exporter") in fired
        assert ("GpuMetricMissing", field, None) in fired
    assert ("GpuMetricFallbackServing", "DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "dcgm-renames") in fired
    assert {"GpuTemperatureHigh", "GpuTemperatureCritical", "GpuPowerHigh"} <= {a for a, _, _ in fired}
    quiet = {t["alertname"] for t in cases if not t["exp_alerts"]}
    assert {"GpuMetricFallbackServing", "GpuMetricMissing", "GpuNodeMetricMissing", "GpuMetricAbsent",
            "GpuTemperatureHigh"} <= quiet
    # a node wholly on 1.x names: served per field, counted, and the field no source serves pages for the node
    whole = next(g for g in doc["tests"] if g["name"].startswith("a node wholly on fallback sources"))
    at = {t["alertname"]: t["exp_alerts"] for t in whole["alert_rule_test"]}
    assert len(at["GpuMetricFallbackServing"]) == 4 and not at["GpuMetricMissing"] and not at["GpuLost"]
    assert [a["exp_labels"]["dcgm_field"] for a in at["GpuNodeMetricMissing"]] == ["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"]
    assert whole["promql_expr_test"][0]["exp_samples"][0]["value"] == 2
    # the ratio source is converted: the normalized reading of the served GPU is 50 (%), from 0.5
    series = [s for g in doc["tests"] for s in g["input_series"] if s["series"].startswith("nvidia_smi_utilization")]
    assert series and all(s["values"].startswith("0.5") for s in series)


@pytest.mark.slow
@pytest.mark.parametrize("breakage", [
    ("      or on (job, UUID)\n", "      or\n"),                                 # both readings of a served GPU
    ('source!="dcgm-exporter"', 'source!="nobody"'),                        # warns for the primary too
    ("/ 1048576", "/ 1024"),                                                 # wrong unit conversion
    ('DCGM_FI_DEV_FB_USED",source!=', 'none",source!='),                      # inventory without fallback GPUs
])
def test_a_wrong_source_rule_fails_its_generated_test(mixed_out, tmp_path, promtool, breakage):
    import shutil
    shutil.copytree(mixed_out, tmp_path / "out")
    rules = tmp_path / "out" / "rules" / "gpumon.rules.yaml"
    text = rules.read_text("utf-8")
    old, new = breakage
    assert old in text
    rules.write_text(text.replace(old, new), "utf-8")
    assert _promtool(promtool, tmp_path / "out" / "tests" / "gpumon.sources.test.yaml").returncode != 0


def test_lint_accepts_the_declared_sources():
    """gpumon lint on the mixed-fleet golden output: the fallback series (old DCGM names, 1.x
    names, nvidia_smi_*) are declared by the spec, not unknown metrics."""
    from .clirun import gpumon

    golden = ROOT / "tests" / "golden" / "mixed-fleet"
    proc = gpumon("lint", "--spec", str(MIXED), str(golden))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "unknown-metric" not in proc.stdout


def test_a_down_exporter_mutes_its_nodes_fallback_warnings():
    """With dcgm-exporter down on a node, nvidia_gpu_exporter serves all its sourced fields: that
    is the exporter alert's cause, so the inhibit rule keyed on the node mutes the fallback
    warnings (one cause, one page)."""
    from gpumon.alertmanager import inhibitions
    from gpumon.rules import build_groups
    spec = load_spec(MIXED)
    rule = next(i for i in inhibitions(spec, build_groups(spec)) if "GpuExporterDown" in i.source[0][2])
    assert "GpuMetricFallbackServing" in rule.target[0][2].split("|")
    assert rule.equal == ("job", "Hostname")
