"""The alert tables of README.md and docs/kubernetes.md are generated from templates/annotations.yaml
(each kind's ``table:`` row); the annotation texts stay what they were."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml

from gpumon import alerttable, checkdocs, texts

from .conftest import ROOT


def _docs_copy(tmp_path: Path) -> Path:
    """README.md, docs/ and templates/annotations.yaml of the checkout in ``tmp_path``."""
    shutil.copytree(ROOT / "docs", tmp_path / "docs", ignore=shutil.ignore_patterns("checks"))
    (tmp_path / "templates").mkdir()
    shutil.copy(ROOT / "templates/annotations.yaml", tmp_path / "templates/annotations.yaml")
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    return tmp_path


def _table_lines(text: str) -> list[str]:
    start, end = text.index(alerttable.BEGIN), text.index(alerttable.END)
    return text[start:end].splitlines()[1:]


def test_the_committed_tables_are_the_generated_ones():
    for page, text in alerttable.fragments(ROOT).items():
        assert text == (ROOT / page).read_text(encoding="utf-8"), f"{page}: run `make docs`"
    readme = _table_lines((ROOT / "README.md").read_text(encoding="utf-8"))
    assert readme[0] == "| alert | fires when | why |" and readme[2].startswith("| `GpuExporterTargetMissing` |")
    # rows of several alerts and the spec's threshold alerts keep their one row each
    assert "| `GpuTemperatureHigh`, `GpuTemperatureCritical`, `GpuPowerHigh`, … | the spec's thresholds" in "\n".join(readme)
    kube = _table_lines((ROOT / "docs/kubernetes.md").read_text(encoding="utf-8"))
    assert kube[0] == "| alert | severity | fires when |" and kube[2].startswith("| `GpuNodeExporterMissing` | critical |")


def test_a_changed_row_in_annotations_yaml_makes_the_readme_stale(tmp_path):
    root = _docs_copy(tmp_path)
    source = root / "templates/annotations.yaml"
    source.write_text(source.read_text().replace("`up == 0` for 5m", "`up == 0` for 7m", 1))
    want = checkdocs.fragments(root)
    assert want["README.md"] != (root / "README.md").read_text()
    assert "| `GpuExporterDown` | `up == 0` for 7m | scrapes fail;" in want["README.md"]
    assert want["docs/kubernetes.md"] == (root / "docs/kubernetes.md").read_text()


def test_rows_follow_their_order_not_the_file_order(tmp_path):
    root = _docs_copy(tmp_path)
    source = root / "templates/annotations.yaml"
    loaded = yaml.safe_load(source.read_text())
    loaded["exporter_sample"] = {"summary": "s", "description": "d",
                                 "table": {"order": 45, "alerts": ["GpuExporterSample"], "fires_when": "often",
                                           "why": "a  sample\nrow"}}
    source.write_text(yaml.safe_dump(loaded, allow_unicode=True, sort_keys=False))
    lines = _table_lines(alerttable.fragments(root)["README.md"])
    names = [re.match(r"\| `(\w+)`", line).group(1) for line in lines[2:]]
    assert names[3:6] == ["GpuExporterEmpty", "GpuExporterSample", "GpuExporterScrapeSlow"]
    assert "| `GpuExporterSample` | often | a sample row |" in lines


@pytest.mark.parametrize("row, message", [
    ({"order": 1, "alerts": ["GpuX"], "fires_when": "x"}, "lacks why"),
    ({"alerts": ["GpuX"], "fires_when": "x", "why": "y"}, "lacks order"),
    ({"order": 1, "alerts": ["GpuX"], "fires_when": "x", "why": "y", "severity": "critical"}, "has unknown severity"),
    ({"order": 1, "page": "docs/nowhere.md", "alerts": ["GpuX"]}, "is not one of"),
    ({"order": 20, "alerts": ["GpuX"], "fires_when": "x", "why": "y"}, "share order 20"),
    ({"order": 1, "alerts": ["GpuX"], "fires_when": "a || b", "why": "y"}, "holds a |"),
])
def test_a_wrong_row_is_refused(row, message):
    source = yaml.safe_load((ROOT / "templates/annotations.yaml").read_text(encoding="utf-8"))
    source["sample"] = {"summary": "s", "description": "d", "table": row}
    with pytest.raises(ValueError, match=message):
        alerttable.rows(source)


def test_table_rows_never_become_annotations():
    notes = dict(texts.annotations("exporter_down", job="dcgm-exporter", for_="5m"))
    assert list(notes) == ["summary", "description"]
    assert "table" in yaml.safe_load((ROOT / "templates/annotations.yaml").read_text(encoding="utf-8"))["exporter_down"]
