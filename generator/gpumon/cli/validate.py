"""``gpumon validate``: check a live Prometheus-compatible server against the spec."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..exitcodes import EXIT_ERROR
from .common import (DEFAULT_SPEC, connect_or_exit, input_options, load_or_exit, pick_spec, read_limits,
                     server_options)

VALIDATE_EPILOG = """\b
Exit codes:
  0  every check passed (warnings and info do not fail)
  1  a check failed (missing series, bad values, rules not loaded, ...)
  2  could not check: usage, bad spec, connection, auth, not a Prometheus API,
     an unreadable dashboard (syntax, a device/FIFO, a symlink leading out,
     a file over --max-input-mib, nesting over 100 levels)
  3  inconclusive: partial responses or failed queries, and nothing failed
  4  internal error: a bug in gpumon (please report it; GPUMON_DEBUG=1 shows the traceback)
"""


class _ChecksOption(click.Option):
    """``--checks``, whose help lists the checks found in gpumon/validate/ (read when help is
    shown, so other commands do not pay for it)."""

    def get_help_record(self, ctx):
        from ..checkfind import VALIDATE, find

        names = [f"{i.id} ({i.applies})" if i.applies else i.id for i in find(VALIDATE) if i.selectable]
        self.help = f"Comma-separated subset of: {', '.join(names)}."
        return super().get_help_record(ctx)


@click.command(epilog=VALIDATE_EPILOG)
@click.argument("args", nargs=-1, type=click.Path(), metavar="[SPEC] [DASHBOARD...]")
@click.option("--spec", "spec_option", type=click.Path(dir_okay=False), metavar="SPEC",
              help="The spec, as the SPEC argument (`default`: gpumon's bundled example spec).")
@click.option("--prom", "url", required=True, metavar="URL", help="Prometheus-compatible API base URL.")
@server_options
@click.option("--timeout", default=30.0, show_default=True, type=click.FloatRange(0.1),
              help="Seconds per request: connecting, redirects and reading the whole answer; after 3 timeouts "
                   "in a row, or 6 in all, nothing more is sent.")
@click.option("--deadline", default=900.0, show_default=True, type=click.FloatRange(1),
              help="Seconds for the whole run; queries, dashboards and panels after it are not run "
                   "(inconclusive, exit 3).")
@click.option("--max-response-mib", default=64, show_default=True, type=click.IntRange(1, 4096),
              help="Refuse answers larger than this (MiB, after gzip decompression).")
@click.option("--lookback", default="1h", show_default=True, help="History to check presence and gaps over.")
@click.option("--concurrency", default=4, show_default=True, type=click.IntRange(1, 32), help="Queries in flight.")
@click.option("--checks", default=None, metavar="LIST", cls=_ChecksOption, help="Comma-separated subset of the checks.")
@click.option("--label-limit", type=click.IntRange(1), default=None,
              help="Warn about series with more label names than this [default: 30 with --backend mimir, else off].")
@click.option("--dashboards", "dashboards", multiple=True, type=click.Path(exists=True), metavar="PATH",
              help="Grafana dashboards to run panel by panel (JSON files, ConfigMaps, folders; repeatable). "
                   "Without SPEC only the dashboards are checked, with the label names of the nearest gpumon.yaml "
                   "(or `--spec default`). Queries over 16 KiB, 200 operators or 64 nested brackets, variables "
                   "over 1000 values and panels past 1000 per dashboard are not evaluated (inconclusive).")
@click.option("--dashboard-max-queries", type=click.IntRange(1), default=600, show_default=True,
              help="Cap on the queries --dashboards sends (variables, panel targets, selector probes).")
@click.option("--preview-range", metavar="DURATION",
              help="With --dashboards and --format html: draw the panels over the last DURATION instead of each "
                   "dashboard's own time range (the report draws every panel from the live data).")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "sarif", "junit", "github", "html"]),
              default="text", show_default=True,
              help="html: one self-contained file (with -o the terminal gets the text report).")
@click.option("-o", "--output", "out_file", type=click.Path(dir_okay=False), help="Write the report here too.")
@input_options
def validate(args, url, server, timeout, deadline, max_response_mib, lookback, concurrency, checks, label_limit, dashboards,
             dashboard_max_queries, preview_range, fmt, out_file, follow_symlinks, max_input_mib, spec_option) -> None:
    """Check a live Prometheus against SPEC: targets, every spec'd series on every GPU, values,
    gaps, loaded rules, driver versions. Says what is missing, where, since when and why.

    With --dashboards, also run every panel of those Grafana dashboards and say which are empty
    and why; paths after SPEC (or instead of it) are more dashboards, so
    `--dashboards output/dashboards extra.json` works as written."""
    from .. import reporters, writer
    from ..heap import return_large_buffers

    return_large_buffers()  # answers of a large fleet are megabytes each: give them back when freed
    from ..durations import parse_duration
    from ..validate import CHECKS
    from ..validate import validate as run_validate

    spec, more = _split_args(args)
    spec = pick_spec(spec, spec_option)
    if more and not dashboards:
        raise click.BadParameter(f"{more[0]} is not a spec; pass dashboards with --dashboards", param_hint="SPEC")
    dashboards = tuple(dashboards) + more
    try:
        lookback_s = parse_duration(lookback)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--lookback") from None
    preview_s = None
    if preview_range:  # the preview's modules (and the dashboards' they import) only when asked for
        from ..preview.fetch import parse_range

        try:
            preview_s = parse_range(preview_range)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--preview-range") from None
    chosen = tuple(c.strip() for c in checks.split(",")) if checks else () if dashboards and not spec else tuple(CHECKS)
    unknown = [c for c in chosen if c not in CHECKS]
    if unknown:
        raise click.BadParameter(f"unknown check(s) {', '.join(unknown)}; choose from {', '.join(CHECKS)}",
                                 param_hint="--checks")
    model = load_or_exit(spec)  # its rule groups are built while the first queries run
    client = connect_or_exit("validate", url, server, timeout=timeout, deadline=deadline,
                             max_response_mib=max_response_mib)
    with client:
        limit = label_limit or (30 if server.backend == "mimir" else None)
        report, code = run_validate(model, client, lookback=lookback_s, concurrency=concurrency, checks=chosen,
                                    label_limit=limit, dashboards=tuple(dashboards),
                                    dashboard_max_queries=dashboard_max_queries,
                                    matrix=fmt == "html", preview=fmt == "html",
                                    preview_range=preview_s,
                                    read_limits=read_limits(follow_symlinks, max_input_mib))  # the matrix is GPUs x fields: only HTML shows it
    if dashboards and not chosen:
        report.summary = _dashboards_only(report.summary, spec)
    text = reporters.render(report, fmt, color=fmt == "text" and sys.stdout.isatty())
    # an HTML file is for a browser: with -o, the terminal gets the text report instead
    shown = reporters.render(report, "text", color=sys.stdout.isatty()) if fmt == "html" and out_file else text
    click.echo(shown, nl=False)
    _say_unreadable(report)
    if out_file:
        try:
            writer.atomic_write(Path(out_file), (reporters.render(report, fmt) if fmt == "text" else text).encode())
        except OSError as exc:
            click.echo(f"gpumon validate: cannot write {out_file}: {exc.strerror or exc}", err=True)
            sys.exit(EXIT_ERROR)
    sys.exit(code)


def _dashboards_only(summary: dict, named: str | None) -> dict:
    """The summary of a dashboards-only run says which spec gave the label names, and that no spec
    check ran (a bare ``spec: gpumon.yaml`` read as if the fleet had been checked against it)."""
    how = "named" if named else "the nearest gpumon.yaml from the working directory upwards"
    out = {}
    for key, value in summary.items():
        out[key] = value
        if key == "spec":
            out["spec use"] = f"label names only ({how}); no spec check ran: pass SPEC to check the fleet too"
    return out


def _say_unreadable(report) -> None:
    """On stderr, as lint and diff say it: which dashboard files could not be read (the run exits
    2 for them, whatever the server's checks found)."""
    from ..readers.model import UNREADABLE

    files = sorted({(f.location.file if f.location else f.subject) for f in report.findings
                    if f.check == UNREADABLE})
    if files:
        shown = ", ".join(files[:5]) + (f" and {len(files) - 5} more" if len(files) > 5 else "")
        click.echo(f"gpumon validate: {len(files)} dashboard file(s) could not be read, so their panels were not "
                   f"run (see the input-unreadable findings): {shown}", err=True)


def _split_args(args: tuple[str, ...]) -> tuple[str | None, tuple[str, ...]]:
    """(the spec, other paths): the spec is the first YAML file with a top-level ``metrics:`` key
    and no ``kind:`` (a ConfigMap of a dashboard has one); every other path is a dashboard."""
    spec, rest = None, []
    for path in args:
        if spec is None and (path == DEFAULT_SPEC or _is_spec(Path(path))):
            spec = path
        else:
            rest.append(path)
    return spec, tuple(rest)


def _is_spec(path: Path) -> bool:
    if path.suffix in (".yaml", ".yml") and not path.exists():
        return True  # load_or_exit says how to get one
    if not path.is_file() or path.suffix not in (".yaml", ".yml"):
        return False
    from ..readers.files import Limits, Refused, read_text

    # bounded like every input (a huge file or a device named here is a dashboard to refuse later);
    # symlinks followed: a spec mounted from a ConfigMap is one
    try:
        lines = read_text(path, Limits(follow_symlinks=True)).splitlines()
    except (OSError, Refused):
        return False
    return any(ln.startswith("metrics:") for ln in lines) and not any(ln.startswith("kind:") for ln in lines)
