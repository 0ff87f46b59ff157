"""Findings: the one value every lint check and validate check produces; reporters render them.

A finding never prints itself; ``gpumon.reporters`` turns a :class:`Report` into text, JSON,
SARIF, JUnit XML or GitHub workflow annotations.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

#: Severities, most severe first. ``inconclusive`` (validate only): the check could not see
#: everything (partial data, missing API) and so neither passes nor fails.
SEVERITIES = ("error", "warning", "info", "inconclusive")


@dataclass(frozen=True)
class Location:
    """Where a problem is: a file with 1-based line/column, and for JSON a JSON pointer."""

    file: str
    line: int = 1
    column: int = 1
    pointer: str | None = None

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


@dataclass(frozen=True)
class Finding:
    """One problem found by a check.

    Attributes:
        check: the check's id, e.g. ``series-missing`` or ``absent-no-selector``.
        severity: one of :data:`SEVERITIES`.
        subject: what it is about, e.g. ``DCGM_FI_DEV_GPU_UTIL on gpu-a1`` or a rule name.
        message: what is wrong, with the evidence (values, times, counts).
        hint: the likely cause and what to do.
        location: for file-based checks (lint), where.
        labels: identifying labels (job, instance, Hostname, UUID, dcgm_field ...), sorted.
        case: the JUnit test case (``check/subject``) this finding belongs to, when it differs
            from ``check/subject`` (validate: one case per check x metric).
    """

    check: str
    severity: str
    subject: str
    message: str
    hint: str = ""
    location: Location | None = None
    labels: tuple[tuple[str, str], ...] = ()
    case: str | None = None

    def __post_init__(self):
        if self.severity not in SEVERITIES:
            raise ValueError(f"severity must be one of {SEVERITIES}, not {self.severity!r}")

    def as_dict(self) -> dict:
        """A JSON-ready dict (labels as a mapping, location omitted when None)."""
        out = asdict(self)
        out["labels"] = dict(self.labels)
        if self.location is None:
            out.pop("location")
        if self.case is None:
            out.pop("case")
        return out


@dataclass
class Report:
    """The result of a lint or validate run.

    Attributes:
        tool: ``gpumon lint`` or ``gpumon validate``.
        findings: every finding, any order (reporters sort: most severe first).
        checks: ids of the (check, subject) cases that ran, as ``"check/subject"`` strings, so that
            passing cases show up in JUnit output too.
        summary: free-form facts for the text/JSON header (e.g. ``{"prometheus": url}``).
        docs: check id -> (help text, absolute URI of its page in docs/checks/), for reporters
            that link findings to their documentation (SARIF ``help``/``helpUri``).
        panels: ``validate --dashboards``: one verdict dict per panel (reporters that show more
            than findings: JSON, HTML).
        coverage: validate: the coverage matrix (GPUs x spec'd fields), see
            :func:`gpumon.validate.coverage.matrix`; None when not computed.
        previews: ``validate --dashboards`` for the HTML report: what every panel shows
            (:class:`gpumon.preview.model.DashboardPreview`, one per dashboard).
    """

    tool: str
    findings: list[Finding] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)
    summary: dict = field(default_factory=dict)
    docs: dict[str, tuple[str, str]] = field(default_factory=dict)
    panels: list[dict] = field(default_factory=list)
    coverage: dict | None = None
    previews: list = field(default_factory=list)

    def sorted_findings(self) -> list[Finding]:
        """Findings, most severe first, then by check, subject and message (deterministic)."""
        return sorted(self.findings, key=lambda f: (SEVERITIES.index(f.severity), f.check, f.subject, f.message))

    def count(self, severity: str) -> int:
        return sum(1 for f in self.findings if f.severity == severity)
