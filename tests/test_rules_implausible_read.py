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


@pytest.mark.parametrize("by_err_code", [True, False])
def test_a_dcgm_blank_in_the_xid_field_is_no_xid_of_any_severity(by_err_code, tmp_path, promtool):
    """A blank (DCGM's "not supported", 2^63 - 14, or any code from 2^47 up) in the XID field is
    GpuTelemetryImplausible's page; the XID alerts read codes only, with the err_code label (the
    exporter's) and without it (the spec then tells codes by value), where an unlisted value paged
    GpuXidWarning as an XID nobody listed."""
    from gpumon.rules.values import xid
    spec = load_spec(ROOT / "gpumon.yaml")
    m = next(m for m in spec.metrics if m.name == "DCGM_FI_DEV_XID_ERRORS")
    if not by_err_code:
        m = replace(m, alert_labels=tuple(x for x in m.alert_labels if x != "err_code"))
    readings = {"blank": 9223372036854775794.0, "blank-min": float(DCGM_BLANK_MIN), "unlisted": 999.0}
    # with the label, the exporter writes the reading as the series' err_code too
    series = [{"series": f'{m.name}{{job="dcgm-exporter",Hostname="n",UUID="{k}",gpu="0"'
                         + (f',err_code="{int(v)}"' if by_err_code else "") + "}",
               "values": "0 0 0 0 " + " ".join([_text(v)] * 4)} for k, v in readings.items()]
    rule = xid(spec, m, "warning")
    tests = [{"expr": f"count by (UUID) ({rule.expr})", "eval_time": "90s",
              "exp_samples": [{"labels": '{UUID="unlisted"}', "value": 1}]}]
    assert_expr_tests(tmp_path, promtool, series, tests)
