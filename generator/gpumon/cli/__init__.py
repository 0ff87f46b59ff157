"""gpumon's command line: one module per command, each only parsing options, loading inputs and
calling the library (imported inside the command, so ``gpumon --help`` loads little).

Exit codes (all commands): 0 all good; 1 findings (drift, lint errors, failed checks);
2 usage, config or connection errors; validate and preview add 3 (inconclusive: partial data,
no failures); 4 internal error (an uncaught exception anywhere: a bug, reported in one line, see
:func:`common.internal_error`); 141 when the reader of stdout went away first (``| head``), as a
shell reports a command ended by SIGPIPE.
"""

from __future__ import annotations

import click

from ..exitcodes import EXIT_ERROR, EXIT_FINDINGS, EXIT_INCONCLUSIVE, EXIT_INTERNAL, EXIT_OK, EXIT_SIGPIPE
from .common import EPILOG, internal_error, load_or_exit
from .diff import diff_command
from .init import init
from .lint import lint_command
from .preview import preview
from .render import render
from .simulate import simulate
from .validate import validate

__all__ = ["cli", "main", "load_or_exit", "EXIT_OK", "EXIT_FINDINGS", "EXIT_ERROR", "EXIT_INCONCLUSIVE",
           "EXIT_INTERNAL"]


class _Gpumon(click.Group):
    """The one internal-error exit path: any exception a command does not turn into an exit code
    ends in :func:`internal_error` (exit 4), for every command and for ``CliRunner`` too."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except (click.exceptions.ClickException, click.exceptions.Abort, click.exceptions.Exit, SystemExit,
                KeyboardInterrupt):
            raise
        except BrokenPipeError:
            _stdout_gone()
        except Exception as exc:  # noqa: BLE001 - a bug must not end in a traceback or in exit 1/2
            internal_error(exc, ctx.invoked_subcommand)


@click.group(cls=_Gpumon, epilog=EPILOG, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="gpumon", prog_name="gpumon", message="%(prog)s %(version)s")
def cli() -> None:
    """gpumon: make missing GPU metrics loud and checkable.

    Render alerting/recording rules and Grafana dashboards for dcgm-exporter from a declarative
    spec, and validate a live Prometheus against it.
    """


for _command in (init, render, simulate, validate, preview, lint_command, diff_command):
    cli.add_command(_command)


def _stdout_gone() -> None:
    """The reader of stdout closed it (``gpumon lint --list-checks | head -1``): not a bug. Point
    stdout at /dev/null so the interpreter's final flush cannot fail again, and exit as a command
    ended by SIGPIPE does in a shell (the Python documentation's recipe for SIGPIPE)."""
    import os
    import sys

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    sys.exit(EXIT_SIGPIPE)


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="gpumon")
