"""Counts and lists the README and docs state, held to the code they describe: gpumon's own alert
names (found in gpumon/rules/) each have a row in an alert table (generated from
templates/annotations.yaml), and the scenario matrix counts name the scenarios tests/matrix_cases.py
holds."""

from __future__ import annotations

import re

from gpumon import alerttable
from gpumon.alertnames import builtin_alerts

from . import matrix_cases
from .conftest import ROOT


def _table_alerts(path: str) -> set[str]:
    text = (ROOT / path).read_text(encoding="utf-8")
    return set(re.findall(r"^\| `(Gpu[A-Za-z]+)`", text, re.M)) | \
        {name for row in re.findall(r"^\| (`Gpu.*?) \|", text, re.M) for name in re.findall(r"`(Gpu[A-Za-z]+)`", row)}


def test_every_builtin_alert_has_a_row_in_an_alert_table():
    """README's alerting-rules table, or docs/kubernetes.md's for the kubernetes section's alerts."""
    documented = _table_alerts("README.md") | _table_alerts("docs/kubernetes.md")
    assert sorted(builtin_alerts() - documented) == []


def test_every_builtin_alert_has_a_row_in_the_doc_source():
    """The rows come from each kind's ``table:`` in templates/annotations.yaml."""
    assert sorted(builtin_alerts() - alerttable.alert_names(alerttable.load(ROOT))) == []


def test_readme_counts_the_matrix_scenarios():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    stated = re.findall(r"\((\d+) scenarios: every `gpumon simulate` fault kind", readme) \
        + re.findall(r"(\d+) fault timelines", readme)
    assert stated and set(stated) == {str(len(matrix_cases.CASES))}, stated
