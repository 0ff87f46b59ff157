"""Check 1: can we ask the server at all? One trivial query (``vector(1)``) that every
Prometheus-compatible API answers; any failure stops the run with exit 2 and says why.

Why: Every other check reads the query API. A login page, a wrong path prefix or a missing tenant
header would otherwise look like "no series": validate says it could not look instead (exit 2).
Silence: Not skippable: fix --prom, --path-prefix, --tenant or the auth options the finding names.
"""

from __future__ import annotations

from .. import redact
from ..findings import Finding
from ..promapi import PromError
from .base import CheckResult, Context

CHECK = "reachability"
ORDER = 0
SELECTABLE = False
_IDS = {"auth": "auth-error", "not-found": "api-not-found", "api": "api-error", "not-json": "not-prometheus-api",
        "timeout": "prometheus-timeout", "connection": "prometheus-unreachable", "http": "http-error",
        "config": "config-error", "too-large": "response-too-large"}
FINDINGS = tuple(dict.fromkeys([*_IDS.values(), "not-prometheus-api"]))
LOOKS_AT = ('`vector(1)` on `/api/v1/query`; any failure stops the run (exit 2) and names URL, HTTP status and '
            "the server's own message")


def finding_for(exc: PromError, subject: str) -> Finding:
    """A :class:`Finding` (severity error) naming the URL, status and the server's own message."""
    return Finding(_IDS.get(exc.kind, "http-error"), "error", subject, str(exc), exc.hint, case=f"{CHECK}/{subject}")


def run(ctx: Context) -> CheckResult:
    """Query ``vector(1)``; a finding when the API does not answer it as Prometheus would."""
    case = f"{CHECK}/query-api"
    answer = ctx.queries_at_now({"ping": "vector(1)"})["ping"]
    if isinstance(answer, PromError):
        return CheckResult([finding_for(answer, "query-api")], [case])
    # exactly one sample without labels, valued "1" (promapi checked the shapes)
    if len(answer.data) != 1 or answer.data[0].get("metric") or answer.data[0]["value"][1] != "1":
        return CheckResult([Finding("not-prometheus-api", "error", "query-api",
                                    f"{ctx.client.base}/api/v1/query answered vector(1) with {redact.clip(str(answer.data), 200)}",
                                    "check --prom and --path-prefix", case=case)], [case])
    return CheckResult([], [case])
