"""Checks are found in their folders (gpumon.checkfind), not listed by hand: a new lint or
validate check is its module, its test and its example; help text, docs pages, docs tables and the
README count follow from the module."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gpumon import checkfind
from gpumon.lint import check_ids
from gpumon.validate import CHECKS

from .clirun import gpumon
from .conftest import ROOT

SAMPLE_LINT = '''\
"""``sample-alert-name``: an alert called ``SampleAlert``.

What: an alerting rule whose name is ``SampleAlert``.
Why: a sample check, added by a test to prove a check is one module.
Silence: ``# gpumon-lint: ignore sample-alert-name`` on the rule.
"""

from ._base import make

ID = "sample-alert-name"
ORDER = 235
SEVERITY = "info"


def check(inputs, ctx):
    for rule in inputs.rules:
        if rule.name == "SampleAlert":
            yield make(ID, SEVERITY, rule.subject, "a sample finding", "", rule.location)
'''

SAMPLE_VALIDATE = '''\
"""Check: a sample validate check, added by a test to prove a check is one module.

Why: A sample.
Silence: Leave it out with --checks.
"""

from .base import CheckResult

CHECK = "sample"
ORDER = 135
APPLIES = "a sample"
FINDINGS = ("sample-finding", CHECK)
LOOKS_AT = "nothing: it is a sample"


def run(ctx):
    return CheckResult([], [f"{CHECK}/none"])
'''

SAMPLE_RULES = """\
groups:
- name: sample
  rules:
  - alert: SampleAlert
    expr: vector(1)
"""


def test_the_checks_are_the_modules_of_their_folders():
    lint_modules = {p.stem for p in (ROOT / "generator/gpumon/lint/checks").glob("[!_]*.py")}
    assert len(check_ids()) == len(lint_modules)
    assert list(CHECKS) == checkfind.ids(checkfind.VALIDATE, selectable_only=True)
    assert checkfind.ids(checkfind.VALIDATE)[0] == "reachability" and "dashboards" not in CHECKS


def test_validate_help_names_every_check_it_accepts():
    help_text = " ".join(gpumon("validate", "--help").stdout.split())
    for check in CHECKS:
        assert check in help_text, check
    assert "sources (metrics with fallback sources)" in help_text


def test_two_checks_with_one_order_are_an_error(tmp_path, monkeypatch):
    folder = tmp_path / "checks"
    folder.mkdir()
    for name, cid in (("a", "a-check"), ("b", "b-check")):
        (folder / f"{name}.py").write_text(f'"""doc"""\nID = "{cid}"\nORDER = 10\n\n\ndef check(inputs, ctx):\n    return []\n')
    (folder / "_helper.py").write_text('ID = "not-a-check"\nORDER = 10\n')
    tool = checkfind.Tool("lint", "gpumon.x", "ID", "check")
    monkeypatch.setattr(checkfind.Tool, "folder", property(lambda self: folder))
    with pytest.raises(checkfind.CheckError, match="share ORDER 10"):
        checkfind.find(tool)


def _copy(tmp_path: Path) -> Path:
    """The package, the spec and the generated docs' inputs in ``tmp_path`` (the lint corpus
    reduced to the sample's file: the other pages then say they have no example, which is fine here)."""
    shutil.copytree(ROOT / "generator", tmp_path / "generator", ignore=shutil.ignore_patterns("__pycache__"))
    for folder in ("docs", "templates"):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    for name in ("gpumon.yaml", "README.md"):
        shutil.copy(ROOT / name, tmp_path / name)
    (tmp_path / "tests" / "data").mkdir(parents=True)
    shutil.copy(ROOT / "tests/data/validate-examples.json", tmp_path / "tests/data/validate-examples.json")
    (tmp_path / "tests" / "lint_corpus").mkdir()
    return tmp_path


@pytest.mark.slow   # a copy of the package and one interpreter: a few seconds of CPU
def test_a_new_check_is_one_module_its_test_and_its_example(tmp_path):
    """Add a lint check and a validate check to a copy of the package (the module, and the lint
    check's example in the corpus; its test would be the third file): the CLI lists and runs them,
    and ``make docs`` writes their pages, their table rows and the new count. Nothing else edited."""
    root = _copy(tmp_path)
    package = root / "generator" / "gpumon"
    (package / "lint/checks/sample_alert_name.py").write_text(SAMPLE_LINT)
    (package / "validate/sample.py").write_text(SAMPLE_VALIDATE)
    (root / "tests/lint_corpus/sample_alert_name.yaml").write_text(SAMPLE_RULES)
    # one interpreter for every command (each costs a second of imports): the copy's gpumon
    script = textwrap.dedent("""\
        import json, sys
        from click.testing import CliRunner
        import gpumon
        from gpumon import checkdocs
        from gpumon.cli import cli
        out = {"package": gpumon.__file__}
        for key, args in (("listed", ["lint", "--list-checks"]),
                          ("linted", ["lint", "--spec", "gpumon.yaml", "tests/lint_corpus/sample_alert_name.yaml"]),
                          ("helped", ["validate", "--help"])):
            out[key] = CliRunner().invoke(cli, args).output
        out["written"] = checkdocs.write(checkdocs.Path.cwd())
        out["stale"] = checkdocs.write(checkdocs.Path.cwd(), check=True)
        json.dump(out, sys.stdout)
        """)
    env = {**os.environ, "PYTHONPATH": str(root / "generator")}
    ran = subprocess.run([sys.executable, "-c", script], cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr
    out = json.loads(ran.stdout)
    assert out["package"] == str(package / "__init__.py")
    assert "sample-alert-name (info): an alert called `SampleAlert`." in out["listed"]
    assert "info sample-alert-name: alert SampleAlert: a sample finding" in out["linted"], out["linted"]
    assert "sample (a sample)" in " ".join(out["helped"].split())
    assert out["stale"] == []
    written = set(out["written"])
    assert {"docs/checks/lint/sample-alert-name.md", "docs/checks/validate/sample.md", "docs/checks/README.md",
            "docs/lint.md", "docs/validate.md", "README.md"} <= written
    page = (root / "docs/checks/lint/sample-alert-name.md").read_text()
    assert "# `sample-alert-name` (lint, info)" in page and "gpumon lint tests/lint_corpus/sample_alert_name.yaml" in page
    assert "| [`sample-alert-name`](checks/lint/sample-alert-name.md) | info | an alert called `SampleAlert` |" \
        in (root / "docs/lint.md").read_text()
    sample = (root / "docs/checks/validate/sample.md").read_text()
    assert "## Why\n\nA sample.\n" in sample and "## How to silence\n\nLeave it out with --checks.\n" in sample
    assert "A sample validate check, added by a test" in sample and "Silence:" not in sample
    assert "| [sample](checks/validate/sample.md) (a sample) | `sample-finding` | nothing: it is a sample |" \
        in (root / "docs/validate.md").read_text()
    assert f"{len(check_ids()) + 1} checks (those that apply" in (root / "README.md").read_text()
