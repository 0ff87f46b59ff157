"""PromQL expressions judged by a Prometheus build's own engine: ``promtool test rules`` with
``promql_expr_test`` entries and no rule files, series given as promtool's input notation."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml


def assert_expr_tests(folder: Path, promtool: str, series: list[dict], tests: list[dict]) -> None:
    """Run ``tests`` (each ``{"expr", "eval_time", "exp_samples"}``) over ``series`` (each
    ``{"series", "values"}``, one sample per 15 s) in ``folder``; fails with promtool's report."""
    test = {"rule_files": [], "evaluation_interval": "15s",
            "tests": [{"interval": "15s", "input_series": series, "promql_expr_test": tests}]}
    (folder / "expr.test.yaml").write_text(yaml.safe_dump(test, sort_keys=False))
    proc = subprocess.run([promtool, "test", "rules", "expr.test.yaml"], cwd=folder, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
