"""Text from a pull request or a template never starts a line of gpumon's output: GitHub Actions
runs a log line starting with ``::`` (``::add-mask::``, ``::error file=...::``,
``::stop-commands::``) as a workflow command, and ``##[command]`` anywhere in a line. Rule names,
panel titles, file names and a runbook template's error text are printed one line each, escaped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpumon import reporters
from gpumon.cli import cli
from gpumon.findings import Finding, Location, Report
from gpumon.oneline import one_line, path_start
from tests.small_spec import BASE


def _no_command_lines(out: str, legacy: bool = True) -> None:
    """No line is a workflow command (the runner strips leading blanks first); with ``legacy``
    none holds the older ``##[`` syntax either."""
    for line in out.splitlines():
        assert not line.lstrip().startswith("::"), (line, out)
        assert not legacy or "##[" not in line, (line, out)


@pytest.mark.parametrize("value, shown", [
    ("a\n::add-mask::x", "a\\n::add-mask::x"),
    ("a\r\n::error::x", "a\\r\\n::error::x"),
    ("\x1b[31mred\x9b1m\x00\x7f", "\\x1b[31mred\\x9b1m\\x00\\x7f"),
    ("a\u2028b\u2029c\x85d\te", "a\\u2028b\\u2029c\\x85d\\te"),
    ("x##[add-mask]y ###[z", "x#\\x23[add-mask]y ##\\x23[z"),
    ("plain: text, 'quoted' \\ é 日本", "plain: text, 'quoted' \\ é 日本"),
])
def test_one_line_escapes_breaks_controls_and_the_legacy_command_prefix(value, shown):
    assert one_line(value) == shown


def test_one_line_caps_and_path_start_guards_a_leading_colon():
    assert one_line("x" * 50, 10) == "x" * 10 + "… (50 characters)"
    assert path_start("::error::x.yaml") == "./::error::x.yaml"
    # a Unicode blank is unprintable: escaped, so the line starts with its escape, not a blank
    assert path_start("\u3000::error::x.yaml") == "\\u3000::error::x.yaml"
    assert path_start("rules/x.yaml") == "rules/x.yaml"


def _render_check(folder: Path):
    return CliRunner().invoke(cli, ["render", str(folder / "gpumon.yaml"), "-o", str(folder / "out"), "--check"])


@pytest.mark.parametrize("template", [
    '{{ "x".encode("\\n::error file=gpumon.yaml,line=1::Injected\\n::add-mask::hidden") }}',
    # the reversed string: a log mask of the literal would not catch it
    '{% set c = "neddih::ksam-dda::\\n" %}{{ "x".encode(c|reverse) }}',
    '{{ {}["\\n::stop-commands::tok"] }}',
    '{{ nosuch["\\x1b[2J##[add-mask]x"] }}',
])
def test_a_runbook_template_error_is_one_escaped_line(tmp_path, template):
    (tmp_path / "runbooks").mkdir()
    (tmp_path / "gpumon.yaml").write_text(BASE, "utf-8")
    (tmp_path / "runbooks/GpuLost.md.j2").write_text(template, "utf-8")
    result = _render_check(tmp_path)
    assert result.exit_code == 2, result.output
    assert len(result.output.splitlines()) == 1, result.output
    assert result.output.startswith(str(tmp_path / "runbooks/GpuLost.md.j2") + ":1: "), result.output
    _no_command_lines(result.output)
    assert "\x1b" not in result.output


def test_a_runbook_template_error_is_capped(tmp_path):
    (tmp_path / "runbooks").mkdir()
    (tmp_path / "gpumon.yaml").write_text(BASE, "utf-8")
    (tmp_path / "runbooks/GpuLost.md.j2").write_text('{{ "x".encode("e" * 100000) }}', "utf-8")
    result = _render_check(tmp_path)
    assert result.exit_code == 2 and len(result.output) < 1000 and "characters)" in result.output, result.output


RULES = ('groups:\n- name: g\n  rules:\n'
         '  - alert: "Foo\\n::add-mask::INJECTED"\n    expr: rate(up[1s]) > 0\n'
         '  - record: "bad\\n::error::RECINJ"\n    expr: up\n'
         '  - record: "b##[add-mask]x"\n    expr: up\n')
DASHBOARD = {"title": "D\n::error::DASHINJ", "uid": "x", "panels": [
    {"id": 1, "type": "timeseries", "title": "T\n::error::TITLEINJ\u2028::add-mask::U",
     "targets": [{"refId": "A", "expr": "rate(DCGM_FI_DEV_GPU_UTIL[1s])"}]}]}


def test_lint_text_prints_names_titles_and_file_names_on_their_line(tmp_path, monkeypatch):
    (tmp_path / "r.yaml").write_text(RULES)
    (tmp_path / "d.json").write_text(json.dumps(DASHBOARD))
    (tmp_path / "::error::FILEINJ.yaml").write_text(RULES)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["lint", "--spec", "default", ".", "--format", "text"])
    out = result.output
    assert result.exit_code == 1, out
    _no_command_lines(out)
    for shown in ("bad\\n::error::RECINJ", "b#\\x23[add-mask]x", "T\\n::error::TITLEINJ\\u2028::add-mask::U",
                  "./::error::FILEINJ.yaml:"):
        assert shown in out, (shown, out)


def test_diff_and_its_errors_keep_names_on_their_line(tmp_path):
    old, new = tmp_path / "old", tmp_path / "new"
    old.mkdir(), new.mkdir()
    (old / "r.yaml").write_text("groups:\n- name: g\n  rules:\n  - record: a\n    expr: up\n")
    (new / "r.yaml").write_text(RULES)
    result = CliRunner().invoke(cli, ["diff", str(old), str(new)])
    assert result.exit_code == 1, result.output
    # Markdown for a PR comment: names stay on their bullet's line, shown literally in code spans
    _no_command_lines(result.output, legacy=False)
    (new / "bad\n::error::DIFFINJ.yaml").write_text("a: [\n")
    result = CliRunner().invoke(cli, ["diff", str(old), str(new)])
    assert result.exit_code == 2 and "bad\\n::error::DIFFINJ.yaml" in result.output, result.output
    _no_command_lines(result.output)


def test_the_text_report_of_validate_keeps_server_values_on_their_line():
    """validate's findings (label values a server returned) are shown in tables: one line each too."""
    report = Report("gpumon validate", summary={"prometheus": "http://p\n::add-mask::S"}, findings=[
        Finding("series-missing", "error", "gpu-1\n::error::SUBJ", "node\r\n::stop-commands::T", hint="h\n::x::"),
        Finding("rule-invalid", "warning", "s\n::error::LOC", "m", location=Location("::error::f.yaml", 2, 3)),
    ])
    out = reporters.render(report, "text")
    _no_command_lines(out)
    assert "gpu-1\\n::error::SUBJ" in out and "./::error::f.yaml:2:3: warning" in out, out
