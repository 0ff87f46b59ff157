"""Run every panel of the given dashboards over the dashboard's own time range, for drawing.

The same steps as ``validate --dashboards`` (:mod:`gpumon.validate.dashboards`), reused: the
files are read with the same bounds, template variables are resolved on the server (``All``
where offered), each target is interpolated with Grafana's macros; then each target is run as a
range query over the dashboard's time range (``time.from``/``time.to``, e.g. ``now-6h``; the
last hour when it cannot be read), with a step giving at most :data:`MAX_POINTS` points per
series, or as an instant query when the target asks for one. Bounds: the query cap (the same
``--dashboard-max-queries``), the client's deadline and response size, and at most
:data:`MAX_SERIES` series per panel (the rest counted as ``+N more``).
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
from datetime import datetime, timezone

from .. import redact
from ..durations import format_duration, parse_duration
from ..promapi import PromError
from ..readers import loader
from ..validate.dashboards import MAX_PANELS, api, prepare, timing, variables
from .model import DashboardPreview, PanelPreview, Series

#: points per series at most (Grafana draws about one per pixel; 300 keep a panel readable and the report small)
MAX_POINTS = 300
#: series drawn per panel at most
MAX_SERIES = 20
#: the range used when the dashboard's cannot be read
DEFAULT_RANGE = 3600.0
#: the longest range drawn (a dashboard asking for more is drawn over the last 30 days)
MAX_RANGE = 30 * 86400.0
#: panel types drawn without queries
STATIC_TYPES = {"row", "text", "dashlist", "news", "annolist", "welcome", "gettingstarted"}
_RELATIVE = re.compile(r"now(?:-(\d+)([smhdwMy]))?(?:/[smhdwMy])?")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "M": 30 * 86400, "y": 365 * 86400}


def _instant(text, now: float) -> float | None:
    """A Grafana time (``now``, ``now-6h``, ``now/d``, epoch milliseconds, ISO 8601) in unix
    seconds; None when it is none of these. Rounding (``/d``) is ignored: the preview ends now."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return float(text) / 1000
    if not isinstance(text, str):
        return None
    text = text.strip()
    m = _RELATIVE.fullmatch(text)
    if m:
        return now - (int(m.group(1)) * _UNIT_SECONDS[m.group(2)] if m.group(1) else 0)
    if text.isdigit():
        return int(text) / 1000
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (when if when.tzinfo else when.replace(tzinfo=timezone.utc)).timestamp()


def time_range(doc: dict, now: float, override: float | None = None) -> tuple[float, float, str]:
    """``(start, end, text)`` of the range to draw: ``override`` seconds back from ``now`` when
    given, else the dashboard's ``time``, else the last hour; at most :data:`MAX_RANGE`."""
    if override:
        span = min(override, MAX_RANGE)
        return now - span, now, f"last {format_duration(span)}"
    t = doc.get("time") if isinstance(doc.get("time"), dict) else {}
    start, end = _instant(t.get("from"), now), _instant(t.get("to", "now"), now)
    if start is None or end is None or end <= start:
        return now - DEFAULT_RANGE, now, "last 1h (the dashboard's time range could not be read)"
    end = min(end, now)
    start = max(start, end - MAX_RANGE)
    if end <= start:
        return now - DEFAULT_RANGE, now, "last 1h (the dashboard's time range is in the future)"
    text = f"last {format_duration(end - start)}" if end == now else \
        f"{_utc(start)} to {_utc(end)}"
    return start, end, text


def _utc(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def parse_range(text: str | None) -> float | None:
    """``--time-range`` (``15m``, ``6h``) in seconds; None when not given. ValueError when bad."""
    if not text:
        return None
    seconds = parse_duration(text)
    if seconds <= 0:
        raise ValueError("the time range must be longer than 0s")
    return seconds


def legend(fmt, labels: dict[str, str], expr: str) -> str:
    """A series' name as Grafana writes it: ``legendFormat`` with ``{{label}}`` replaced, else
    ``metric{labels}``, else the query when the series has no labels."""
    if isinstance(fmt, str) and fmt and fmt != "__auto":
        return re.sub(r"\{\{\s*([^{}\s]+)\s*\}\}", lambda m: labels.get(m.group(1), ""), fmt)
    name = labels.get("__name__", "")
    inner = ", ".join(f'{k}="{v}"' for k, v in labels.items() if k != "__name__")
    if not name and not inner:
        return expr
    return f"{name}{{{inner}}}" if inner else name


def _value(text) -> float:
    try:
        v = float(text)
    except (TypeError, ValueError):
        return math.nan
    return v if math.isfinite(v) else math.nan


def series_of(answer_data: list, fmt, expr: str, ref: str) -> list[Series]:
    """The series of one answer (``/query_range`` matrix items, or ``/query`` vector items as
    one point each)."""
    out = []
    for item in answer_data:
        if not isinstance(item, dict):
            continue
        # masked here, before the cards cut long names to fit: a label echoing a secret is not
        # drawn in part
        labels = {redact.redact(str(k)): redact.redact(str(v)) for k, v in (item.get("metric") or {}).items()}
        if "values" in item:
            points = [(float(t), _value(v)) for t, v in item.get("values") or []]
        elif isinstance(item.get("value"), list) and len(item["value"]) == 2:
            points = [(float(item["value"][0]), _value(item["value"][1]))]
        else:
            continue
        out.append(Series(legend(fmt, labels, expr), labels, points, ref))
    return out


def ending_now(tm: timing.Timing) -> timing.Timing:
    """``tm`` with its points counted back from its end: Grafana aligns both ends of the range down
    to the step, so the newest point can be a whole step old (72 s for 6 h), and a young server
    (the demo's, a test's) shows nothing; the preview's last point is the range's end."""
    points = max(1, math.floor((tm.end - tm.start) / tm.step))
    return replace(tm, start=tm.end - points * tm.step)


class _Budget:
    def __init__(self, limit: int):
        self.limit, self.used = limit, 0

    def take(self, n: int = 1) -> bool:
        if self.used + n > self.limit:
            return False
        self.used += n
        return True


def run(ctx, paths: list[str], verdicts: list[dict], max_queries: int, override: float | None = None,
        limits=None, max_series: int = MAX_SERIES) -> list[DashboardPreview]:
    """Fetch what every panel of the dashboards under ``paths`` shows on ``ctx``'s server.

    Args:
        ctx: the validate :class:`~gpumon.validate.base.Context` (client, pool, scrape interval).
        paths: dashboard files, ConfigMaps or folders (read as ``validate --dashboards`` does).
        verdicts: ``validate --dashboards``' panel verdicts (dicts): an empty panel shows its reason.
        max_queries: cap on the queries this step sends.
        override: draw the last ``override`` seconds instead of each dashboard's own range.
        limits: how files are read (:class:`~gpumon.readers.files.Limits`).
    Returns:
        one :class:`DashboardPreview` per dashboard, in the loader's order.
    """
    inputs = loader.load(paths, limits or loader.inputfiles.DEFAULT)
    budget = _Budget(max_queries)
    scrape = max(1.0, ctx.scrape_interval)
    reasons = {(v["file"], str(v["panel_id"]), v["title"]): v for v in verdicts}
    out = []
    for dash in inputs.dashboards:
        start, end, text = time_range(dash.doc, ctx.now, override)
        preview = DashboardPreview(dash.title, str(dash.doc.get("uid") or ""), dash.file, start, end, text, doc=dash.doc)
        out.append(preview)
        var_timing = timing.Timing(start, end, scrape, 4 * scrape, scrape)

        def call(kind, *args, _t=var_timing):
            if not budget.take():
                return PromError("config", ctx.client.base, f"query cap ({max_queries}) reached")
            return _variable_query(ctx.client, kind, args, _t)

        resolved = variables.resolve(dash.variables, call, var_timing.macros(), ctx.client.base)
        calls = {}
        for panel in dash.panels[:MAX_PANELS]:
            pp = PanelPreview(panel.doc, panel.pointer, panel.row, start=start, end=end)
            preview.panels.append(pp)
            if panel.type in STATIC_TYPES:
                continue
            verdict = reasons.get((dash.file, str(panel.id), panel.title))
            if verdict:
                pp.verdict, pp.reason = verdict["verdict"], verdict["message"]
            pr = prepare(dash, panel, resolved, end, end - start, scrape, MAX_POINTS)
            if pr is None:
                pp.note = "no query to run"
            elif pr.unsupported:
                pp.note = f"not drawn: {pr.unsupported}"
            elif pr.capped:
                pp.note = f"not drawn: {pr.capped}"
            elif not budget.take(len(pr.targets)):
                pp.note = f"not drawn: the query cap ({max_queries}) was reached; raise --dashboard-max-queries"
            else:
                fmt = {str(t.get("refId", j)): t.get("legendFormat") for j, t in panel.targets}
                for j, t in enumerate(pr.targets):
                    t.timing = ending_now(t.timing)
                    calls[(len(preview.panels) - 1, j)] = (t, fmt.get(t.ref))
        _collect(ctx, preview, calls, max_series)
    return out


def _collect(ctx, preview: DashboardPreview, calls: dict, max_series: int) -> None:
    """Run the targets on the context's pool and file their series under their panels."""
    def one(target):
        try:
            if target.range:
                return api.query_range(ctx.client, target.expr, target.timing.start, target.timing.end,
                                       target.timing.step)
            return ctx.client.query(target.expr, target.timing.end)
        except PromError as exc:
            return exc

    with ctx._lock:
        ctx.queries += len(calls)
    futures = {k: ctx.pool.submit(one, t) for k, (t, _) in calls.items()}
    for (i, j), future in futures.items():
        target, fmt = calls[(i, j)]
        answer, pp = future.result(), preview.panels[i]
        if isinstance(answer, PromError):
            pp.errors.append(redact.clip(f"query {target.ref}: {answer.message}", 300))
            continue
        for s in series_of(answer.data, fmt, target.expr, target.ref):
            if len(pp.series) < max_series:
                pp.series.append(s)
            else:
                pp.more += 1


def _variable_query(client, kind: str, args: tuple, tm: timing.Timing):
    try:
        if kind == "label_values":
            return api.label_values(client, args[0], args[1], tm.start, tm.end)
        if kind == "labels":
            return api.labels(client, tm.start, tm.end)
        return client.query(args[0], tm.end)
    except PromError as exc:
        return exc
