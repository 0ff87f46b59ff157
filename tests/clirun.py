"""Run ``gpumon`` in process, shaped like :class:`subprocess.CompletedProcess`: for tests of what a
command does, not of the process boundary (a fresh interpreter costs about 1 s of CPU in imports
and spec loading per call). What a process adds is tested where it matters:
``test_render_is_deterministic_across_processes``, ``test_memory_stays_bounded``, the package
install and the crash tests of ``test_writes``. An exception no command turns into an exit code
still ends as exit 4 (``gpumon.cli._Gpumon``), so a bug cannot pass as exit 1 or 2."""

from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from click.testing import CliRunner

from gpumon.cli import cli

from .conftest import ROOT


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str


@contextmanager
def _cwd(path: Path):
    before = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


def gpumon(*args: str, cwd: Path = ROOT, env: dict[str, str | None] | None = None) -> Ran:
    """``gpumon ARGS`` run in ``cwd``; ``env`` sets (or, with None, unsets) variables for the run."""
    with _cwd(cwd):
        result = CliRunner().invoke(cli, list(args), env=env)
    return Ran(result.exit_code, result.stdout, result.stderr)
