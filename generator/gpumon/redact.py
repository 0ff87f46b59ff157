"""The one redaction step: every secret of the run, removed from any text gpumon prints.

Secrets (the bearer token, the basic-auth password and its ``Authorization`` header, every
``--header`` value) are registered once, when the HTTP client is built, before anything can fail
on them. Every message built from a server reply or an exception (``PromError``, findings, the
internal-error line) and every finished report (text, JSON, SARIF, JUnit, GitHub, the ``-o``
file) passes through :func:`redact`, which also knows the forms a secret takes once quoted:
``repr()`` and JSON escapes, XML entities, GitHub-annotation escapes, each line of a multi-line
value (issue #15, finding 3).
"""

from __future__ import annotations

import json
import re
from xml.sax.saxutils import escape as xml_escape

MASK = "****"
#: a line of a multi-line secret shorter than this is not masked alone (it would mask words)
_MIN_PART = 6

_secrets: set[str] = set()


def _forms(secret: str) -> set[str]:
    forms = {secret, repr(secret)[1:-1], json.dumps(secret)[1:-1], xml_escape(secret),
             xml_escape(secret, {'"': "&quot;"}), secret.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A"),
             repr(secret.encode("utf-8", "replace"))[2:-1]}
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


def known() -> bool:
    """True when any secret is registered."""
    return bool(_secrets)
