"""The ``openshift-ai-renames`` preset (issue 13): OpenShift AI's ``nvidia_gpu_*`` names of DCGM
fields (opendatahub-operator PR #2236, reverted in odh-observability PR #51), with the unit each
name really carries: ``*_ratio`` 0-1 (x100 to percent), ``*_bytes`` still MiB (renamed, not
scaled), clocks MHz."""

from __future__ import annotations

import subprocess

import pytest

from gpumon.spec import presets as sourcepresets
from gpumon.render import render
from gpumon.rules.sources import normalized
from gpumon.spec import parse_spec

SPEC = """\
version: 1
exporter: {job: dcgm-exporter}
metrics:
  - {name: DCGM_FI_DEV_GPU_TEMP, kind: gauge, unit: celsius, presence: required, range: [5, 110],
     thresholds: [{alert: GpuTemperatureHigh, severity: warning, op: ">", value: 83}], sources: [openshift-ai-renames]}
  - {name: DCGM_FI_DEV_GPU_UTIL, kind: gauge, unit: percent, presence: required, range: [0, 100],
     sources: [openshift-ai-renames]}
  - {name: DCGM_FI_DEV_FB_USED, kind: gauge, unit: MiB, presence: required, range: [0, 1048576],
     sources: [openshift-ai-renames]}
  - {name: DCGM_FI_DEV_MEM_COPY_UTIL, kind: gauge, unit: percent, presence: optional, range: [0, 100],
     sources: [{preset: openshift-ai-renames, unit: percent, label: rhoai-unscaled}]}
"""


def test_preset_names_jobs_and_units():
    spec = parse_spec(SPEC, "<rhoai>")
    util = spec.metric("DCGM_FI_DEV_GPU_UTIL").sources[0]
    assert (util.series, util.job, util.gpu, util.node, util.gpu_index, util.unit, util.convert) == \
        ("nvidia_gpu_utilization_ratio", "rhoai-accelerator-metrics", "UUID", "Hostname", "gpu", "ratio", ("*", 100.0))
    fb = spec.metric("DCGM_FI_DEV_FB_USED").sources[0]
    assert (fb.series, fb.unit, fb.convert) == ("nvidia_gpu_memory_used_bytes", "MiB", ("*", 1.0))
    unscaled = spec.metric("DCGM_FI_DEV_MEM_COPY_UTIL").sources[0]
    assert (unscaled.series, unscaled.convert, unscaled.label) == ("nvidia_gpu_memory_utilization_ratio", ("*", 1.0),
                                                                    "rhoai-unscaled")
    assert len(sourcepresets.PRESETS["openshift-ai-renames"].series) == 8


def test_normalized_rule_reads_the_renamed_series_converted():
    spec = parse_spec(SPEC, "<rhoai>")
    util = normalized(spec, spec.metric("DCGM_FI_DEV_GPU_UTIL")).expr
    assert 'nvidia_gpu_utilization_ratio{job="rhoai-accelerator-metrics"}' in util and ") * 100," in util
    assert '"source", "openshift-ai-renames"' in util
    fb = normalized(spec, spec.metric("DCGM_FI_DEV_FB_USED")).expr
    assert 'nvidia_gpu_memory_used_bytes{job="rhoai-accelerator-metrics"}' in fb and "1048576" not in fb


@pytest.mark.slow
def test_generated_source_tests_pass(tmp_path, promtool):
    files = render(parse_spec(SPEC, "rhoai.yaml"))
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    test = tmp_path / "tests" / "gpumon.sources.test.yaml"
    assert "nvidia_gpu_utilization_ratio" in test.read_text()
    proc = subprocess.run([promtool, "test", "rules", test.name], cwd=test.parent, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
