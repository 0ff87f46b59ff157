"""gpumon diff: semantic comparison of two versions of rules and dashboards, as Markdown."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from click.testing import CliRunner

from generator.cli import cli
from generator.diff import compare
from generator.diff.sources import read

DIFF = Path(__file__).resolve().parent / "data" / "diff"


def test_two_versions_give_the_expected_markdown():
    result = compare(read(str(DIFF / "v1")), read(str(DIFF / "v2")), "v1", "v2")
    assert result.markdown() == (DIFF / "expected.md").read_text()


def test_formatting_only_changes_are_not_differences():
    md = (DIFF / "expected.md").read_text()
    assert "job_node:gpu_temp:max" not in md  # reformatted expression
    assert "5m → 5m" not in md and "for`: 5m" not in md  # for: 5m vs 300s
    assert "id 1 \"GPU temperature\": query" not in md  # whitespace inside the query only
    assert "version" not in md  # dashboard version counter


def test_cli_exit_codes(tmp_path):
    runner = CliRunner()
    same = runner.invoke(cli, ["diff", str(DIFF / "v1"), str(DIFF / "v1")])
    assert same.exit_code == 0 and "No semantic differences" in same.output
    changed = runner.invoke(cli, ["diff", str(DIFF / "v1"), str(DIFF / "v2")])
    assert changed.exit_code == 1 and "#### Dashboards" in changed.output
    missing = runner.invoke(cli, ["diff", str(DIFF / "v1"), str(tmp_path / "nope")])
    assert missing.exit_code == 2 and "no such file or directory" in missing.output


def test_plain_file_and_prometheusrule_copies_count_once(tmp_path):
    """gpumon writes the same rules twice (rule file + PrometheusRule): one change, reported once."""
    old, new = tmp_path / "old", tmp_path / "new"
    for side, src in ((old, DIFF / "v1" / "rules.yaml"), (new, DIFF / "v2" / "rules.yaml")):
        side.mkdir()
        text = src.read_text()
        (side / "rules.yaml").write_text(text)
        body = "".join("  " + ln + "\n" for ln in text.splitlines())
        (side / "prometheusrule.yaml").write_text(
            "apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\nmetadata:\n  name: gpu\nspec:\n" + body)
    md = compare(read(str(old)), read(str(new)), "old", "new").markdown()
    assert md.count("**removed** `GpuPowerHigh`") == 1
    assert "alerting rules: 1 added, 1 removed, 2 changed" in md


def test_git_revision_of_a_path(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    shutil.copytree(DIFF / "v1", repo / "monitoring")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(git + ["-C", str(repo), "add", "-A"], check=True)
    subprocess.run(git + ["-C", str(repo), "commit", "-qm", "v1"], check=True)
    shutil.rmtree(repo / "monitoring")
    shutil.copytree(DIFF / "v2", repo / "monitoring")
    monkeypatch.chdir(repo)
    result = CliRunner().invoke(cli, ["diff", "git:HEAD:monitoring", "monitoring"])
    assert result.exit_code == 1
    expected = (DIFF / "expected.md").read_text().split("\n", 1)[1]
    assert result.output == "### gpumon diff: `git:HEAD:monitoring` → `monitoring`\n" + expected
    bad = CliRunner().invoke(cli, ["diff", "git:no-such-rev:monitoring", "monitoring"])
    assert bad.exit_code == 2 and "git:no-such-rev:monitoring" in bad.output


def test_selector_label_and_group_interval_changes(tmp_path):
    rule = ("    rules:\n    - record: job_node:gpu_temp:max\n"
            "      expr: max by (job, Hostname) (DCGM_FI_DEV_GPU_TEMP{job=\"dcgm-exporter\"})\n")
    head = "apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\nmetadata:\n  name: gpu\n  namespace: mon\n"
    (tmp_path / "old.yaml").write_text(head + "  labels:\n    release: kube-prometheus-stack\nspec:\n  groups:\n"
                                       "  - name: gpu\n    interval: 1m\n" + rule)
    (tmp_path / "new.yaml").write_text(head + "spec:\n  groups:\n  - name: gpu\n" + rule)
    md = compare(read(str(tmp_path / "old.yaml")), read(str(tmp_path / "new.yaml")), "a", "b").markdown()
    assert "- group `gpu`: evaluation interval 1m → global default" in md
    assert "- PrometheusRule `mon/gpu`: metadata label `release`: `kube-prometheus-stack` → none" in md
    assert "rule groups / PrometheusRule objects: 2 changed" in md
