"""Reading a Prometheus API answer's body: JSON into an :class:`~.promanswer.Answer`, or a
:class:`~.promanswer.PromError` that names URL, status and what the server said (an error status,
an HTML login or error page, not JSON)."""

from __future__ import annotations

import json
import re

from . import redact
from .promanswer import Answer, PromError, _known_codec, _strings
from .promauth import strip_userinfo

#: words that mark an HTML answer as a login page (oauth2-proxy, OpenShift oauth-proxy, SSO portals)
_LOGIN_WORDS = ("sign in", "sign-in", "signin", "log in", "login", "password", "oauth", "sso", "authenticate")
#: the first character of a body that is not white space
_FIRST_TEXT = re.compile(r"\S")


def decode(resp, raw: bytes | bytearray, hook=None) -> Answer:
    """The API answer in ``raw``, the body of ``resp`` (an ``httpx.Response``), read with the
    ``json.loads`` object ``hook``; a PromError naming URL, status and the server's message for
    anything else (an error status, an HTML login or error page, not JSON). A bytearray ``raw``
    is emptied once it has been read into text."""
    url, status = strip_userinfo(str(resp.url)), resp.status_code
    ctype = resp.headers.get("content-type", "")
    body = raw.decode(resp.charset_encoding or "utf-8", "replace") if _known_codec(resp.charset_encoding) \
        else raw.decode("utf-8", "replace")
    if isinstance(raw, bytearray):
        raw.clear()  # the text is all that is read from here on: a large answer is not held twice
    start = _FIRST_TEXT.search(body)
    # secrets are masked before any cut (redact.clip), so an echoed credential the cut would split
    # is not printed in part
    head = redact.clip(body, 2000, start.start()) if start else ""
    # the first 200 characters with runs of white space as one (the whole body split on white
    # space would make a string per token: hundreds of thousands for a large answer)
    snippet = redact.clip(" ".join(head.split()), 200)
    if "html" in ctype or head[:1] == "<":
        login = status in (401, 403) or any(w in body.lower() for w in _LOGIN_WORDS)
        if status < 400 and not login:
            raise PromError("not-json", url, f"received an HTML page, not the Prometheus API: {redact.clip(snippet, 120)!r}",
                            status, hint="--prom points at a web page (a UI, an index, an ingress default "
                            "backend), not at the API: check --prom and --path-prefix")
        if login:
            raise PromError("auth", url, "received HTML (likely a login page from an auth proxy), not the "
                            "Prometheus API", status, hint="pass credentials (--bearer-token-file, "
                            "--basic-auth-file, --header) or point --prom at the API behind the proxy")
        raise PromError("not-found" if status == 404 else "http", url,
                        f"received an HTML error page, not the Prometheus API: {redact.clip(snippet, 120)!r}", status,
                        hint="a proxy or ingress answered instead of Prometheus: check --prom and --path-prefix")
    try:
        doc = json.loads(body, object_hook=hook)
    except (ValueError, RecursionError):  # RecursionError: nesting deeper than the parser goes
        doc = None
    # Mimir's "no org id" answer is short; a large body is not lowered whole to look for it
    no_org_id = status in (401, 403) and "org id" in body[:4096].lower()
    del body
    if isinstance(doc, dict) and doc.get("status") in ("success", "error"):
        if doc["status"] == "error":
            kind = "auth" if status in (401, 403) else "api"
            raise PromError(kind, url, f"{redact.clip(str(doc.get('errorType', 'error')), 100)}: "
                            f"{redact.clip(str(doc.get('error', '')), 300)}".strip(), status)
        if status >= 400:
            raise PromError("http", url, snippet, status)
        return Answer(doc.get("data"), _strings(doc.get("warnings")), _strings(doc.get("infos")))
    if status in (401, 403):
        hint = ("the server needs a tenant: set --tenant (sent as X-Scope-OrgID)" if no_org_id
                else "pass credentials (--bearer-token-file, --basic-auth-file, --header)")
        raise PromError("auth", url, f"{snippet or 'unauthorized'}", status, hint=hint)
    if status == 404:
        raise PromError("not-found", url, snippet or "not found", status,
                        hint="check --prom and --path-prefix (Mimir serves the API under /prometheus)")
    if status >= 400:
        raise PromError("http", url, snippet or resp.reason_phrase, status)
    raise PromError("not-json", url, f"not a Prometheus API answer (Content-Type {ctype or 'none'}): {snippet!r}",
                    status, hint="check --prom and --path-prefix")
