"""Reading a Prometheus API answer's body: off the wire within its size cap and deadline
(:func:`read_body`), then JSON into an :class:`~.promanswer.Answer`, or a
:class:`~.promanswer.PromError` that names URL, status and what the server said (an error status,
an HTML login or error page, not JSON) in a short escaped excerpt."""

from __future__ import annotations

import json
import re
import time
import zlib

from . import redact
from .promanswer import Answer, PromError, _known_codec, _strings, escaped
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
    # escaped: the excerpt is the server's text, quoted (an ANSI escape or a line break in it must not
    # act on the terminal or forge a line of the CI log); at most 200 characters of the body
    snippet = escaped(redact.clip(" ".join(head.split()), 200))[:200]
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
            raise PromError(kind, url, f"{escaped(redact.clip(str(doc.get('errorType', 'error')), 100))}: "
                            f"{escaped(redact.clip(str(doc.get('error', '')), 300))}".strip(), status)
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


def read_body(resp, cap: int, deadline: float, timed_out) -> bytes | bytearray:
    """The body of ``resp`` (an ``httpx.Response`` opened to stream), decompressed, at most
    ``cap`` bytes of it, before ``deadline`` (``time.monotonic()``; past it, ``timed_out()`` is
    raised). A bytearray :func:`decode` empties once it has the text, not a copy of it."""
    url = strip_userinfo(str(resp.url))
    encoding = resp.headers.get("content-encoding", "identity").strip().lower()
    if encoding not in ("", "identity", "gzip", "x-gzip", "deflate"):
        raise PromError("http", url, f"unsupported Content-Encoding {redact.clip(encoding, 40)!r}", resp.status_code)
    too_big = PromError("too-large", url, f"response larger than {cap >> 20} MiB (after decompression)",
                        resp.status_code, hint="raise --max-response-mib, or narrow --lookback/--checks; a "
                        "server answering this much to gpumon's queries is unusual")
    length = resp.headers.get("content-length", "")
    if encoding in ("", "identity") and length.isdigit() and int(length) > cap:
        raise too_big
    if getattr(resp, "_content", None) is not None:  # read already (an in-memory transport)
        if len(resp.content) > cap:
            raise too_big
        return resp.content
    inflate = zlib.decompressobj(47) if encoding not in ("", "identity") else None  # 47: gzip or zlib
    body = bytearray()
    for chunk in resp.iter_raw():
        if time.monotonic() > deadline:
            raise timed_out()
        if inflate is None:
            body += chunk
        else:
            try:
                body += inflate.decompress(chunk, cap + 1 - len(body))
                while inflate.unconsumed_tail and len(body) <= cap:
                    body += inflate.decompress(inflate.unconsumed_tail, cap + 1 - len(body))
            except zlib.error as exc:
                raise PromError("not-json", url, f"the {encoding} body cannot be decompressed: {exc}",
                                resp.status_code) from None
        if len(body) > cap:
            raise too_big
    return body
