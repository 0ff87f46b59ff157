"""The verdict a panel gets (:class:`Verdict`, :data:`SEVERITY` of each) and which of a panel's
selectors to probe for series when its queries came back empty; the judging itself is
:mod:`.judge`'s."""

from __future__ import annotations

from dataclasses import dataclass, field

from ... import redact
from ...durations import format_duration
from ...findings import Finding
from ...promapi import Answer
from . import exprs

#: verdict -> severity of its finding (``panel-ok`` has none). ``panel-no-data`` is a warning
#: when every series it lacks is an optional field (the spec says it may be absent), and
#: ``panel-variable-empty`` when the variable only lacks some GPUs (the panel shows the others).
SEVERITY = {"panel-no-data": "error", "panel-query-error": "error", "panel-variable-empty": "error",
            "panel-partial": "warning", "panel-too-little-history": "inconclusive", "panel-masked": "warning", "panel-expected-empty": "info",
            "panel-unsupported": "info", "panel-not-evaluated": "inconclusive"}
FINDINGS = tuple(SEVERITY) + ("dashboard-query-cap", "unreadable-file")
VERDICTS = ("panel-ok",) + tuple(SEVERITY)
#: verdicts of a panel that shows series now (partial: some of them; masked: the `or vector(0)` stand-in)
WITH_DATA = ("panel-ok", "panel-partial", "panel-masked")
#: verdict -> what to do about it (the finding's hint)
HINTS = {
    "panel-no-data": "the panel says \"No data\": make the series exist (exporter field list, scrape config, "
                     "recording rules loaded), or fix the selector",
    "panel-query-error": "the server rejected the query: fix its syntax or the variables it uses",
    "panel-variable-empty": "anchor the variable on a series every GPU has (gpumon's inventory rule "
                            "job_gpu:gpumon_inventory:group), not on one field (NVIDIA/dcgm-exporter#236)",
    "panel-partial": "some GPUs or queries are missing from the panel: make their series exist, or fix the selector",
    "panel-masked": "`or vector(0)` turns \"no data\" into a healthy-looking 0: drop it, or use "
                    "`or on() (absent(...) * 0)`-style guards only where 0 is true",
    "panel-expected-empty": "empty is the healthy state here; nothing to do",
    "panel-too-little-history": "wait until the window holds two scrapes (or widen it: Grafana's "
                                "$__rate_interval is at least 4 scrape intervals) and run validate again",
    "panel-unsupported": "gpumon evaluates Prometheus queries only; check this panel by eye",
    "panel-not-evaluated": "raise --dashboard-max-queries",
}
#: the hint of a panel whose queries (or series probes) got no usable answer: its verdict is inconclusive
NO_ANSWER_HINT = ("the server gave no usable answer (a timeout, an answer of the wrong shape, a proxy's page): "
                  "check the server, --prom and --path-prefix, then run validate again")
#: series that exist only while something happens (alerts firing)
ALWAYS_SPARSE = {"ALERTS", "ALERTS_FOR_STATE"}


@dataclass
class Verdict:
    """What one panel shows on the live server."""

    dashboard: str
    uid: str
    file: str
    panel_id: object
    title: str
    type: str
    row: str
    verdict: str
    message: str
    metrics: list[str] = field(default_factory=list)
    queries: list[str] = field(default_factory=list)
    causes: list[str] = field(default_factory=list)
    finding: Finding | None = None
    downgraded: str | None = None  # a milder severity than the verdict's (optional fields, a picker gap)

    @property
    def case(self) -> str:
        return f"dashboards/{self.uid or self.dashboard} panel {self.panel_id} {self.title}"

    @property
    def severity(self) -> str:
        return self.downgraded or SEVERITY.get(self.verdict, "ok")

    def as_dict(self) -> dict:
        return {"dashboard": self.dashboard, "uid": self.uid, "file": self.file, "panel_id": self.panel_id,
                "title": self.title, "type": self.type, "row": self.row, "verdict": self.verdict,
                "severity": self.severity, "message": self.message, "metrics": self.metrics,
                "queries": self.queries, "causes": self.causes}


def is_empty(ans) -> bool:
    """An answer with no sample (a range series with no values counts as none)."""
    if not isinstance(ans, Answer):
        return False
    return not any(item.get("values") or item.get("value") for item in ans.data)


def target_empty(t) -> bool:
    """True when every answer of panel target ``t`` has no sample."""
    return bool(t.answers) and all(is_empty(a) for a in t.answers)


def selectors_to_probe(pr) -> list:
    """Selectors whose presence explains an empty target or an empty masked left side."""
    out = []
    if pr.unsupported or pr.capped:
        return out
    for t in pr.targets:
        if t.ast is None:
            continue
        if target_empty(t):
            out += exprs.selectors(t.ast)
        elif t.mask_lhs and is_empty(t.mask_answer):
            out += exprs.selectors(exprs.mask(t.ast))
    return out


def history_to_probe(pr) -> list[tuple]:
    """``(selector, window)`` pairs read through ``rate()``-like functions by an empty target: on a
    young server (or a window shorter than two scrapes) such a target is empty although every
    series exists, and the answer is "wait", not "broken"."""
    if pr.unsupported or pr.capped:
        return []
    return [pair for t in pr.targets if t.ast is not None and target_empty(t)
            for pair in exprs.two_sample_windows(t.ast)]


def short_history(pr, history: dict, scrape: float) -> list[str]:
    """Why an empty panel ``pr`` is short of samples: ``X has at most 1 sample in [1m]`` for each
    selector it reads through ``rate()``-like functions that the probe (``history``: ``("history",
    selector text, window)`` -> the most samples any series has there) found below two, and ``X is
    read over [900ms], under two scrape intervals (1s)`` (``scrape``, seconds) for one whose window
    is that short whatever the probe counted: two samples fall in such a window only when a scrape
    came late, so the probe (sent after the panel's queries) and the panel can each see either."""
    out = []
    for sel, window in history_to_probe(pr):
        most = history.get(("history", sel.text, window))
        if most is not None and most < 2:
            out.append(f"{sel.text} has at most {most} sample{'s' if most != 1 else ''} in [{window}]")
        elif window_seconds(window) < 2 * scrape:
            out.append(f"{sel.text} is read over [{window}], under two scrape intervals ({format_duration(scrape)})")
    return out


def short_windows_to_probe(pr, scrape: float) -> list[tuple]:
    """``(selector, window)`` pairs read through ``rate()``-like functions by a target that does
    show data, over a window shorter than two scrape intervals (``scrape``, seconds): whether a
    series has two samples in such a window depends on when each scrape landed, so the panel shows
    some GPUs and not others, and they change from one refresh to the next."""
    if pr.unsupported or pr.capped:
        return []
    return [(sel, w) for t in pr.targets if t.ast is not None and not target_empty(t)
            for sel, w in exprs.two_sample_windows(t.ast) if window_seconds(w) < 2 * scrape]


def window_seconds(window: str) -> float:
    """``"900ms"`` -> 0.9, ``"30s"`` -> 30.0 (the forms :func:`.exprs.two_sample_windows` writes)."""
    return float(window[:-2]) / 1000 if window.endswith("ms") else float(window[:-1])


def query_errors(errs: list) -> tuple[str, str | None]:
    """``(message, milder severity or None)`` of a panel whose queries ``errs`` (``(target,
    PromError)`` pairs) failed. The server rejecting a query (an ``api`` error: bad syntax, a
    many-to-many join) is the panel's fault: an error. Any other failure (a timeout, a malformed
    or refused answer) left nothing to judge: inconclusive, as a core check's failed query is,
    and the message names the URL asked."""
    rejected = any(a.kind == "api" for _, a in errs)
    message = "; ".join(f"query {t.ref}: {_cut(a.message if a.kind == 'api' else str(a))}" for t, a in errs[:3])
    return message, None if rejected else "inconclusive"


def _cut(text: str, limit: int = 300) -> str:
    """A server message short enough for a table cell: many-to-many errors list whole series
    between their head and the reason at the end, so keep both ends."""
    half, text = limit // 2, redact.redact(text)  # masked before either cut can split a secret
    return text if len(text) <= limit else f"{text[:half]} ... {text[-half:]}"
