"""The one redaction step: every secret of the run, removed from any text gpumon prints.

Secrets (the bearer token, the basic-auth password and its ``Authorization`` header, every
``--header`` value) are registered once, when the HTTP client is built, before anything can fail
on them. Every message built from a server reply or an exception (``PromError``, findings, the
internal-error line) and every finished report (text, JSON, SARIF, JUnit, GitHub, the ``-o``
file) passes through :func:`redact`, which also knows the forms a secret takes once quoted:
``repr()`` and JSON escapes, XML entities, GitHub-annotation escapes, each line of a multi-line
value, a query string's percent-encoding (issue #15, finding 3). Server text is cut to an
excerpt only through :func:`clip`, which masks before it cuts: a secret the cut would split is
masked whole, never printed in part.
"""

from __future__ import annotations

import json
import re
from urllib.parse import quote, quote_plus
from xml.sax.saxutils import escape as xml_escape

MASK = "****"
#: a line of a multi-line secret shorter than this is not masked alone (it would mask words)
_MIN_PART = 6

_secrets: set[str] = set()


def _forms(secret: str) -> set[str]:
    forms = {secret, repr(secret)[1:-1], json.dumps(secret)[1:-1], xml_escape(secret),
             xml_escape(secret, {'"': "&quot;"}), secret.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A"),
             repr(secret.encode("utf-8", "replace"))[2:-1],
             # as a query string carries it (a proxy's redirect or error page quoting the request URL)
             quote(secret), quote(secret, safe=""), quote_plus(secret, safe="")}
    for part in secret.replace("\r", "\n").split("\n"):
        if len(part.strip()) >= _MIN_PART:
            forms |= {part.strip(), xml_escape(part.strip())}
    return {f for f in forms if len(f) >= min(_MIN_PART, len(secret.strip())) and f.strip()}


def add(secret: str | None) -> None:
    """Register ``secret`` (and its quoted forms) for redaction; empty values are ignored."""
    if secret and secret.strip():
        _secrets.update(_forms(secret))


def reset() -> None:
    """Forget every secret (tests; a new run in the same process)."""
    _secrets.clear()


def redact(text: str) -> str:
    """``text`` with every registered secret form replaced by ``****`` (longest first)."""
    if not _secrets or not text:
        return text
    for secret in sorted(_secrets, key=len, reverse=True):
        if secret not in text:
            continue
        if len(secret) >= _MIN_PART:
            text = text.replace(secret, MASK)
        else:
            # a short value (``--header X-Scope-OrgID=1``) is masked where it stands alone, not inside
            # every number and word that contains it ("12 checks run" stays readable)
            text = re.sub(rf"(?<![0-9A-Za-z]){re.escape(secret)}(?![0-9A-Za-z])", MASK, text)
    return text


def clip(text: str, limit: int, start: int = 0) -> str:
    """``text[start:]`` with every secret masked, then cut to ``limit`` characters: masking comes
    before the cut, so a secret straddling it never shows in part (``Bearer SUPERSECRE``).

    Only ``limit`` characters and the longest secret form after them are read (a 64 MiB body is
    not copied for a 200-character excerpt); an unmasked start of a secret left at the end of
    that window (the rest of it beyond the window) is dropped too.
    """
    longest = max(map(len, _secrets), default=0)
    end = start + limit + longest
    window = text[start:end] if start or len(text) > end else text
    if not _secrets:
        return window[:limit]
    masked = redact(window)
    if len(text) > end:
        masked = _drop_partial(masked)
    return masked[:limit]


def _drop_partial(text: str) -> str:
    """``text`` less a tail that is the start of a secret form (whose rest was cut away)."""
    for secret in _secrets:
        if len(secret) < _MIN_PART:
            continue  # a short value is masked only where it stands alone: its start is not it
        tail = len(text) - min(len(secret) - 1, len(text))
        at = text.find(secret[0], tail)
        while at != -1 and not secret.startswith(text[at:]):
            at = text.find(secret[0], at + 1)
        if at != -1:
            text = text[:at]
    return text


def known() -> bool:
    """True when any secret is registered."""
    return bool(_secrets)
