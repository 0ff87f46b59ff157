"""One read of a metric's latest samples both counts its GPUs and judges their readings
(:func:`gpumon.validate.readings.plausible`, the inventory's ``state|M``), on each Prometheus
build's own engine (``promtool test rules``): for every kind of reading a GPU can send (in range,
on a bound, just outside, NaN, +-Inf, the DCGM blank codes, 2^63) it reads 1 exactly for the good
ones (:func:`gpumon.validate.values.reason` tells them), and the count rows add up to the GPUs.
Against a live server, with the values check's second read of the bad readings:
tests/test_validate_e2e.py."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest

from gpumon.spec import DCGM_BLANK_MIN, load_spec
from gpumon.validate.readings import PLAUSIBLE, exact, folded, plausible
from gpumon.validate.values import reason
from tests.exprtests import assert_expr_tests

ROOT = Path(__file__).resolve().parent.parent
LATEST = 'last_over_time(M{job="dcgm-exporter"}[45s])'
#: readings of every kind; each is one GPU's series (instance = its index here)
READINGS = (float("nan"), math.inf, -math.inf, DCGM_BLANK_MIN, DCGM_BLANK_MIN + 2, DCGM_BLANK_MIN - 1,
            2.0 ** 63, 2147483632.0, -1.0, -0.001, 0.0, 0.5, 4.0, 5.0, 5.5, 57.5, 100.0, 110.0, 110.001, 111.0,
            1e6)


def _metrics():
    spec = load_spec(ROOT / "gpumon.yaml")
    temp = next(m for m in spec.metrics if m.name == "DCGM_FI_DEV_GPU_TEMP")  # 5..110: folded
    return {"both bounds": temp, "no range": replace(temp, range_min=None, range_max=None),
            "upper bound only": replace(temp, range_min=None), "lower bound only": replace(temp, range_max=None),
            "bounds not exact in float64": replace(temp, range_min=0.1, range_max=0.7)}


def _text(v: float) -> str:
    return "NaN" if v != v else "Inf" if v == math.inf else "-Inf" if v == -math.inf else repr(v)


@pytest.mark.parametrize("kind", list(_metrics()))
def test_one_read_tells_exactly_the_good_readings(kind, tmp_path, promtool):
    m = _metrics()[kind]
    expr = plausible(m, LATEST)
    if kind in ("lower bound only", "bounds not exact in float64"):
        assert expr is None and not folded(m)  # the values check reads these with exact()
        expr = f"group by (instance, job) ({exact(m, LATEST)}) * 0 or {LATEST} * 0 + 1"  # what exact() keeps reads 0
    else:
        assert expr.count("M{") == 1 and folded(m) == (kind == "both bounds")
    series = [{"series": f'M{{job="dcgm-exporter",instance="{i}"}}', "values": " ".join([_text(v)] * 4)}
              for i, v in enumerate(READINGS)]
    good = {i: int(reason(m, v) is None) for i, v in enumerate(READINGS)}
    assert 0 < sum(good.values()) < len(READINGS)
    assert_expr_tests(tmp_path, promtool, series, [{"expr": expr, "eval_time": "45s", "exp_samples": [
        {"labels": f'{{instance="{i}",job="dcgm-exporter"}}', "value": v} for i, v in good.items()]}])


def test_the_count_rows_add_up_to_the_gpus_and_a_gpu_with_one_bad_series_is_bad(tmp_path, promtool):
    """``count_values`` of the GPUs' least judgement: a GPU shared by two pods (two series) counts
    once, and is bad when one of its series reads NaN (the other's good reading does not hide it)."""
    m = _metrics()["both bounds"]
    gpu = 'M{{job="dcgm-exporter",instance="n:9400",UUID="{u}",pod="{p}"}}'
    series = [{"series": gpu.format(u="GPU-a", p="x"), "values": "50 50 50 50"},
              {"series": gpu.format(u="GPU-b", p="x"), "values": "50 50 50 50"},
              {"series": gpu.format(u="GPU-b", p="y"), "values": "50 50 50 NaN"},
              {"series": gpu.format(u="GPU-c", p="x"), "values": "50 50 50 50"},
              {"series": gpu.format(u="GPU-c", p="y"), "values": "60 60 60 60"}]
    expr = f'count_values("{PLAUSIBLE}", min by (instance, UUID) ({plausible(m, LATEST)}))'
    assert_expr_tests(tmp_path, promtool, series, [{"expr": expr, "eval_time": "45s", "exp_samples": [
        {"labels": f'{{{PLAUSIBLE}="1"}}', "value": 2}, {"labels": f'{{{PLAUSIBLE}="0"}}', "value": 1}]}])
