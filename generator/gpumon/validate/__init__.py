"""``gpumon validate``: prove on a live Prometheus that every spec'd series exists, and say why not.

Checks run in order, one module each, found in this folder (:mod:`gpumon.checkfind`: a module
with ``CHECK``, ``ORDER`` and ``run(ctx)``): reachability first (it stops the run when the API
cannot be used), then every check ``--checks`` may pick (:data:`CHECKS`). Each returns findings
(:class:`gpumon.findings.Finding`) and the JUnit cases it ran (one per check x metric), and
declares the finding ids it reports (``FINDINGS``). What several checks need (targets, GPU
inventory, loaded rule groups) is a shared fact on the context (:mod:`.facts`), computed on first
use, so a check finds the same whether it runs alone or after the others.

After the checks: the coverage matrix (:mod:`.coverage`, GPUs x fields, for the HTML report) and,
with ``dashboards``, every panel of those Grafana dashboards run on the server (:mod:`.dashboards`:
one verdict per panel, linked to the findings above).

Exit codes (:func:`exit_code`): 0 all checks pass; 1 a check failed; 2 could not check
(connection, auth, not a Prometheus API); 3 inconclusive (partial data or failed queries) and
nothing failed. A run in which any answer was partial has no errors, only inconclusive findings.
Warnings and info never fail a run.
"""

from __future__ import annotations

import time
from dataclasses import replace

from .. import redact
from ..durations import format_duration
from ..exitcodes import EXIT_ERROR, EXIT_FINDINGS, EXIT_INCONCLUSIVE, EXIT_OK
from ..findings import Report
from ..promapi import PromClient
from ..rules import RuleGroup
from ..spec import Spec
from ..checkfind import VALIDATE, modules
from . import coverage, reachability
from .base import Context

#: Check modules ``--checks`` may pick, by id (as used in ``--checks`` and JUnit class names), in
#: run order
CHECKS = {m.CHECK: m for m in modules(VALIDATE, selectable_only=True)}


def validate(spec: Spec, client: PromClient, *, lookback: float = 3600.0, concurrency: int = 4,
             checks: tuple[str, ...] = tuple(CHECKS), progress: bool = True,
             label_limit: int | None = None, dashboards: tuple[str, ...] = (),
             dashboard_max_queries: int | None = None, matrix: bool = True,
             read_limits=None, groups: list[RuleGroup] | None = None, preview: bool = False,
             preview_range: float | None = None) -> tuple[Report, int]:
    """Run the checks against the server behind ``client``.

    Args:
        spec: the loaded spec (job, labels, metrics, ranges, rule groups).
        client: the API client (URL, prefix, auth).
        lookback: seconds of history for presence (last seen) and continuity.
        concurrency: queries in flight at once.
        checks: which of :data:`CHECKS` to run (reachability always runs).
        progress: show progress on a TTY when the run takes over a second.
        label_limit: warn about series with more label names than this (Mimir: 30); None = off.
        dashboards: Grafana dashboard files/folders whose panels to run (:mod:`.dashboards`).
        dashboard_max_queries: cap on the queries the dashboard step sends.
        matrix: build the coverage matrix (``report.coverage``: one row per GPU, so its size
            follows the fleet; the CLI asks for it only for ``--format html``, the one reporter
            that shows it).
        read_limits: how dashboard files are read (:class:`gpumon.readers.files.Limits`;
            None: the defaults).
        groups: the rule groups built from ``spec`` (:func:`gpumon.rules.build_groups`; built
            here when not given).
        preview: with ``dashboards``, also fetch what every panel shows over the dashboard's
            time range (``report.previews``, :mod:`gpumon.preview`; the HTML report draws it),
            under its own cap of ``dashboard_max_queries``.
        preview_range: seconds to draw instead of each dashboard's own time range.
    Returns:
        (report, exit code).
    """
    started = time.monotonic()
    ctx = Context(spec, client, lookback=lookback, concurrency=concurrency, progress=progress,
                  label_limit=label_limit, groups=groups)
    report = Report("gpumon validate", summary={
        "prometheus": client.base, "job": spec.exporter.job, "spec": spec.path,
        "lookback": format_duration(lookback)})
    try:
        result = reachability.run(ctx)
        report.findings += result.findings
        report.checks += result.cases
        if result.findings:
            return report, EXIT_ERROR
        _prefetch(ctx, checks)
        ctx.build_groups_ahead()
        for name in CHECKS:
            if name in checks:
                result = CHECKS[name].run(ctx)
                report.findings += result.findings
                report.checks += result.cases
        if matrix and {"presence", "values", "continuity"} & set(checks) and not ctx.skip_gpu_checks:
            report.coverage = coverage.matrix(ctx, report.findings)
        if dashboards:
            from . import dashboards as dash_check
            result, verdicts = dash_check.run(ctx, list(dashboards), report.findings,
                                              dashboard_max_queries or dash_check.MAX_QUERIES,
                                              limits=read_limits)
            report.findings += result.findings
            report.checks += result.cases
            report.panels = [v.as_dict() for v in verdicts]
            report.summary["dashboards"] = dash_check.summary(verdicts)
            if preview:
                from ..preview import fetch
                report.previews = fetch.run(ctx, list(dashboards), report.panels,
                                            dashboard_max_queries or dash_check.MAX_QUERIES, preview_range,
                                            limits=read_limits)
    finally:
        ctx.close()
    if ctx.partial_warnings:
        report.findings = _inconclusive(report.findings, ctx.partial_warnings)
    report.summary["queries"] = ctx.queries
    report.summary["seconds"] = f"{time.monotonic() - started:.1f}"
    return report, exit_code(report)


#: checks whose queries depend on no other answer (``queries(ctx)``, or ``calls(ctx)`` for other API
#: calls): started before the checks run, the costliest first
PREFETCHED = ("values", "counters", "duplicates", "metadata")


def _prefetch(ctx: Context, checks) -> None:
    """Start the queries of the :data:`PREFETCHED` checks that will run (:meth:`Context.prefetch`):
    they share the bounded pool with the inventory's rounds instead of each check waiting for
    its slowest query while the server's other cores idle."""
    wanted = [name for name in PREFETCHED if name in checks and name in CHECKS]
    if not wanted or ctx.skip_gpu_checks:
        return
    calls = []
    for name in wanted:
        module = CHECKS[name]
        calls += module.calls(ctx).values() if hasattr(module, "calls") else \
            [("query", expr, ctx.now) for expr in module.queries(ctx).values()]
    ctx.prefetch(calls)


def _inconclusive(findings: list, warnings: list[str]) -> list:
    """A run that saw a partial answer (a store or querier did not answer) cannot prove that a
    series, target or rule is missing: its errors become inconclusive (exit 3, issue #15 finding 6)."""
    note = redact.clip("; ".join(dict.fromkeys(warnings)), 300)
    return [replace(f, severity="inconclusive", message=f"{f.message} (the server answered partially: {note})")
            if f.severity == "error" else f for f in findings]


def exit_code(report: Report) -> int:
    """2 when an input could not be read (an ``input-unreadable`` dashboard, as lint and diff
    exit), else 1 when any finding is an error, else 3 when any is inconclusive, else 0."""
    if any(f.check == "input-unreadable" for f in report.findings):
        return EXIT_ERROR
    if report.count("error"):
        return EXIT_FINDINGS
    if report.count("inconclusive"):
        return EXIT_INCONCLUSIVE
    return EXIT_OK
