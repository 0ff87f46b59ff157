"""``gpumon diff``: what changes between two renders, as Markdown for a PR comment."""

from __future__ import annotations

import sys

import click

from .common import EXIT_ERROR, EXIT_FINDINGS


@click.command("diff")
@click.argument("old")
@click.argument("new")
def diff_command(old: str, new: str) -> None:
    """Summarise what changes between OLD and NEW rules and dashboards, as Markdown for a PR
    comment. OLD and NEW are files, directories, or git revisions of a path: git:REV:PATH
    (e.g. git:origin/main:output).

    \b
    Exit codes: 0 no semantic difference; 1 differences; 2 unreadable input; 4 internal error.
    """
    from ..diff import compare
    from ..diff.sources import SourceError, read

    try:
        before, after = read(old), read(new)
    except SourceError as exc:
        click.echo(f"gpumon: {exc}", err=True)
        sys.exit(EXIT_ERROR)
    result = compare(before, after, old, new)
    click.echo(result.markdown(), nl=False)
    if result.any:
        sys.exit(EXIT_FINDINGS)
