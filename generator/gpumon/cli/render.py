"""``gpumon render``: spec -> output folder (or, with ``--check``, the drift against it)."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

import click

from ..exitcodes import EXIT_ERROR, EXIT_FINDINGS
from .common import DEFAULT_SPEC, EPILOG, input_options, load_built_or_exit, pick_spec, read_limits


@click.command(epilog=EPILOG)
@click.argument("spec", required=False, type=click.Path(dir_okay=False))
@click.option("--spec", "spec_option", type=click.Path(dir_okay=False), metavar="SPEC",
              help="The spec, as the SPEC argument (`default`: gpumon's bundled example spec).")
@click.option("-o", "--output", "out", default=None, type=click.Path(file_okay=False),
              help="Folder to write into [default: output/ beside the spec; ./output for `default`].")
@click.option("--check", is_flag=True, help="Write nothing; list what differs and exit 1 if anything does.")
@input_options
def render(spec: str | None, spec_option: str | None, out: str | None, check: bool, follow_symlinks: bool,
           max_input_mib: int) -> None:
    """Render rules, dashboards, rule tests and runbooks from SPEC (default: the gpumon.yaml in
    this folder or the nearest one above it; `default` is gpumon's bundled example spec) into
    the -o folder (default: the output/ folder beside the spec, from whichever folder you run it).

    Output is byte-identical for the same spec on any machine. Files gpumon wrote earlier and no
    longer renders are removed; other files in the folder are never touched (a file gpumon did
    not write at a path it renders is an error, exit 2, as is a FIFO or device there). A manifest line
    naming anything but a file gpumon renders inside the folder is an error (exit 2). The write is
    all or nothing: a failed or killed render leaves the old tree (finished on the next run).

    Runbook templates of a runbooks/ folder beside the spec are read like lint's inputs
    (--follow-symlinks, --max-input-mib) and rendered in a bounded sandbox; an error in one is
    reported as FILE:LINE (exit 2).
    """
    from .. import render as render_mod
    from .. import writer

    from ..oneline import one_line
    from ..runbooks import TemplateProblem

    spec = pick_spec(spec, spec_option)
    model, groups = load_built_or_exit(spec)
    given, out = out, out or default_output(spec, model.path)
    if not given and (why := outside_default(spec, model.path, Path(out))):
        click.echo(f"gpumon: {out}/ {why}; pass that folder with -o to render there", err=True)
        sys.exit(EXIT_ERROR)
    try:
        files = render_mod.render(model, groups, inputs=read_limits(follow_symlinks, max_input_mib))
    except TemplateProblem as exc:      # the spec's own runbook templates: FILE:LINE: message
        click.echo(str(exc), err=True)
        sys.exit(EXIT_ERROR)
    folder = Path(out)
    if check:
        try:
            drift = writer.diff(files, folder)
        except writer.OutputError as exc:
            # it may quote a line of the output folder's manifest, which a pull request controls
            click.echo(f"gpumon: {one_line(exc)}", err=True)
            sys.exit(EXIT_ERROR)
        if drift.any:
            for line in drift.lines():
                click.echo(line)
            # the exact command that fixes it, quoted for a shell (paths may hold spaces)
            command = " ".join(["gpumon", "render", *([shlex.quote(spec)] if spec else []),
                                *(["-o", shlex.quote(given)] if given else [])])
            click.echo(f"gpumon: {out}/ is out of date with {model.path}; run `{command}`", err=True)
            sys.exit(EXIT_FINDINGS)
        click.echo(f"{out}/ is up to date with {model.path} ({len(files)} files)")
        return
    try:
        drift = writer.write(files, folder)
    except writer.OutputError as exc:
        click.echo(f"gpumon: {one_line(exc)}", err=True)
        sys.exit(EXIT_ERROR)
    except OSError as exc:
        click.echo(f"gpumon: cannot write {exc.filename or out}: {exc.strerror or exc}", err=True)
        sys.exit(EXIT_ERROR)
    for line in drift.lines(applied=True):
        click.echo(line)
    click.echo(f"wrote {out}/ from {model.path} ({len(files)} files, {len(drift.added) + len(drift.changed)} "
               f"changed, {len(drift.removed)} removed)")


def outside_default(spec: str | None, spec_path: str, out: Path) -> str | None:
    """Why the default output folder ``out`` is not the one it names, or None: a folder (or a folder
    on the way) that is a symlink leading out of the folder the default is relative to (the spec's;
    the working directory for ``default``). A repository can commit ``output`` as a symlink to any
    path, and CI rendering there would create and replace gpumon's files wherever it points: an
    explicit ``-o`` says the user chose that place."""
    base = Path.cwd() if spec == DEFAULT_SPEC else Path(spec_path).parent
    try:
        base, target = base.resolve(), out.resolve()
    except (OSError, RuntimeError):
        return "is a symlink loop"
    if target == base or base in target.parents:
        return None
    return f"leads through a symlink to {target}, outside {base}"


def default_output(spec: str | None, spec_path: str) -> str:
    """The folder to render into when ``-o`` is not given: ``output/`` beside the spec file, so
    ``gpumon render`` and ``gpumon render --check`` mean the same tree from any subfolder (as
    ``make render`` does from the root); ``./output`` for the bundled spec (``default``), which
    lives inside the installed package. Relative to the working directory when below it."""
    if spec == DEFAULT_SPEC:
        return "output"
    folder = Path(spec_path).parent / "output"
    return os.path.relpath(folder) if not folder.is_absolute() or folder.is_relative_to(Path.cwd()) else str(folder)
