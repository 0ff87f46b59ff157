"""The one internal-error exit path (issue #15, finding 4): an uncaught exception in any command
exits 4 with one redacted line asking for a bug report, never a traceback or exit 1."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from gpumon import redact
from gpumon.cli import EXIT_INTERNAL, cli

from .conftest import ROOT


def _boom(*_a, **_k):
    raise RuntimeError("boom while holding Bearer s3cr3t-token-value\nsecond line")


@pytest.mark.parametrize("args,target", [
    (["render", str(ROOT / "gpumon.yaml"), "-o", "OUT"], "gpumon.render.render"),
    (["render", str(ROOT / "gpumon.yaml"), "-o", "OUT", "--check"], "gpumon.writer.diff"),
    (["lint", str(ROOT / "output"), "--spec", str(ROOT / "gpumon.yaml")], "gpumon.lint.lint"),
    # one rules file each side: reading all of output/ costs seconds and is not what fails here
    (["diff", str(ROOT / "output/rules"), str(ROOT / "output/rules")], "gpumon.diff.compare"),
    (["init", "OUT"], "gpumon.starter.write"),
])
def test_uncaught_exception_exits_4_with_one_redacted_line(tmp_path, monkeypatch, args, target):
    module, _, name = target.rpartition(".")
    monkeypatch.setattr(__import__(module, fromlist=[name]), name, _boom)
    redact.add("s3cr3t-token-value")
    try:
        args = [a.replace("OUT", str(tmp_path / "out")) for a in args]
        result = CliRunner().invoke(cli, args)
    finally:
        redact.reset()
    assert result.exit_code == EXIT_INTERNAL == 4, result.output
    err = result.stderr.strip().splitlines()
    assert len(err) == 1 and "internal error" in err[0] and "report" in err[0], err
    assert "Traceback" not in result.output and "s3cr3t" not in result.output


def test_debug_env_shows_the_traceback(tmp_path, monkeypatch):
    monkeypatch.setattr("gpumon.render.render", _boom)
    monkeypatch.setenv("GPUMON_DEBUG", "1")
    result = CliRunner().invoke(cli, ["render", str(ROOT / "gpumon.yaml"), "-o", str(tmp_path / "o")])
    assert result.exit_code == 4 and "Traceback" in result.stderr


def test_exit_code_4_is_documented():
    readme = (ROOT / "README.md").read_text()
    assert "| 4 | internal error" in readme
    assert "4  internal error" in CliRunner().invoke(cli, ["--help"]).output


def test_a_reader_that_closes_stdout_early_is_not_an_internal_error():
    """`gpumon lint --list-checks | head -1`: the pipe's reader leaves after one line. That is the
    shell's SIGPIPE case (141, nothing on stderr), not a bug report (it used to exit 4)."""
    import os
    import subprocess
    import sys

    # the reader is gone before gpumon writes (as `head` is, once it has its line): every write
    # fails, however small the output and however the processes are scheduled
    read_end, write_end = os.pipe()
    os.close(read_end)
    proc = subprocess.Popen([sys.executable, "-c", "from gpumon.cli import main; main()", "lint", "--list-checks"],
                            cwd=ROOT, stdout=write_end, stderr=subprocess.PIPE)
    os.close(write_end)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 141, err.decode()
    assert b"internal error" not in err and b"Traceback" not in err
