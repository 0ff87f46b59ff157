"""``runbook-url-not-absolute``: an alert's ``runbook_url`` that is relative, which no notification can open.

What: an alerting rule whose ``runbook_url`` annotation is relative (``../runbooks/X.md``) or has
no host. A placeholder (an absolute URL on ``example.com`` or ``localhost``, ``<...>``,
``CHANGEME``) is ``runbook-url-placeholder``'s. A relative link that
starts with the spec's own base is accepted when the spec says so (``alerts.runbook_url_relative:
true``): it resolves in a git forge's file view of ``output/rules/``, the only place it works.
Why: Alertmanager, chat and pager notifications carry the annotation verbatim, so a relative
link is broken in every page.
Silence: set ``alerts.runbook_url`` to an absolute base (``https://…/output/runbooks``), set
``alerts.runbook_url_relative: true`` in the spec for gpumon's own relative links,
``# gpumon-lint: ignore runbook-url-not-absolute`` on the rule, or ``--disable runbook-url-not-absolute``.
"""

from __future__ import annotations

import re
from typing import Iterator
from urllib.parse import urlparse

from ...findings import Finding
from ._base import make

ID = "runbook-url-not-absolute"
ORDER = 140
SEVERITY = "warning"
_PLACEHOLDER_HOST = re.compile(r"(^|\.)(example\.(com|org|net)|[^.]+\.(example|invalid|test)|localhost)$|^127\.")
_PLACEHOLDER_TEXT = re.compile(r"<[^>]*>|\bCHANGE_?ME\b|\bTODO\b|\bFIXME\b|\$\{[^}]*\}|\bXXX\b", re.IGNORECASE)


def placeholder(url: str) -> str | None:
    """Why ``url`` is a placeholder (``runbook-url-placeholder``), or None when it is not."""
    if _PLACEHOLDER_TEXT.search(url):
        return "is a placeholder"
    parsed = _parse(url)
    if parsed and parsed.scheme in ("http", "https") and parsed.netloc and _PLACEHOLDER_HOST.search(parsed.hostname or ""):
        return f"points at the placeholder host {parsed.hostname}"
    return None


def problem(url: str) -> str | None:
    """Why ``url`` is relative (no http(s) scheme or no host), or None when it is absolute. A
    placeholder is not this check's (:func:`placeholder`)."""
    if placeholder(url):
        return None
    parsed = _parse(url)
    if parsed is None:
        return "is not a valid URL (a bracket or port that does not parse): the link is broken"
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        return "is relative: notifications carry it verbatim, so the link is broken"
    return None


def _parse(url: str):
    """``urlparse(url)``, or None for a URL it refuses (``http://[::1``): a rule file's text is
    a finding, never a crash."""
    try:
        return urlparse(url)
    except ValueError:
        return None


def _accepted_relative(url: str, ctx) -> bool:
    """gpumon's own relative links, when the spec declares them deliberate."""
    al = ctx.spec.alerts
    return bool(al.runbook_url_relative and al.runbook_url and "://" not in al.runbook_url
                and url.startswith(al.runbook_url + "/"))


def alert_urls(inputs, ctx) -> Iterator[tuple[object, str]]:
    """``(rule, runbook_url)`` of every alerting rule with one, but gpumon's own relative links
    when the spec declares them deliberate."""
    for rule in inputs.rules:
        url = rule.annotations.get("runbook_url") if rule.kind == "alert" else None
        if isinstance(url, str) and not _accepted_relative(url, ctx):
            yield rule, url


#: what to do about a runbook_url either check flags
HINT = ("set alerts.runbook_url in the spec to an absolute base, e.g. "
        "https://github.com/<org>/<repo>/blob/main/output/runbooks")


def url_findings(check_id: str, severity: str, judge, inputs, ctx) -> Iterator[Finding]:
    """A ``check_id`` finding for each alerting rule's runbook_url that ``judge(url)`` (a reason or
    None) finds wrong, at the annotation's line."""
    for rule, url in alert_urls(inputs, ctx):
        why = judge(url)
        if why:
            yield make(check_id, severity, rule.subject, f"runbook_url {url!r} {why}", HINT,
                       rule.annotation_locations.get("runbook_url", rule.location))


def check(inputs, ctx) -> Iterator[Finding]:
    return url_findings(ID, SEVERITY, problem, inputs, ctx)
