"""The implausible-readings record (``job_gpu:dcgm_field_implausible:unless``) keeps exactly the
readings a GPU cannot really send, with the values as read, for every shape of a spec range, on
each Prometheus build's own engine (``promtool test rules``): one read (``clamp_min(M, c) != c``)
when a ceiling bounds the plausible readings, two (``M unless M >= lo ...``) when a lower bound
makes them two-sided. What "cannot really send" means is :func:`gpumon.validate.values.reason`
(NaN, a DCGM blank code, outside the range), so the rules and validate judge a reading alike."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest

from gpumon.rules.promql import implausible_ceiling
from gpumon.rules.values import implausible_set
from gpumon.spec import DCGM_BLANK_MIN, load_spec
from gpumon.validate.values import reason
from tests.exprtests import assert_expr_tests

ROOT = Path(__file__).resolve().parent.parent
#: readings of every kind; each is one GPU's series (instance = its index here)
READINGS = (float("nan"), math.inf, -math.inf, DCGM_BLANK_MIN, DCGM_BLANK_MIN + 2, DCGM_BLANK_MIN - 1,
            math.nextafter(DCGM_BLANK_MIN, 0), 2.0 ** 63, 2147483632.0, -1.0, -0.001, 0.0, 0.5, 4.0, 5.0, 5.5,
            57.5, 100.0, 110.0, 110.001, 111.0, 1e6)


def _spec_and_metrics():
    spec = load_spec(ROOT / "gpumon.yaml")
    temp = next(m for m in spec.metrics if m.name == "DCGM_FI_DEV_GPU_TEMP")  # 5..110
    return spec, {"both bounds": temp, "no range": replace(temp, range_min=None, range_max=None),
                  "upper bound only": replace(temp, range_min=None), "lower bound only": replace(temp, range_max=None)}


def _text(v: float) -> str:
    return "NaN" if v != v else "Inf" if v == math.inf else "-Inf" if v == -math.inf else repr(v)


@pytest.mark.parametrize("kind", list(_spec_and_metrics()[1]))
def test_the_record_keeps_exactly_the_implausible_readings_as_read(kind, tmp_path, promtool):
    spec, metrics = _spec_and_metrics()
    m = metrics[kind]
    expr = implausible_set(spec, m).expr
    reads = expr.count(m.name + "{")
    assert reads == (1 if implausible_ceiling(m) is not None else 2), expr
    assert (implausible_ceiling(m) is None) == (m.range_min is not None)
    bad = {i: v for i, v in enumerate(READINGS) if reason(m, v) is not None}
    assert 0 < len(bad) < len(READINGS)
    series = [{"series": f'{m.name}{{job="dcgm-exporter",instance="{i}",pod="p"}}',
               "values": " ".join([_text(v)] * 4)} for i, v in enumerate(READINGS)]
    labels = '{{instance="{}",job="dcgm-exporter"}}'
    tests = [  # which series (NaN counts too) and, but for NaN (no sample equals it), their values
        {"expr": f"count by (instance, job) ({expr})", "eval_time": "45s",
         "exp_samples": [{"labels": labels.format(i), "value": 1} for i in bad]},
        {"expr": f"({expr}) == ({expr})", "eval_time": "45s",
         "exp_samples": [{"labels": labels.format(i), "value": v} for i, v in bad.items() if v == v]}]
    assert_expr_tests(tmp_path, promtool, series, tests)
