"""The one Prometheus HTTP API client gpumon uses (``validate``; others may reuse it).

Speaks the Prometheus v1 query API as served by Prometheus, Thanos Query, Grafana Mimir (under a
path prefix, with ``X-Scope-OrgID``) and VictoriaMetrics. Every answer is checked against the
envelope ``{"status", "data", "errorType", "error", "warnings", "infos"}`` (Prometheus
``docs/querying/api.md``); anything else (an auth proxy's HTML login page, Mimir's plain-text
``no org id``, a plain-text ``404 page not found``, garbage) becomes a :class:`PromError` that
says what came back, never "0 series".

Secrets (bearer token, basic-auth password, ``--header`` values) are never put in messages,
and are not sent along a redirect to another host.
"""

from __future__ import annotations

import base64
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urljoin, urlsplit, urlunsplit

import httpx

#: Error kinds of :class:`PromError`.
KINDS = ("config", "connection", "timeout", "auth", "not-found", "api", "http", "not-json")
MAX_REDIRECTS = 5
#: words that mark an HTML answer as a login page (oauth2-proxy, OpenShift oauth-proxy, SSO portals)
_LOGIN_WORDS = ("sign in", "sign-in", "signin", "log in", "login", "password", "oauth", "sso", "authenticate")


class PromError(Exception):
    """A request that gave no usable API answer.

    Attributes:
        kind: one of :data:`KINDS` (``auth`` for 401/403 and HTML login pages, ``not-found`` for
            404, ``api`` for a Prometheus error envelope, ``not-json`` for a 2xx that is not the API).
        url: the URL asked (credentials removed; after redirects, the final one).
        status: HTTP status, or None when no answer came.
        message: what happened, with Prometheus' own ``errorType``/``error`` or a body excerpt.
        hint: what to try.
    """

    def __init__(self, kind: str, url: str, message: str, status: int | None = None, hint: str = ""):
        self.kind, self.url, self.status, self.message, self.hint = kind, url, status, message, hint
        where = f"{url}: HTTP {status}" if status else url
        super().__init__(f"{where}: {message}")


#: How Prometheus 3 starts PromQL annotations (promql/annotations: "PromQL info: ", "PromQL warning: ")
ANNOTATION_PREFIXES = ("PromQL info:", "PromQL warning:")


@dataclass
class Answer:
    """A successful API answer: ``data`` as decoded JSON, plus ``warnings``/``infos`` (a partial
    response from Thanos or Mimir carries warnings and must not be read as complete)."""

    data: object
    warnings: list[str] = field(default_factory=list)
    infos: list[str] = field(default_factory=list)

    @property
    def partial(self) -> bool:
        """True when a warning says data may be missing. PromQL annotations (``PromQL info: metric
        might not be a counter ...``, ``PromQL warning: ...``) are not: Prometheus 3 returns them
        in ``infos``/``warnings`` and Thanos Query relays both as ``warnings`` (seen with Thanos
        0.42.4 on ``rate()`` of ``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION``, a counter without
        ``_total``), while its partial responses read ``fetch series for {...}: rpc error``."""
        return any(not str(w).startswith(ANNOTATION_PREFIXES) for w in self.warnings)


def _read_secret(path: str, what: str) -> str:
    try:
        text = Path(path).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise PromError("config", path, f"cannot read {what} file: {exc.strerror or exc}") from None
    if not text:
        raise PromError("config", path, f"{what} file is empty")
    return text


def strip_userinfo(url: str) -> str:
    """``url`` without ``user:password@`` (for messages)."""
    parts = urlsplit(url)
    if parts.username or parts.password:
        host = parts.hostname or ""
        netloc = host + (f":{parts.port}" if parts.port else "")
        return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    return url


#: Query parameters each backend needs on every query. Thanos Query: ``dedup`` merges the
#: replicas of an HA pair (``--query.replica-label``) so a GPU is one series, not two;
#: ``partial_response=true`` answers with ``warnings`` when a store (sidecar, store gateway) is
#: down, which validate turns into "inconclusive" (exit 3) instead of failing the query
#: (Thanos docs, "Query: Partial Response").
BACKEND_QUERY_PARAMS: dict[str, dict[str, str]] = {
    "thanos": {"dedup": "true", "partial_response": "true"},
}


class PromClient:
    """A Prometheus-compatible HTTP API client.

    Args:
        url: base URL, e.g. ``http://prometheus:9090`` (``user:pass@`` is accepted as basic auth).
        path_prefix: prefix before ``/api/v1`` (Mimir: ``/prometheus``).
        tenant: sent as ``X-Scope-OrgID`` on every request (Mimir, Cortex, multi-tenant Thanos).
        headers: extra headers ``{name: value}`` (values are treated as secrets).
        bearer_token_file: file with a bearer token; ``$GPUMON_BEARER_TOKEN`` is used when unset.
        basic_auth_file: file with ``user:password`` on one line.
        ca_file: PEM bundle to verify the server with; ``insecure`` skips verification.
        timeout: seconds per request (connect, read and write).
        query_params: sent with every query (Thanos Query: ``dedup=true`` so HA replicas count
            once, ``partial_response=true`` so a missing store is a warning, hence inconclusive,
            instead of an error; see :data:`BACKEND_QUERY_PARAMS`).
        transport: an httpx transport (tests use ``httpx.MockTransport``).
    Raises:
        PromError(kind="config"): unreadable secret file or bad URL.
    """

    def __init__(self, url: str, *, path_prefix: str = "", tenant: str | None = None,
                 headers: dict[str, str] | None = None, bearer_token_file: str | None = None,
                 basic_auth_file: str | None = None, ca_file: str | None = None, insecure: bool = False,
                 timeout: float = 30.0, query_params: dict[str, str] | None = None,
                 transport: httpx.BaseTransport | None = None):
        self.query_params = dict(query_params or {})
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise PromError("config", strip_userinfo(url), "not an http(s) URL (e.g. http://prometheus:9090)")
        self.base = strip_userinfo(url).rstrip("/") + ("/" + path_prefix.strip("/") if path_prefix.strip("/") else "")
        self.origin = (parts.scheme, parts.hostname, parts.port)
        self.public_headers: dict[str, str] = {"Accept": "application/json"}
        if tenant:
            self.public_headers["X-Scope-OrgID"] = tenant
        self.secret_headers: dict[str, str] = dict(headers or {})
        token = _read_secret(bearer_token_file, "bearer token") if bearer_token_file else \
            os.environ.get("GPUMON_BEARER_TOKEN", "").strip() or None
        userpass = _read_secret(basic_auth_file, "basic auth") if basic_auth_file else \
            (f"{parts.username}:{parts.password or ''}" if parts.username else None)
        if userpass is not None and ":" not in userpass:
            raise PromError("config", basic_auth_file or "", "basic auth file must hold user:password")
        if token:
            self.secret_headers["Authorization"] = f"Bearer {token}"
        elif userpass:
            self.secret_headers["Authorization"] = "Basic " + base64.b64encode(userpass.encode()).decode()
        verify: bool | str = False if insecure else (ca_file or True)
        if ca_file and not insecure and not Path(ca_file).is_file():
            raise PromError("config", ca_file, "CA file not found")
        self.timeout = timeout
        self.http = httpx.Client(timeout=timeout, verify=verify, follow_redirects=False, transport=transport)

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> "PromClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def describe_headers(self) -> dict[str, str]:
        """Headers sent, with secret values masked (``Bearer ****``) — safe to print."""
        out = dict(self.public_headers)
        for key, value in self.secret_headers.items():
            scheme = value.split(" ", 1)[0] if key == "Authorization" and " " in value else ""
            out[key] = f"{scheme} ****".strip()
        return out

    # ------------------------------------------------------------------ requests
    def get(self, path: str, params: dict | list | None = None) -> Answer:
        """GET ``<base><path>`` and return the decoded envelope.

        Redirects are followed (up to 5); secrets are dropped when one leaves the origin host.
        Raises:
            PromError: see :class:`PromError` kinds.
        """
        url = self.base + path
        headers = {**self.public_headers, **self.secret_headers}
        for _ in range(MAX_REDIRECTS + 1):
            try:
                resp = self.http.get(url, params=params, headers=headers)
            except httpx.TimeoutException:
                raise PromError("timeout", url, f"no answer within {self.timeout:g}s",
                                hint="raise --timeout, or narrow --lookback; a slow query may also "
                                     "mean the server is overloaded") from None
            except httpx.HTTPError as exc:
                raise PromError("connection", url, f"cannot connect: {exc}",
                                hint="check the URL, port, proxy and TLS options (--ca-file, --insecure-skip-verify)") from None
            if resp.is_redirect and "location" in resp.headers:
                url = urljoin(str(resp.url), resp.headers["location"])
                params = None  # the Location carries its own query string
                target = urlsplit(url)
                if (target.scheme, target.hostname, target.port) != self.origin:
                    headers = dict(self.public_headers)  # never hand credentials to another host
                continue
            return self._decode(resp)
        raise PromError("http", url, f"more than {MAX_REDIRECTS} redirects")

    def _decode(self, resp: httpx.Response) -> Answer:
        url, status = strip_userinfo(str(resp.url)), resp.status_code
        ctype = resp.headers.get("content-type", "")
        body = resp.text
        snippet = " ".join(body.strip().split())[:200]
        if "html" in ctype or body.lstrip()[:1] == "<":
            login = status in (401, 403) or any(w in body.lower() for w in _LOGIN_WORDS)
            if status < 400 and not login:
                raise PromError("not-json", url, f"received an HTML page, not the Prometheus API: {snippet[:120]!r}",
                                status, hint="--prom points at a web page (a UI, an index, an ingress default "
                                "backend), not at the API: check --prom and --path-prefix")
            if login:
                raise PromError("auth", url, "received HTML (likely a login page from an auth proxy), not the "
                                "Prometheus API", status, hint="pass credentials (--bearer-token-file, "
                                "--basic-auth-file, --header) or point --prom at the API behind the proxy")
            raise PromError("not-found" if status == 404 else "http", url,
                            f"received an HTML error page, not the Prometheus API: {snippet[:120]!r}", status,
                            hint="a proxy or ingress answered instead of Prometheus: check --prom and --path-prefix")
        try:
            doc = json.loads(body)
        except ValueError:
            doc = None
        if isinstance(doc, dict) and doc.get("status") in ("success", "error"):
            if doc["status"] == "error":
                kind = "auth" if status in (401, 403) else "api"
                raise PromError(kind, url, f"{doc.get('errorType', 'error')}: {doc.get('error', '')}".strip(), status)
            if status >= 400:
                raise PromError("http", url, snippet, status)
            return Answer(doc.get("data"), list(doc.get("warnings") or []), list(doc.get("infos") or []))
        if status in (401, 403):
            hint = ("the server needs a tenant: set --tenant (sent as X-Scope-OrgID)" if "org id" in body.lower()
                    else "pass credentials (--bearer-token-file, --basic-auth-file, --header)")
            raise PromError("auth", url, f"{snippet or 'unauthorized'}", status, hint=hint)
        if status == 404:
            raise PromError("not-found", url, snippet or "not found", status,
                            hint="check --prom and --path-prefix (Mimir serves the API under /prometheus)")
        if status >= 400:
            raise PromError("http", url, snippet or resp.reason_phrase, status)
        raise PromError("not-json", url, f"not a Prometheus API answer (Content-Type {ctype or 'none'}): {snippet!r}",
                        status, hint="check --prom and --path-prefix")

    def query(self, expr: str, time: float | None = None) -> Answer:
        """Instant query; ``data`` becomes the ``result`` list (each ``{"metric", "value"}``)."""
        params = {"query": expr, **self.query_params}
        if time is not None:
            params["time"] = f"{time:.3f}"
        ans = self.get("/api/v1/query", params)
        data = ans.data if isinstance(ans.data, dict) else {}
        if data.get("resultType") not in ("vector", "scalar", "matrix", "string"):
            raise PromError("not-json", self.base + "/api/v1/query", f"unexpected query answer: {str(ans.data)[:200]}")
        result = data.get("result")
        ans.data = result if isinstance(result, list) else [{"metric": {}, "value": result}]
        return ans

    def targets(self) -> Answer:
        """``/api/v1/targets?state=active``; ``data`` is the ``activeTargets`` list."""
        ans = self.get("/api/v1/targets", {"state": "active"})
        ans.data = (ans.data or {}).get("activeTargets") or [] if isinstance(ans.data, dict) else []
        return ans

    def rules(self) -> Answer:
        """``/api/v1/rules``; ``data`` is the list of groups (follows ``groupNextToken`` pages)."""
        groups, params = [], {}
        while True:
            ans = self.get("/api/v1/rules", params or None)
            data = ans.data if isinstance(ans.data, dict) else {}
            groups += data.get("groups") or []
            token = data.get("groupNextToken")
            if not token:
                return Answer(groups, ans.warnings, ans.infos)
            params = {"group_next_token": token, "group_limit": "100"}

    def metadata(self, metric: str) -> Answer:
        """``/api/v1/metadata?metric=M``; ``data`` is the list of ``{"type", "help", "unit"}``."""
        ans = self.get("/api/v1/metadata", {"metric": metric})
        ans.data = (ans.data or {}).get(metric) or [] if isinstance(ans.data, dict) else []
        return ans

    def series(self, match: str, start: float, end: float) -> Answer:
        """``/api/v1/series``: ``data`` is the list of label sets of series matching ``match``
        between ``start`` and ``end`` (unix seconds)."""
        ans = self.get("/api/v1/series", {"match[]": match, "start": f"{start:.3f}", "end": f"{end:.3f}"})
        ans.data = ans.data if isinstance(ans.data, list) else []
        return ans
