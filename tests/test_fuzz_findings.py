"""Specs the spec fuzzer found loading but rendering generated tests that fail (the second
invariant: a spec either fails with FILE:LINE:COL or renders rules whose tests pass). Each is
fixed at its cause: a positioned spec error where the spec asks for something that cannot hold,
or rule tests that model what the rules do."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gpumon import writer
from gpumon.render import render
from gpumon.spec import SpecError, load_spec

from . import small_spec
from .engines import prometheus_engines

BASE = small_spec.BASE.replace("version: 1\n", "version: 1\nname: t\n", 1)
ENERGY = """\
  - name: DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION
    kind: counter
    unit: millijoules
    presence: required
"""
UTIL = """\
  - name: DCGM_FI_DEV_GPU_UTIL
    kind: gauge
    unit: percent
    presence: required
"""
XID = """\
  - name: DCGM_FI_DEV_XID_ERRORS
    kind: counter
    unit: count
    presence: optional
"""


def problems(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    with pytest.raises(SpecError) as info:
        load_spec(path)
    return [str(p).replace(str(path), "spec.yaml") for p in info.value.problems]


def test_a_counters_range_has_no_maximum(tmp_path):
    """[0, 5] on the energy counter: every healthy GPU crossed it within a minute, and
    GpuFleetTelemetryImplausible fired in the generated healthy tests."""
    assert problems(tmp_path, BASE + ENERGY + "    range: [0, 5]\n") == [
        "spec.yaml:14:16: metrics[1].range[1]: a counter's range has no maximum (5): its total grows for as long as "
        "the exporter runs, so every healthy GPU would cross it; use null, and bound its per-second rate with a "
        "threshold (`rate: 5m`)"]
    load_spec(_write(tmp_path, BASE + ENERGY + "    range: [0, null]\n"))


@pytest.mark.parametrize("threshold,where,message", [
    ("{severity: critical, op: '<', value: 1, rate: 5m}", "op",
     "a rate threshold compares with > or >= (a counter rising too fast), not <"),
    ("{severity: critical, op: '>=', value: 0, rate: 5m}", "value",
     "threshold >= 0 on a rate always fires: a counter's rate is never negative"),
    ("{severity: critical, op: '>', value: -1, rate: 5m}", "value",
     "threshold > -1 on a rate always fires"),
])
def test_rate_thresholds_that_page_healthy_gpus_are_refused(tmp_path, threshold, where, message):
    """`< 1` on a flat XID counter paged every healthy GPU in the generated healthy tests."""
    found = problems(tmp_path, BASE + XID + f"    thresholds: [{threshold}]\n")
    assert len(found) == 1 and f"metrics[1].thresholds[0].{where}: {message}" in found[0], found
    assert found[0].startswith("spec.yaml:14:")


def test_frozen_check_with_a_rate_threshold_above_zero_is_refused(tmp_path):
    text = BASE + ENERGY + "    frozen_check: true\n    thresholds: [{severity: warning, op: '>', value: 0, rate: 5m}]\n"
    assert problems(tmp_path, text) == [
        "spec.yaml:14:19: metrics[1].frozen_check: frozen_check expects this counter to rise on a healthy GPU, but a "
        "rate threshold > 0 pages whenever it rises; raise the threshold or drop frozen_check"]


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return path


#: loads, and rendered generated tests that failed before their fix
RENDERED = {
    # the healthy energy counter rose at 300 W = 300,000 mJ/s, past a `> 10` rate threshold
    "energy-rate-threshold-below-300W": BASE + ENERGY + "    frozen_check: true\n"
                                        "    thresholds: [{severity: warning, op: '>', value: 10, rate: 5m}]\n",
    # a gauge without a range maximum and a low threshold above 100: its healthy reading was 100
    "low-threshold-above-the-default-span": BASE + "    thresholds: [{severity: info, op: '<=', value: 331.5}]\n",
    # a source without a GPU-index label on a spec with no other required field: the normalized
    # series has no index to borrow, and the generated test expected one
    "source-without-gpu-index": BASE + "    sources:\n      - name: gpu_reading\n        job: nvidia-smi\n"
                                       "        labels: {gpu: uuid, node: host}\n",
    # GpuMetricMissing (or GpuLost) switched off: nothing pages during a one-field outage, so the gap
    # it leaves pages afterwards, where the generated test expected the gap alert to stay quiet
    "missing-switched-off-gap-after-outage": BASE + UTIL + "overrides:\n  GpuMetricMissing: {disable: true}\n",
    "lost-switched-off-gap-after-outage": BASE + UTIL + "overrides:\n  GpuLost: {disable: true}\n",
    "source-without-gpu-index-threshold": BASE + "    range: [0, 120]\n"
                                                 "    thresholds: [{severity: warning, op: '>', value: 83}]\n"
                                                 "    sources:\n      - name: gpu_reading\n        job: nvidia-smi\n"
                                                 "        labels: {gpu: uuid, node: instance}\n",
}


@pytest.mark.parametrize("name", sorted(RENDERED))
def test_fuzzer_found_specs_render_tests_that_pass(tmp_path, name):
    out = tmp_path / "out"
    writer.write(render(load_spec(_write(tmp_path, RENDERED[name]))), out)
    tests = sorted(p.name for p in (out / "tests").glob("*.test.yaml"))
    for engine in prometheus_engines():
        run = subprocess.run([engine.promtool, "test", "rules", *tests], cwd=out / "tests", capture_output=True,
                             text=True, timeout=600)
        assert run.returncode == 0, f"promtool {engine.version}:\n{run.stdout[-3000:]}{run.stderr[-1000:]}"
