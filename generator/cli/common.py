"""What every command shares: exit codes and loading the spec (or exiting 2 with every problem).

Only ``click`` is imported at module level, so ``gpumon --help`` stays fast; the library is
imported inside the functions that need it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR, EXIT_INCONCLUSIVE = 0, 1, 2, 3

EPILOG = """\b
Exit codes:
  0  all good
  1  findings: drift, lint errors, failed checks
  2  usage, spec/config or connection error
  3  (validate) inconclusive: partial data, no failures
"""


def load_or_exit(path: str | None):
    """Load the spec at ``path`` (default: ``./gpumon.yaml``, else the bundled default spec), or
    print every problem as ``FILE:LINE:COL: path: message`` on stderr and exit 2. A spec file that
    does not exist is not a problem in a spec: it says how to get one."""
    from ..spec import SpecError, default_spec_path, load_spec

    if path is None:
        path = "gpumon.yaml" if Path("gpumon.yaml").is_file() else str(default_spec_path())
    if not Path(path).is_file():
        click.echo(f"gpumon: no spec found at {path}: pass SPEC or run `gpumon init`", err=True)
        sys.exit(EXIT_ERROR)
    try:
        return load_spec(path)
    except SpecError as exc:
        for problem in exc.problems:
            click.echo(str(problem), err=True)
        click.echo(f"gpumon: {len(exc.problems)} problem(s) in the spec", err=True)
        sys.exit(EXIT_ERROR)
