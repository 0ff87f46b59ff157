"""``gpumon preview``: draw every panel of Grafana dashboards from a live server into one HTML page."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..exitcodes import EXIT_ERROR
from .common import connect_or_exit, input_options, load_built_or_exit, read_limits, server_options

PREVIEW_EPILOG = """\b
Exit codes:
  0  the page is written and no panel fails validate --dashboards (empty by
     design, or a warning such as an optional field absent, does not fail)
  1  the page is written, and a panel is empty or its query failed where data
     was expected (the panel says why, as validate --dashboards does)
  2  could not draw: usage, bad spec, connection, auth, not a Prometheus API,
     an unreadable dashboard, the page could not be written
  3  inconclusive: partial responses, a cap or the deadline reached
  4  internal error: a bug in gpumon (please report it; GPUMON_DEBUG=1 shows the traceback)
"""


@click.command(epilog=PREVIEW_EPILOG)
@click.argument("dashboards", nargs=-1, required=True, type=click.Path(exists=True), metavar="DASHBOARD...")
@click.option("--prom", "url", required=True, metavar="URL", help="Prometheus-compatible API base URL.")
@click.option("-o", "--output", "out_file", default="gpumon-preview.html", show_default=True,
              type=click.Path(dir_okay=False), help="The HTML page to write (`-`: standard output).")
@click.option("--spec", "spec_option", type=click.Path(dir_okay=False), metavar="SPEC",
              help="The spec whose label names explain empty panels (default: the nearest gpumon.yaml; "
                   "`default`: gpumon's bundled example spec).")
@click.option("--time-range", "time_range", metavar="DURATION",
              help="Draw the last DURATION (15m, 6h) instead of each dashboard's own time range.")
@server_options
@click.option("--timeout", default=30.0, show_default=True, type=click.FloatRange(0.1), help="Seconds per request.")
@click.option("--deadline", default=300.0, show_default=True, type=click.FloatRange(1),
              help="Seconds for the whole run; panels after it are not drawn (exit 3).")
@click.option("--max-response-mib", default=64, show_default=True, type=click.IntRange(1, 4096),
              help="Refuse answers larger than this (MiB, after gzip decompression).")
@click.option("--dashboard-max-queries", type=click.IntRange(1), default=600, show_default=True,
              help="Cap on the queries sent for the panels' verdicts, and again for drawing them.")
@click.option("--concurrency", default=4, show_default=True, type=click.IntRange(1, 32), help="Queries in flight.")
@input_options
def preview(dashboards, url, out_file, spec_option, time_range, server, timeout, deadline, max_response_mib,
            dashboard_max_queries, concurrency, follow_symlinks, max_input_mib) -> None:
    """Draw every panel of DASHBOARD... (JSON files, ConfigMaps, folders) from the live server at
    --prom into one self-contained HTML page, in each dashboard's own grid layout: time series,
    stat, gauge, bar gauge, table, heatmap and state timeline panels, over the dashboard's time
    range. An empty panel says why, as `gpumon validate --dashboards` explains it."""
    from .. import writer
    from ..preview import fetch
    from ..redact import redact
    from ..preview.layout import page
    from ..validate import validate as run_validate

    try:
        override = fetch.parse_range(time_range)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--time-range") from None
    model, groups = load_built_or_exit(spec_option)
    client = connect_or_exit("preview", url, server, timeout=timeout, deadline=deadline,
                             max_response_mib=max_response_mib)
    with client:
        report, code = run_validate(model, client, checks=(), concurrency=concurrency, dashboards=tuple(dashboards),
                                    dashboard_max_queries=dashboard_max_queries, matrix=False, progress=False,
                                    groups=groups,
                                    read_limits=read_limits(follow_symlinks, max_input_mib), preview=True,
                                    preview_range=override)
    if code == EXIT_ERROR:  # the server could not be asked, or a dashboard could not be read
        for f in report.sorted_findings():
            if f.severity == "error" and (f.check == "input-unreadable" or f.case and f.case.startswith("reachability/")):
                click.echo(redact(f"gpumon preview: {f.subject}: {f.message}" + (f" ({f.hint})" if f.hint else "")),
                           err=True)
        sys.exit(EXIT_ERROR)
    # the one redaction step every report passes through (gpumon.redact), on the finished page
    html = redact(page(report.previews, "Dashboards on live data", client.base))
    if out_file == "-":
        click.echo(html, nl=False)
    else:
        try:
            writer.atomic_write(Path(out_file), html.encode())
        except OSError as exc:
            click.echo(f"gpumon preview: cannot write {out_file}: {exc.strerror or exc}", err=True)
            sys.exit(EXIT_ERROR)
        # one count of one set of verdicts: "with data" and the tally after it were once two
        # passes over the server (the drawing's range queries and validate's verdicts), which
        # disagreed while the server was filling up
        from ..validate.dashboards import summary
        click.echo(f"{out_file}: {len(report.previews)} dashboard(s), {summary(report.panels, with_data=True)}")
    sys.exit(code)
