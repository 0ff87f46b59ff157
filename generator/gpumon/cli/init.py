"""``gpumon init``: write a starter spec and its schema."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..exitcodes import EXIT_ERROR


@click.command("init")
@click.argument("folder", default=".", type=click.Path(file_okay=False))
@click.option("--force", is_flag=True, help="Overwrite gpumon.yaml / gpumon.schema.json if they exist.")
@click.option("--runbook-url", metavar="URL", default=None,
              help="Absolute base of the alerts' runbook links, e.g. https://github.com/acme/gitops/blob/main/"
                   "monitoring/runbooks (default: none; the spec says how to set it).")
def init(folder: str, force: bool, runbook_url: str | None) -> None:
    """Write a starter spec (FOLDER/gpumon.yaml, default: the current folder) and its JSON Schema
    beside it (gpumon.schema.json; editors with the YAML language server use it for completion).

    The starter describes dcgm-exporter 4.x as shipped; edit it, then run `gpumon render`.
    """
    from .. import starter

    try:
        written = starter.write(Path(folder), force=force, runbook_url=runbook_url)
    except starter.InitError as exc:
        click.echo(f"gpumon init: {exc}", err=True)
        sys.exit(EXIT_ERROR)
    except OSError as exc:
        click.echo(f"gpumon init: cannot write {exc.filename or folder}: {exc.strerror or exc}", err=True)
        sys.exit(EXIT_ERROR)
    for path in written:
        click.echo(f"wrote {path}")
    click.echo(f"next: edit {written[0]}, then `gpumon render {written[0]}`")
