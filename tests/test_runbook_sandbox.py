"""A spec's own runbook templates (``runbooks/*.md.j2`` beside it) are untrusted input: read like
lint's inputs (no symlink out of the runbooks/ folder, no device or FIFO, bounded size) and rendered
in a sandbox bounded in size, memory and time; every error is ``FILE:LINE: message``, exit 2."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpumon import runbooks, runbooksandbox
from gpumon.cli import cli
from tests.small_spec import BASE


def _render(folder: Path, *extra: str):
    return CliRunner().invoke(cli, ["render", str(folder / "gpumon.yaml"), "-o", str(folder / "out"), *extra])


@pytest.fixture
def spec_dir(tmp_path):
    (tmp_path / "runbooks").mkdir()
    (tmp_path / "gpumon.yaml").write_text(BASE, "utf-8")
    return tmp_path


def _template(folder: Path, text: str, name: str = "GpuLost.md.j2") -> Path:
    path = folder / "runbooks" / name
    path.write_text(text, "utf-8")
    return path


def _problem(result, file: str, line: int) -> str:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and "internal error" not in result.output
    assert re.search(rf"{re.escape(file)}:{line}: ", result.output), result.output
    return result.output


def test_a_symlink_out_of_the_spec_folder_is_refused(spec_dir, tmp_path_factory):
    secret = tmp_path_factory.mktemp("elsewhere") / "secret.txt"
    secret.write_text("TOKEN=hunter2\n")
    (spec_dir / "runbooks/GpuLost.md.j2").symlink_to(secret)
    result = _render(spec_dir)
    assert result.exit_code == 2 and "hunter2" not in result.output
    assert "outside the spec's runbooks/ folder" in result.output and "--follow-symlinks" in result.output
    assert not (spec_dir / "out/runbooks/GpuLost.md").exists()
    # asked for, it is read
    assert _render(spec_dir, "--follow-symlinks").exit_code == 0
    assert "hunter2" in (spec_dir / "out/runbooks/GpuLost.md").read_text()


def test_an_include_through_a_symlink_is_refused_and_one_inside_is_read(spec_dir, tmp_path_factory):
    secret = tmp_path_factory.mktemp("elsewhere") / "secret.md.j2"
    secret.write_text("hunter2")
    (spec_dir / "runbooks/_leak.md.j2").symlink_to(secret)
    _template(spec_dir, "# x\n{% include '_leak.md.j2' %}\n")
    out = _problem(_render(spec_dir), "GpuLost.md.j2", 2)
    assert "hunter2" not in out
    (spec_dir / "runbooks/shared").mkdir()
    (spec_dir / "runbooks/shared/text.md.j2").write_text("shared text")
    (spec_dir / "runbooks/_leak.md.j2").unlink()
    (spec_dir / "runbooks/_leak.md.j2").symlink_to(spec_dir / "runbooks/shared/text.md.j2")   # inside runbooks/
    assert _render(spec_dir).exit_code == 0
    assert "shared text" in (spec_dir / "out/runbooks/GpuLost.md").read_text()


def _git_repo_with_a_token(folder: Path) -> None:
    """``folder`` as CI checks a pull request out: actions/checkout keeps its token in .git/config."""
    (folder / ".git").mkdir()
    (folder / ".git/config").write_text('[http "https://github.com/"]\n'
                                        '\textraheader = AUTHORIZATION: basic c2VjcmV0\n')


@pytest.mark.parametrize("target", ["../.git/config", "../gpumon.yaml"])
def test_a_symlink_into_the_spec_folder_outside_runbooks_is_refused(spec_dir, target):
    """The spec's folder is usually the repository root: a template linked to ../.git/config
    rendered the CI token into the runbook page. Only runbooks/ itself is inside now."""
    _git_repo_with_a_token(spec_dir)
    (spec_dir / "runbooks/cfg.md.j2").symlink_to(target)
    _template(spec_dir, '{% include "cfg.md.j2" %}\n')
    result = _render(spec_dir)
    out = _problem(result, "GpuLost.md.j2", 1)
    assert "c2VjcmV0" not in out and "outside the spec's runbooks/ folder" in out and "--follow-symlinks" in out
    assert not (spec_dir / "out").exists() or "c2VjcmV0" not in "".join(
        p.read_text() for p in (spec_dir / "out").rglob("*.md"))


def test_a_runbooks_folder_linked_to_the_repository_root_is_refused(tmp_path):
    """runbooks/ -> . would put the whole repository, .git included, inside runbooks/."""
    _git_repo_with_a_token(tmp_path)
    (tmp_path / "gpumon.yaml").write_text(BASE, "utf-8")
    (tmp_path / "GpuLost.md.j2").write_text('{% include "cfg.md.j2" %}\n')
    (tmp_path / "cfg.md.j2").symlink_to(".git/config")
    (tmp_path / "runbooks").symlink_to(".")
    result = _render(tmp_path)
    assert result.exit_code == 2 and "c2VjcmV0" not in result.output, result.output
    assert "outside the spec's runbooks/ folder" in result.output
    assert not (tmp_path / "out/runbooks/GpuLost.md").exists()


def test_a_template_name_in_version_control_metadata_is_refused(spec_dir):
    """A runbooks/ folder that is a checkout of its own has its .git inside: still never read."""
    _git_repo_with_a_token(spec_dir / "runbooks")
    _template(spec_dir, '# x\n{% include ".git/config" %}\n')
    for extra in ((), ("--follow-symlinks",)):
        out = _problem(_render(spec_dir, *extra), "GpuLost.md.j2", 2)
        assert "c2VjcmV0" not in out and "version-control metadata" in out


def test_a_symlinked_runbooks_folder_leading_out_is_refused(tmp_path, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    (elsewhere / "GpuLost.md.j2").write_text("hunter2")
    (tmp_path / "gpumon.yaml").write_text(BASE, "utf-8")
    (tmp_path / "runbooks").symlink_to(elsewhere)
    result = _render(tmp_path)
    assert result.exit_code == 2 and "outside the spec's runbooks/ folder" in result.output


def test_a_fifo_template_is_refused_without_waiting(spec_dir):
    os.mkfifo(spec_dir / "runbooks/GpuLost.md.j2")
    result = _render(spec_dir)
    assert result.exit_code == 2 and "a FIFO" in result.output, result.output


def test_a_template_over_max_input_mib_is_refused(spec_dir):
    _template(spec_dir, "x" * ((1 << 20) + 1))
    result = _render(spec_dir, "--max-input-mib", "1")
    assert result.exit_code == 2 and "over the cap" in result.output, result.output


@pytest.mark.parametrize("text, line, words", [
    ("# a\n{{ 'x' * 400000000 }}\n", 2, "over the cap"),
    ("# a\n\n{{ [1] * 10**8 }}\n", 3, "over the cap"),
    ("{{ 2 ** 100000000 }}", 1, "bits"),
    ("{% set ns = namespace(s='x') %}\n{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}", 2,
     "over the cap"),
    ("{% set ns = namespace(s='x') %}\n{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}{% endfor %}", 2,
     "over the cap"),
    ("{{ 'x'.center(1000000000) }}", 1, "over the cap"),
    ('# a\n{{ ("%0300000000d" % 1)|length }}', 2, "over the cap"),
    ('{{ "%.300000000f%s" % (1, 2) }}', 1, "over the cap"),
    ('{{ "%(a)0300000000d"|format(a=1) }}', 1, "over the cap"),
    ('{{ "%0300000000d"|format(1) }}', 1, "over the cap"),
    ('{{ "%*d" % (300000000, 1) }}', 1, "'*' width"),
    ("# a\n{{ range(10**9)|list|length }}", 2, "Range too big"),
    ("# a\n\n\n{{ nosuchvar.attr }}", 4, "'nosuchvar' is undefined"),
    ("# a\n{{ ''.__class__.__mro__ }}", 2, "unsafe"),
    ("# a\n{% if %}", 2, "Expected an expression"),
    ("{% macro f(n) %}{{ f(n) }}{% endmacro %}\n{{ f(1) }}", 1, "recurses too deeply"),
    ("# a\n{{ 1 / 0 }}", 2, "ZeroDivisionError"),
])
def test_every_template_error_is_file_line_and_exit_2(spec_dir, text, line, words):
    _template(spec_dir, text)
    assert words in _problem(_render(spec_dir), "runbooks/GpuLost.md.j2", line)


def test_a_filter_building_gigabytes_hits_the_memory_cap(spec_dir, monkeypatch):
    monkeypatch.setattr(runbooksandbox, "MEMORY_LIMIT", 64 << 20)
    _template(spec_dir, "# a\n{{ 'x'|center(1000000000) }}")
    assert "memory" in _problem(_render(spec_dir), "runbooks/GpuLost.md.j2", 2)


def test_a_slow_template_is_stopped_at_the_time_limit(spec_dir, monkeypatch):
    monkeypatch.setattr(runbooksandbox, "TIME_LIMIT", 0.3)
    _template(spec_dir, "# a\n{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}")
    assert "took longer than 0.3 s" in _problem(_render(spec_dir), "runbooks/GpuLost.md.j2", 2)


def test_a_page_over_the_output_cap_is_refused(spec_dir, monkeypatch):
    _template(spec_dir, "{% for i in range(1100) %}{{ 'x' * 1000 }}{% endfor %}")
    result = _render(spec_dir)
    assert result.exit_code == 2 and "over the cap" in result.output, result.output


def test_percent_formatting_within_the_cap_still_works(spec_dir):
    _template(spec_dir, '# {{ "%s: %05.1f%%" % (alert, 3.14159) }} {{ "%-6s|"|format("ab") }} {{ 7 % 4 }}\n')
    assert _render(spec_dir).exit_code == 0
    assert "# GpuLost: 003.1% ab    | 3" in (spec_dir / "out/runbooks/GpuLost.md").read_text()


def test_an_include_of_a_bundled_template_still_works(spec_dir):
    _template(spec_dir, "# {{ alert }}\n{% import '_steps.md.j2' as steps %}{{ steps.verify(alert, rule_file) }}")
    assert _render(spec_dir).exit_code == 0
    assert "GpuLost" in (spec_dir / "out/runbooks/GpuLost.md").read_text()


@pytest.mark.parametrize("value, span", [
    ("plain", "`plain`"),
    ("x` **[Fix](https://evil.example/)** `y", "``x` **[Fix](https://evil.example/)** `y``"),
    ("a``b", "```a``b```"),
    ("`", "`` ` ``"),
])
def test_code_span_cannot_be_ended_by_the_value(value, span):
    assert runbooks.code_span(value) == span


def test_a_spec_value_with_backticks_cannot_inject_markdown_into_the_bundled_runbooks(tmp_path):
    markdown_it = pytest.importorskip("markdown_it")     # rich's dependency
    from gpumon.render import render
    from gpumon.spec import load_spec

    hostile = "x` **[Fix: run this](https://evil.example/)** `y"
    spec = tmp_path / "gpumon.yaml"
    spec.write_text(BASE.replace("job: dcgm-exporter", f"job: '{hostile}'"), "utf-8")
    pages = {p: t for p, t in render(load_spec(spec)).items() if p.startswith("runbooks/")}
    assert any(hostile in text for text in pages.values())
    parser = markdown_it.MarkdownIt("commonmark")
    for path, text in pages.items():
        tokens = [t for block in parser.parse(text) for t in (block.children or [block])]
        # the value stays one code span: no link, and none of its words in plain text
        assert not [t for t in tokens if t.type == "link_open" and "evil" in str(t.attrs)], path
        assert not any(t.type == "text" and ("Fix: run this" in t.content or "evil" in t.content) for t in tokens), path



def test_an_error_inside_the_memory_bound_propagates_under_a_lower_limit():
    """With `ulimit -v` already below the sandbox's cap the cap is left alone, and an error the
    template raises inside the bound (a ValueError: `"a".index("b")`) is the template's: it once
    hit the bound's own error handling, which yielded twice (an internal error, exit 4)."""
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/statm", encoding="ascii") as fh:
        current = int(fh.read().split()[0]) * resource.getpagesize()
    resource.setrlimit(resource.RLIMIT_AS, (current + (256 << 20), hard))
    try:
        with pytest.raises(ValueError, match="substring not found"):
            with runbooksandbox._address_space(512 << 20):
                "a".index("b")
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
