"""``gpumon lint``: check rule files, PrometheusRule objects and dashboards (PR checks)."""

from __future__ import annotations

import os
import sys

import click

from ..exitcodes import EXIT_ERROR, EXIT_FINDINGS
from .common import input_options, load_built_or_exit, read_limits, specs_for

#: report formats (``gpumon.reporters.FORMATS``; kept here so ``--help`` does not import it)
FORMATS = ("text", "json", "sarif", "junit", "github")
FAIL_ON = ("error", "warning", "info", "never")


def _split(values: tuple[str, ...]) -> list[str]:
    return [v.strip() for value in values for v in value.split(",") if v.strip()]


def _merged(reports):
    """One report of lint runs over trees governed by different specs: findings and cases added
    up, each summary line joined (``spec: a/gpumon.yaml; b/gpumon.yaml``)."""
    out = reports[0]
    for more in reports[1:]:
        out.findings += more.findings
        out.checks += [c for c in more.checks if c not in out.checks]
        for key, value in more.summary.items():
            out.summary[key] = f"{out.summary[key]}; {value}" if key in out.summary else value
    return out


@click.command("lint")
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--spec", "spec_path", type=click.Path(dir_okay=False),
              help="Spec giving metric kinds, labels, intervals, rule selector labels (default: for each PATH, the nearest "
                   "gpumon.yaml from its folder upwards; `default`: the bundled example).")
@click.option("-f", "--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True,
              help="Report format: SARIF 2.1.0 for code scanning, JUnit XML, GitHub workflow annotations.")
@click.option("--fail-on", type=click.Choice(FAIL_ON), default="error", show_default=True,
              help="Exit 1 when a finding has this severity or a higher one.")
@click.option("--disable", multiple=True, metavar="CHECK[,CHECK]", help="Skip these checks (repeatable).")
@click.option("--max-object-bytes", type=click.IntRange(min=1), default=None, metavar="BYTES",
              help="object-too-large-to-apply: the most bytes an object's kubectl last-applied annotation "
                   "may take (default 235929, 90 % of the API server's 262144).")
@click.option("--list-checks", is_flag=True, help="Describe every check and exit.")
@click.option("--skip-other-files", is_flag=True,
              help="Skip named files that hold no rules or dashboards (specs, promtool tests, other objects) "
                   "instead of reporting them unreadable, as in a walked folder (the pre-commit hook sets it).")
@input_options
def lint_command(paths, spec_path, fmt, fail_on, disable, max_object_bytes, list_checks, skip_other_files,
                 follow_symlinks, max_input_mib) -> None:
    """Check rule files, PrometheusRule objects and Grafana dashboards (JSON files, ConfigMaps)
    under PATHS (files or directories; default: output/).

    Silence a check for one rule with a comment `# gpumon-lint: ignore CHECK` on the rule or
    right above it, for a whole YAML file with `# gpumon-lint: ignore-file CHECK`.

    \b
    Exit codes: 0 nothing at or above --fail-on; 1 findings at or above it;
                2 usage error, bad spec, or unreadable input (YAML/JSON syntax, missing path,
                  a device/FIFO, a symlink leading out, a file over --max-input-mib,
                  YAML/JSON nested over 100 levels);
                4 internal error (a bug: please report it).
    """
    from .. import reporters
    from ..checkfind import sections
    from ..lint import check_ids, describe, failing, lint
    from ..readers.model import UNREADABLE

    if list_checks:
        import textwrap

        for cid, severity, doc in describe():
            parts = {k: v.replace("``", "`") for k, v in sections(doc).items()}
            click.echo(f"{cid} ({severity}): {parts['summary']}")
            for key in ("what", "why", "silence"):
                if parts[key]:
                    click.echo(textwrap.fill(f"{key.capitalize()}: {parts[key]}", 100, initial_indent="    ",
                                             subsequent_indent="      "))
            click.echo(f"    Docs: docs/checks/lint/{cid}.md\n")
        return
    disabled = _split(disable)
    unknown = sorted(set(disabled) - set(check_ids()) - {UNREADABLE})
    if unknown:
        click.echo(f"gpumon: unknown check id(s) for --disable: {', '.join(unknown)}; "
                   f"known: {', '.join(check_ids())}", err=True)
        sys.exit(EXIT_ERROR)
    paths = list(paths) or ["output"]
    # each file is checked against the spec that governs it (the nearest gpumon.yaml above it),
    # unless --spec names one for all
    groups = {spec_path: paths} if spec_path else {os.path.relpath(k): v for k, v in specs_for(paths).items()}
    sizes = {"max_object_bytes": max_object_bytes} if max_object_bytes else {}
    reports = []
    for spec, group in groups.items():
        model, rule_groups = load_built_or_exit(spec)
        reports.append(lint(group, model, disabled, read_limits(follow_symlinks, max_input_mib),
                            skip_other=skip_other_files, groups=rule_groups, **sizes))  # a bug: exit 4
    report = reports[0] if len(reports) == 1 else _merged(reports)
    click.echo(reporters.render(report, fmt), nl=False)
    if any(f.check == UNREADABLE for f in report.findings):
        click.echo("gpumon: some input could not be read (see input-unreadable findings)", err=True)
        sys.exit(EXIT_ERROR)
    if failing(report, fail_on):
        sys.exit(EXIT_FINDINGS)
