"""The verdict a panel gets (:class:`Verdict`, :data:`SEVERITY` of each) and which of a panel's
selectors to probe for series when its queries came back empty; the judging itself is
:mod:`.judge`'s."""

from __future__ import annotations

from dataclasses import dataclass, field

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
