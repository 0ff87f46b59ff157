"""gpumon's command line. Only parses flags, finds files and calls the library.

Exit codes (all commands): 0 all good; 1 findings (drift, lint errors, failed checks);
2 usage, config or connection errors; validate adds 3 (inconclusive: partial data, no failures).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from . import render as render_mod
from . import writer
from .spec import SpecError, default_spec_path, load_spec

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
    print every problem as ``FILE:LINE:COL: path: message`` on stderr and exit 2."""
    if path is None:
        path = "gpumon.yaml" if Path("gpumon.yaml").is_file() else str(default_spec_path())
    try:
        return load_spec(path)
    except SpecError as exc:
        for problem in exc.problems:
            click.echo(str(problem), err=True)
        click.echo(f"gpumon: {len(exc.problems)} problem(s) in the spec", err=True)
        sys.exit(EXIT_ERROR)


@click.group(epilog=EPILOG, context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """gpumon: make missing GPU metrics loud and checkable.

    Render alerting/recording rules and Grafana dashboards for dcgm-exporter from a declarative
    spec, and validate a live Prometheus against it.
    """


@cli.command(epilog=EPILOG)
@click.argument("spec", required=False, type=click.Path(dir_okay=False))
@click.option("-o", "--output", "out", default="output", show_default=True, type=click.Path(file_okay=False),
              help="Folder to write into.")
@click.option("--check", is_flag=True, help="Write nothing; list what differs and exit 1 if anything does.")
def render(spec: str | None, out: str, check: bool) -> None:
    """Render rules, dashboards, rule tests and runbooks from SPEC (default: ./gpumon.yaml).

    Output is byte-identical for the same spec on any machine. Files gpumon wrote earlier and no
    longer renders are removed; other files in the folder are never touched.
    """
    model = load_or_exit(spec)
    files = render_mod.render(model)
    folder = Path(out)
    if check:
        drift = writer.diff(files, folder)
        if drift.any:
            for line in drift.lines():
                click.echo(line)
            click.echo(f"gpumon: {out}/ is out of date with {model.path}; run `gpumon render` (or `make render`)",
                       err=True)
            sys.exit(EXIT_FINDINGS)
        click.echo(f"{out}/ is up to date ({len(files)} files)")
        return
    try:
        drift = writer.write(files, folder)
    except OSError as exc:
        click.echo(f"gpumon: cannot write {exc.filename or out}: {exc.strerror or exc}", err=True)
        sys.exit(EXIT_ERROR)
    for line in drift.lines():
        click.echo(line)
    click.echo(f"wrote {out}/ ({len(files)} files, {len(drift.added) + len(drift.changed)} changed, "
               f"{len(drift.removed)} removed)")


from .lint.command import lint_command  # noqa: E402 - registered after the group exists
from .diff.command import diff_command  # noqa: E402

cli.add_command(lint_command)
cli.add_command(diff_command)


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="gpumon")


if __name__ == "__main__":  # pragma: no cover
    main()
