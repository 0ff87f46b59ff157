"""``gpumon diff``: what changes between two renders, as Markdown for a PR comment."""

from __future__ import annotations

import sys

import click

from ..exitcodes import EXIT_ERROR, EXIT_FINDINGS
from .common import input_options, read_limits


@click.command("diff")
@click.argument("old")
@click.argument("new")
@click.option("--max-chars", default=65536, show_default=True, type=click.IntRange(1000),
              help="Cap on the comment's length (GitHub rejects comments over 65,536 characters).")
@input_options
def diff_command(old: str, new: str, max_chars: int, follow_symlinks: bool, max_input_mib: int) -> None:
    """Summarise what changes between OLD and NEW rules and dashboards, as Markdown for a PR
    comment. OLD and NEW are files, directories, or git revisions of a path: git:REV:PATH
    (e.g. git:origin/main:output). Panels and rules are matched by what they are (title, the
    fields they read, alert labels), not by position; the comment leads with the change per DCGM
    field and is cut (with a note) to fit --max-chars.

    \b
    Exit codes: 0 no semantic difference; 1 differences; 2 unreadable input (also a device/FIFO,
                a symlink leading out, a file over --max-input-mib, nesting over 100 levels);
                4 internal error.
    """
    from ..diff import compare
    from ..oneline import one_line
    from ..diff.sources import SourceError, read

    try:
        limits = read_limits(follow_symlinks, max_input_mib)
        before, after = read(old, limits), read(new, limits)
    except SourceError as exc:
        # the message names files and quotes parser errors of the pull request's input: one line
        click.echo(f"gpumon: {one_line(exc)}", err=True)
        sys.exit(EXIT_ERROR)
    result = compare(before, after, old, new)
    click.echo(result.markdown(limit=max_chars), nl=False)
    if result.any:
        sys.exit(EXIT_FINDINGS)
