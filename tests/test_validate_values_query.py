"""The values check's one read per metric (:func:`gpumon.validate.values.suspects`), on each
Prometheus build's own engine (``promtool test rules``): for every kind of reading a GPU can send
(in range, on a bound, just outside, NaN, +-Inf, the DCGM blank codes, 2^63) it keeps exactly the
bad ones (:func:`gpumon.validate.values.reason` tells them), and where it answers the reading
itself, the reading as read. Against a live server, with the second read of the readings:
tests/test_validate_e2e.py."""

from __future__ import annotations

import math
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from gpumon.spec import DCGM_BLANK_MIN, load_spec
from gpumon.validate.values import exact, folded, reason, suspects

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
def test_one_read_keeps_exactly_the_bad_readings(kind, tmp_path, promtool):
    m = _metrics()[kind]
    expr = suspects(m, LATEST)
    assert expr.count("M{") == (2 if kind in ("lower bound only", "bounds not exact in float64") else 1)
    assert folded(m) == (kind == "both bounds")
    series = [{"series": f'M{{job="dcgm-exporter",instance="{i}"}}', "values": " ".join([_text(v)] * 4)}
              for i, v in enumerate(READINGS)]
    bad = [i for i, v in enumerate(READINGS) if reason(m, v) is not None]
    assert bad and len(bad) < len(READINGS)
    tests = [{"expr": f"group by (instance) ({expr})", "eval_time": "45s",
              "exp_samples": [{"labels": f'{{instance="{i}"}}', "value": 1} for i in bad]}]
    # the value of each finite bad reading: the reading itself, or its distance from the middle
    finite = [i for i in bad if math.isfinite(READINGS[i])]
    mid = (m.range_min + m.range_max) / 2 if folded(m) else 0.0
    tests.append({"expr": f"({expr}) * 1 < +Inf > -Inf", "eval_time": "45s",  # "* 1": no name on any engine
                  "exp_samples": [{"labels": f'{{instance="{i}",job="dcgm-exporter"}}',
                                   "value": abs(READINGS[i] - mid) if folded(m) else READINGS[i]} for i in finite]})
    test = {"rule_files": [], "evaluation_interval": "15s",
            "tests": [{"interval": "15s", "input_series": series, "promql_expr_test": tests}]}
    (tmp_path / "values.test.yaml").write_text(yaml.safe_dump(test, sort_keys=False))
    proc = subprocess.run([promtool, "test", "rules", "values.test.yaml"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_second_read_asks_for_the_readings_as_read():
    m = _metrics()["both bounds"]
    assert exact(m, LATEST) == f"{LATEST} unless {LATEST} >= 5 <= 110 < {DCGM_BLANK_MIN}"
