"""``gpumon validate --dashboards``: run every panel of Grafana dashboards against the live server
and say which panels are empty and why.

Steps, one module each:

1. load the dashboards (JSON files, ConfigMaps, folders: the lint loader, ``gpumon.readers``);
2. resolve template variables on the server (``variables``), the data source variable being
   the server under test;
3. interpolate every target of every panel (rows and collapsed rows included) with Grafana's
   macros (``timing``) and run it as a range query over the lookback, or an instant query
   when the target says so (``api``); queries are capped (``--dashboard-max-queries``);
4. for empty or masked panels, ask whether each selector they read has series (one query per
   distinct selector, cached) and, for selectors read by ``rate()``-like functions, whether
   their window holds two samples (a young server); read the GPU inventory and the other
   checks' findings;
5. classify each panel (``verdicts``) into one verdict and a finding when it is not ok.

Needs before it: the reachability check (the API answers), the targets fact (scrape interval,
for ``$__rate_interval``) and the inventory fact (which GPUs should appear).

Why: People start from a Grafana panel that says "No data" or shows one GPU too few. Knowing which
series are missing does not say which panels of which dashboards are empty, and a linter cannot see
it: the query is valid, the series just are not there, or a picker anchored on one field hides the
GPUs that lack it (NVIDIA/dcgm-exporter#236), or `or vector(0)` turns the absence into a
healthy-looking 0. Running every panel on the server it will run against answers it.
Silence: Fix the cause the finding links to (a `series-missing` finding, a rule group not loaded).
For a panel that is empty by design, make its emptiness explicit: read only sparse fields, or filter
(`< 1`, `unless`), and it is `panel-expected-empty`. Leave a dashboard out of `--dashboards` to skip
it; `panel-unsupported` panels (Loki, TestData) are reported as info only.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from ...findings import Finding
from ...promapi import Answer, PromError
from ...readers import loader, promql
from ..base import CheckResult
from . import api, exprs, timing, variables, verdicts
from .judge import Judge
from .verdicts import Verdict

CHECK = "dashboards"
FINDINGS = verdicts.FINDINGS
ORDER = 1000
SELECTABLE = False
LOOKS_AT = ("with `--dashboards`: every panel of those Grafana dashboards run on the server, after its "
            "variables; one verdict per panel, linked to the findings above ([docs/dashboards-live.md]"
            "(dashboards-live.md))")
#: queries one run may send for dashboards (variables, targets, selector probes)
MAX_QUERIES = 600
#: panels evaluated per dashboard (gpumon's own dashboards have under 60; the rest of a larger
#: one is reported as not evaluated, in one finding)
MAX_PANELS = 1000
#: panel types without queries of their own
_NO_DATA_TYPES = {"row", "text", "dashlist", "news", "annolist", "welcome", "gettingstarted"}


@dataclass
class Target:
    """One panel target as sent: ``expr`` interpolated, which variables it used, its answers."""

    ref: str
    source: str
    expr: str
    used: set[str]
    timing: timing.Timing
    instant: bool
    range: bool
    ast: object | None = None
    answers: list = field(default_factory=list)      # Answer | PromError per query kind
    mask_lhs: str | None = None
    mask_answer: "Answer | PromError | None" = None


@dataclass
class PanelRun:
    """A panel and what running it gave."""

    dash: object
    doc: dict
    pointer: str
    row: str
    targets: list[Target] = field(default_factory=list)
    unsupported: str | None = None
    capped: bool | str = False  # True: the query cap; a string: why a bound stopped it


class _Budget:
    def __init__(self, limit: int):
        self.limit, self.used, self.refused = limit, 0, 0

    def take(self, n: int = 1) -> bool:
        if self.used + n > self.limit:
            self.refused += n
            return False
        self.used += n
        return True


def run(ctx, paths: list[str], prior: list[Finding], max_queries: int = MAX_QUERIES, limits=None) \
        -> tuple[CheckResult, list[Verdict]]:
    """Validate the dashboards under ``paths`` against ``ctx``'s server.

    Args:
        ctx: the validate :class:`~gpumon.validate.base.Context`.
        paths: dashboard JSON files, ConfigMap YAML files or folders.
        prior: findings of the checks that ran before (a panel's verdict links to the finding
            that explains it, e.g. ``series-missing``).
        max_queries: cap on the queries this step sends.
        limits: how files are read (:class:`~gpumon.readers.files.Limits`; None: defaults).
    Returns:
        (findings and JUnit cases, one verdict per panel with queries).
    """
    inputs = loader.load(paths, limits or loader.inputfiles.DEFAULT)
    result = CheckResult()
    result.findings += [f for f in inputs.problems]
    budget = _Budget(max_queries)
    end = ctx.now
    scrape = max(1.0, ctx.scrape_interval)
    skipped = _Skipped()
    runs, resolved_by_dash = _prepare_all(ctx, inputs.dashboards, budget, skipped, end, scrape)
    _send_targets(ctx, runs, budget)
    series, history = _probe_selectors(ctx, runs, budget, end, scrape)
    judge = Judge(ctx, prior, series, resolved_by_dash, runs, history=history)
    out: list[Verdict] = []
    for pr in runs:
        v = judge.verdict(pr)
        out.append(v)
        result.cases.append(v.case)
        if v.finding is not None:
            result.findings.append(v.finding)
    if skipped.dashboards or skipped.panels:
        result.findings.append(skipped.finding(ctx))
    if budget.refused:
        result.findings.append(Finding(
            "dashboard-query-cap", "inconclusive", "dashboards",
            f"stopped at {budget.limit} queries: {budget.refused} more were needed; "
            f"{sum(1 for v in out if v.verdict == 'panel-not-evaluated')} panel(s) not evaluated",
            "raise --dashboard-max-queries, or pass fewer dashboards", case="dashboards/query-cap"))
    return result, out


def _prepare_all(ctx, dashboards: list, budget: "_Budget", skipped: "_Skipped", end: float, scrape: float) \
        -> tuple[list[PanelRun], dict]:
    """Resolve each dashboard's variables on the server and prepare its panels' targets, within the
    panel bound and the deadline: (panel runs, {id(dashboard): resolved variables})."""
    runs: list[PanelRun] = []
    resolved_by_dash = {}
    for dash in dashboards:
        if _out_of_time(ctx):
            skipped.dashboards += 1
            continue
        var_timing = timing.Timing(end - ctx.lookback, end, scrape, 4 * scrape, scrape)

        def call(kind, *args, _t=var_timing):
            if not budget.take():
                return PromError("config", ctx.client.base, f"query cap ({budget.limit}) reached")
            return _one(ctx, kind, args, _t)

        resolved = variables.resolve(dash.variables, call, var_timing.macros(), ctx.client.base)
        resolved_by_dash[id(dash)] = resolved
        panels = [p for p in dash.panels if p.type not in _NO_DATA_TYPES]
        if len(panels) > MAX_PANELS:
            skipped.panels += len(panels) - MAX_PANELS
            panels = panels[:MAX_PANELS]
        for panel in panels:
            if _out_of_time(ctx):
                skipped.panels += 1
                continue
            if panel.type in _NO_DATA_TYPES:
                continue  # rows are containers: their panels come next in dash.panels
            pr = prepare(dash, panel, resolved, end, ctx.lookback, scrape)
            if pr is not None:
                runs.append(pr)
    return runs, resolved_by_dash


def _send_targets(ctx, runs: list[PanelRun], budget: "_Budget") -> None:
    """First round: every target (range and/or instant), and the left side of ``or vector(0)``;
    the answers land on the targets. A panel the budget cannot cover whole is capped."""
    calls = {}
    for i, pr in enumerate(runs):
        if pr.unsupported or pr.capped:
            continue
        need = sum(t.range + t.instant + bool(t.mask_lhs) for t in pr.targets)
        if not budget.take(need):
            pr.capped = True
            continue
        for j, t in enumerate(pr.targets):
            if t.range:
                calls[(i, j, "range")] = ("range", t.expr, t.timing)
            if t.instant:
                calls[(i, j, "instant")] = ("instant", t.expr, t.timing)
            if t.mask_lhs:
                calls[(i, j, "mask")] = ("range", t.mask_lhs, t.timing)
    answers = _many(ctx, calls)
    for (i, j, kind), ans in answers.items():
        t = runs[i].targets[j]
        if kind == "mask":
            t.mask_answer = ans
        else:
            t.answers.append(ans)


def _probe_selectors(ctx, runs: list[PanelRun], budget: "_Budget", end: float, scrape: float) \
        -> tuple[dict, dict]:
    """Second round: does each selector of an empty (or masked-empty) panel have series, and for
    an empty target reading ``rate(X[w])``, the most samples any series of X has in w now
    (``"history"``), for a target with data reading it over w shorter than two scrapes, how many
    series of X have fewer than two samples in w (``"short"``).
    Returns ({selector: series count or None}, {(kind, selector, window): count or None})."""
    probes: dict[str, str] = {}
    window = timing.grafana_duration(max(ctx.lookback, scrape))
    for pr in runs:
        for sel in verdicts.selectors_to_probe(pr):
            probes.setdefault(sel.text, f"count(last_over_time({sel.text}[{window}]))")
            if sel.metric:
                probes.setdefault(sel.metric, f"count(last_over_time({sel.metric}[{window}]))")
    for pr in runs:
        for sel, w in verdicts.history_to_probe(pr):
            probes.setdefault(("history", sel.text, w), f"max(count_over_time({sel.text}[{w}]))")
        for sel, w in verdicts.short_windows_to_probe(pr, scrape):
            # series seen in the lookback, less those with two samples in w (0 samples is short too)
            probes.setdefault(("short", sel.text, w), f"count(last_over_time({sel.text}[{window}])) - "
                                                      f"(count(count_over_time({sel.text}[{w}]) >= 2) or vector(0))")
    wanted = {k: v for k, v in probes.items()}
    if not budget.take(len(wanted)):
        wanted = dict(list(wanted.items())[:max(0, budget.limit - budget.used)])
        budget.take(len(wanted))
    probe_answers = _many(ctx, {k: ("instant", v, timing.Timing(end - ctx.lookback, end, scrape, scrape, scrape))
                                for k, v in wanted.items()})
    counts = {k: _probe_count(a) for k, a in probe_answers.items()}
    series = {k: n for k, n in counts.items() if not isinstance(k, tuple)}
    history = {k: n for k, n in counts.items() if isinstance(k, tuple)}
    return series, history


def _probe_count(answer) -> int | None:
    """A probe's one number: 0 for an empty answer, None (unknown, as for a failed query) when the
    server sent no number for it (``NaN``, an infinity: a count cannot be either)."""
    if isinstance(answer, PromError):
        return None
    if not answer.data:
        return 0
    value = float(answer.data[0].get("value", [0, "nan"])[1])
    return int(value) if math.isfinite(value) else None


@dataclass
class _Skipped:
    """Dashboards and panels a bound (panels per dashboard, ``--deadline``) left out."""

    dashboards: int = 0
    panels: int = 0

    def finding(self, ctx) -> Finding:
        what = ", ".join(part for part in (f"{self.dashboards} dashboard(s)" if self.dashboards else "",
                                           f"{self.panels} panel(s)" if self.panels else "") if part)
        why = (f"the overall --deadline of {ctx.client.overall:g}s ran out" if _out_of_time(ctx)
               else f"over {MAX_PANELS} panels in one dashboard")
        return Finding("panel-not-evaluated", "inconclusive", "dashboards", f"{what} not evaluated: {why}",
                       "raise --deadline, or split the dashboard; gpumon evaluates at most "
                       f"{MAX_PANELS} panels per dashboard", case="dashboards/not-evaluated")


def _out_of_time(ctx) -> bool:
    """The client's overall deadline (``--deadline``) has passed: no phase starts after it."""
    at = getattr(ctx.client, "deadline_at", None)
    return at is not None and time.monotonic() >= at


def prepare(dash, panel, resolved: dict, end: float, lookback: float, scrape: float,
             max_points: int | None = None) -> PanelRun | None:
    """The panel's targets interpolated as Grafana sends them, or why gpumon cannot evaluate it
    (``max_points``: see :func:`.timing.timing`; the preview draws at most that many per series)."""
    doc = panel.doc
    pr = PanelRun(dash, doc, panel.pointer, _row_title(dash.doc, panel.row))
    if doc.get("libraryPanel") and not doc.get("targets"):
        pr.unsupported = "library panel: its queries live in Grafana, not in the dashboard JSON"
        return pr
    visible = [(j, t) for j, t in panel.targets if not t.get("hide")]
    if not visible:
        return None
    panel_ds = doc.get("datasource")
    for j, t in visible:
        kind = _datasource_kind(t.get("datasource") if t.get("datasource") is not None else panel_ds, resolved)
        if kind != "prometheus":
            pr.unsupported = f"query {t.get('refId', j)} uses a {kind} data source"
            return pr
        expr = t.get("expr")
        if not isinstance(expr, str) or not expr.strip():
            continue
        tm = timing.timing(doc, t, end, lookback, scrape, max_points)
        text, used = variables.interpolate(expr, resolved, tm.macros())
        ref = t.get("refId", j)
        huge = sorted(n for n in used if resolved[n].truncated)
        if huge:
            pr.capped = (f"query {ref} uses ${huge[0]}, which has over {variables.MAX_VALUES} values; gpumon does "
                         "not expand it (select fewer values, or give it an allValue such as .*)")
            return pr
        refused = promql.too_complex(text, promql.MAX_SENT_QUERY_CHARS)
        if refused:
            pr.capped = f"query {ref} is not sent: {refused}"
            return pr
        ast, _ = exprs.parse(text)
        instant = bool(t.get("instant")) and not t.get("range")
        both = bool(t.get("instant")) and bool(t.get("range"))
        tgt = Target(str(t.get("refId", j)), expr, text, used, tm, instant=instant or both, range=not instant or both,
                     ast=ast)
        if ast is not None:
            lhs = exprs.mask(ast)
            if lhs is not None:
                tgt.mask_lhs = str(lhs)
        pr.targets.append(tgt)
    return pr if pr.targets else None


def _row_title(body: dict, row_pointer: str | None) -> str:
    if not row_pointer:
        return ""
    node = body
    for part in row_pointer.strip("/").split("/"):
        node = node[int(part)] if isinstance(node, list) else node.get(part, {})
    return str(node.get("title", "")) if isinstance(node, dict) else ""


#: Grafana's special data sources, by name or uid
_SPECIAL = {"-- Grafana --": "Grafana built-in", "grafana": "Grafana built-in", "-- Mixed --": "mixed",
            "-- Dashboard --": "dashboard"}


def _datasource_kind(ds, resolved: dict) -> str:
    """``prometheus`` when ``ds`` is the server under test (the default data source, the data
    source variable, a Prometheus reference or a data source name), else the kind it is."""
    if ds in (None, "", "default"):
        return "prometheus"
    if isinstance(ds, str):
        return "prometheus" if ds.startswith("$") else _SPECIAL.get(ds, "prometheus")
    if isinstance(ds, dict):
        uid, kind = str(ds.get("uid") or ""), str(ds.get("type") or "")
        if uid.startswith("$") or kind in ("", "prometheus"):
            return "prometheus"
        if kind == "datasource":
            return _SPECIAL.get(uid, "Grafana built-in")
        return kind
    return "unknown"


def _one(ctx, kind: str, args: tuple, tm: timing.Timing):
    client = ctx.client
    try:
        if kind == "label_values":
            return api.label_values(client, args[0], args[1], tm.start, tm.end)
        if kind == "labels":
            return api.labels(client, tm.start, tm.end)
        if kind == "query":
            return client.query(args[0], tm.end)
        raise ValueError(kind)
    except PromError as exc:
        return exc
    finally:
        with ctx._lock:
            ctx.queries += 1


def _many(ctx, calls: dict) -> dict:
    """Run ``{key: ("range"|"instant", expr, Timing)}`` concurrently on the context's pool."""
    def one(call):
        kind, expr, tm = call
        try:
            if kind == "range":
                return api.query_range(ctx.client, expr, tm.start, tm.end, tm.step)
            return ctx.client.query(expr, tm.end)
        except PromError as exc:
            return exc

    with ctx._lock:
        ctx.queries += len(calls)
    futures = {k: ctx.pool.submit(one, c) for k, c in calls.items()}
    return {k: f.result() for k, f in futures.items()}


def summary(found: list, with_data: bool = False) -> str:
    """``38 panels in 3 dashboard(s): 30 ok, 5 no data, ...`` in :data:`~.verdicts.VERDICTS` order,
    of :class:`Verdict` objects or their dicts (a report's ``panels``). ``with_data`` puts
    ``32 of 38 panels with data; `` first, counted from the same verdicts
    (:data:`~.verdicts.WITH_DATA`), so the two numbers always agree (gpumon preview's line)."""
    rows = [v if isinstance(v, dict) else v.as_dict() for v in found]
    counts = {k: sum(1 for v in rows if v["verdict"] == k) for k in verdicts.VERDICTS}
    parts = [f"{n} {k.removeprefix('panel-').replace('-', ' ')}" for k, n in counts.items() if n]
    dashes = len({(v["file"], v["uid"], v["dashboard"]) for v in rows})
    text = f"{len(rows)} panels in {dashes} dashboard(s): " + (", ".join(parts) or "none")
    if with_data:
        text = f"{sum(counts[k] for k in verdicts.WITH_DATA)} of {len(rows)} panels with data; {text}"
    return text
