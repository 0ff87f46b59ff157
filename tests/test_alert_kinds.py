"""What adding an alert kind costs: a sample kind added to a copy of the package, with every file
a contributor edits by hand named, and the suite's guards for alerts run on the copy's render.

The files: the constructor in its rules module (code), its promtool scenario in the matching
``ruletests/*_cases.py`` (its test: every alert must have a firing and a quiet case), and its entry
in ``templates/annotations.yaml`` (the doc source: summary and description for the annotations, the
row of README's alert table under ``table:``; the runbook falls back to ``generic.md.j2``).
``make docs`` writes the row into README (tests/test_checkdocs.py fails while it is stale, and
tests/test_drift.py while an alert has no row). Three files, as for a check.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from .engines import prometheus_engines
from .test_checkfind import _copy

#: every file a new alert kind is written into by hand (the rest is rendered or found)
HAND_EDITED = ("generator/gpumon/rules/exporter.py", "generator/gpumon/ruletests/exporter_cases.py",
               "templates/annotations.yaml")

RULE = '''

def sample(spec: Spec) -> Rule:
    """A target exporting over 100000 samples (a sample alert kind, added by a test)."""
    expr = f"{job_sel(spec, 'scrape_samples_scraped')} > 100000"
    return alert(spec, "GpuExporterSample", expr, severity="info", for_=0, kind="exporter_sample")
'''

CASE = '''

def sample(spec: Spec, step: float) -> list[Scenario]:
    """A target exporting 200000 samples fires the sample alert; before that it is quiet."""
    rule = exporter.sample(spec)
    sc = Scenario("exporter sample: a target over 100000 samples", 6, step)
    add_target(sc, spec, fleet.instance_of(1), samples_scraped=[120] * 3 + [200000] * 3)
    sc.quiet(1, rule.alert)
    sc.expect(4, rule.alert, [Firing(rule, target_labels(spec, fleet.instance_of(1)), 200000)])
    return [sc]
'''

ANNOTATIONS = '''
exporter_sample:
  summary: "dcgm-exporter target {{ $labels.instance }} exports many samples"
  description: >-
    {{ $labels.instance }} (job [[ job ]]) exported {{ $value }} samples in its last scrape.
  table:
    order: 45
    alerts: [GpuExporterSample]
    fires_when: over 100000 samples in a scrape
    why: a sample alert kind
'''

#: the row ``make docs`` writes into README's table, after `GpuExporterEmpty`'s (order 40)
README_ROW = "| `GpuExporterSample` | over 100000 samples in a scrape | a sample alert kind |\n"


def _add_sample_kind(root: Path) -> None:
    """Write the sample kind into the copy: exactly the files of :data:`HAND_EDITED`."""
    rules = root / HAND_EDITED[0]
    text = rules.read_text() + RULE
    rules.write_text(text.replace("scrape_slow(spec), legacy_names(spec)]", "scrape_slow(spec), legacy_names(spec),\n"
                                  "           sample(spec)]"))
    cases = root / HAND_EDITED[1]
    text = cases.read_text() + CASE
    cases.write_text(text.replace("empty, scrape_slow, legacy_names):", "empty, scrape_slow, legacy_names, sample):"))
    (root / HAND_EDITED[2]).write_text((root / HAND_EDITED[2]).read_text() + ANNOTATIONS)


@pytest.mark.slow   # a copy of the package, a render and promtool: a few seconds of CPU
def test_a_new_alert_kind_is_three_hand_edited_files(tmp_path):
    root = _copy(tmp_path)
    readme_before = (root / "README.md").read_text()
    _add_sample_kind(root)
    script = textwrap.dedent("""\
        import contextlib, json, sys
        from click.testing import CliRunner
        import gpumon
        from gpumon import checkdocs
        from gpumon.alertnames import builtin_alerts
        from gpumon.cli import cli
        ran = CliRunner().invoke(cli, ["render", "gpumon.yaml", "-o", "out"])
        with contextlib.redirect_stdout(sys.stderr):
            checkdocs.main([])   # make docs
            stale = checkdocs.main(["--check"])
        json.dump({"package": gpumon.__file__, "render": ran.exit_code, "output": ran.output,
                   "builtin": sorted(builtin_alerts()), "docs_stale": stale}, sys.stdout)
        """)
    env = {**os.environ, "PYTHONPATH": str(root / "generator")}
    ran = subprocess.run([sys.executable, "-c", script], cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr
    out = json.loads(ran.stdout)
    assert out["package"] == str(root / "generator/gpumon/__init__.py")
    assert out["render"] == 0, out["output"]
    # found, not listed: the spec refuses a threshold of that name, the drift guard wants its row
    assert "GpuExporterSample" in out["builtin"]
    assert "GpuExporterSample" in _table_alerts_of(root)
    # make docs wrote exactly the row into README's table (and nothing else there), and left nothing stale
    row = next(line for line in readme_before.splitlines(keepends=True) if line.startswith("| `GpuExporterEmpty` |"))
    assert (root / "README.md").read_text() == readme_before.replace(row, row + README_ROW, 1)
    assert out["docs_stale"] == 0, ran.stderr
    rules = (root / "out/rules/gpumon.rules.yaml").read_text()
    assert "alert: GpuExporterSample" in rules and "exports many samples" in rules
    assert (root / "out/runbooks/GpuExporterSample.md").exists()
    # its promtool scenario: a quiet and a firing case (the suite's coverage guards), passing on every engine
    tests = root / "out/tests/gpumon.exporter.test.yaml"
    cases = [case for group in yaml.safe_load(tests.read_text())["tests"] for case in group["alert_rule_test"]
             if case["alertname"] == "GpuExporterSample"]
    assert sorted(bool(c["exp_alerts"]) for c in cases) == [False, True], cases
    for engine in prometheus_engines():
        done = subprocess.run([engine.promtool, "test", "rules", tests.name], cwd=tests.parent,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, (engine.id, done.stdout[-3000:], done.stderr[-3000:])


def _table_alerts_of(root: Path) -> set[str]:
    """The alerts README's and docs/kubernetes.md's tables of the copy name (tests/test_drift.py's reading)."""
    import re

    names = set()
    for rel in ("README.md", "docs/kubernetes.md"):
        text = (root / rel).read_text(encoding="utf-8")
        names |= set(re.findall(r"^\| `(Gpu[A-Za-z]+)`", text, re.M))
    return names
