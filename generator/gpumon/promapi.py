"""The one Prometheus HTTP API client gpumon uses (``validate``; others may reuse it).

Speaks the Prometheus v1 query API as served by Prometheus, Thanos Query, Grafana Mimir (under a
path prefix, with ``X-Scope-OrgID``) and VictoriaMetrics. Every answer is checked against the
envelope ``{"status", "data", "errorType", "error", "warnings", "infos"}`` (Prometheus
``docs/querying/api.md``); anything else (an auth proxy's HTML login page, Mimir's plain-text
``no org id``, a plain-text ``404 page not found``, garbage) becomes a :class:`PromError` that
says what came back, never "0 series".

Secrets (bearer token, basic-auth password, ``--header`` values) are registered with
:mod:`gpumon.redact` before anything can fail on them, and every :class:`PromError` message is
redacted. Requests go only to the origin (scheme, host, port) of ``--prom``: a redirect that leaves
it is refused by name, not followed, so no other host's answer (a cloud metadata service's
credentials) is ever read, and a body is quoted only as a short escaped excerpt
(:mod:`gpumon.promhttp`). A ``--prom`` or ``Location`` that does not parse is a config or connection
error, never an internal one.

Every request is bounded (issue #15, finding 5): a wall-time deadline for the whole request
(connect, TLS, redirects, every read of the headers and the body: a server trickling either cannot
stretch it, :mod:`gpumon.promhttp`), an optional overall
deadline for the client (``validate --deadline``), and a cap on the body size that also holds
after gzip/deflate decompression (a gzip bomb is refused after ``max_bytes``, not inflated).
Per-request timeouts share one budget: after :data:`STALL_LIMIT` requests in a row time out, or
:data:`TIMEOUT_BUDGET` in all, the server is taken to have stopped answering in time and later
requests fail at once instead of each waiting ``timeout`` again (a server that stalls after its
first answer would otherwise cost ``timeout`` per query: 38 queries x 3 s; one that answers every
other query reset a count of timeouts in a row and still cost ``timeout`` per stalled query).
Answers are checked for the shapes the API documents (a ``result`` that is not a list of samples,
targets that are not objects) and refused as ``not-json`` instead of crashing a check.
"""

from __future__ import annotations

import base64
import os
import sys
import threading
import time
from pathlib import Path

if "httpx" not in sys.modules:
    # httpx imports its own command-line client (click, rich, pygments) whenever they are
    # installed, as gpumon's are; a None entry makes that import fail as httpx expects when they
    # are not ("except ImportError"): about 5 MB less of every validate's memory
    sys.modules.setdefault("httpx._main", None)
import httpx  # noqa: E402

from . import promhttp, redact
# the answer types and the credential helpers live in their own modules; read through this one
from .promanswer import (LEFT_OUT, Answer, PromError, _is_labels, _is_sample, _is_series,  # noqa: F401
                         _is_target, _is_value, _known_codec, _strings, count, result_items, shape_error,
                         streaming, targets_hook)
from .promauth import _bad_header_char, _read_secret, check_header, strip_userinfo  # noqa: F401
from .promdecode import decode, read_body

MAX_REDIRECTS = 5
#: timeouts in a row after which a client sends nothing more (see the module docstring)
STALL_LIMIT = 3
#: timeouts in all after which a client sends nothing more: a run waits for at most this many
#: ``--timeout`` periods (plus the requests in flight when the budget runs out)
TIMEOUT_BUDGET = 6
#: default cap on a response body, after decompression (``validate --max-response-mib``)
MAX_BYTES = 64 << 20
#: the ``/api/v1/rules`` parameter that leaves each alerting rule's active alerts out of the answer
#: (Prometheus 3.x does; 2.42 and servers without it ignore it): nothing reads them, and the pending
#: alerts of a rule that matches many GPUs make up most of the answer on a large fleet
_NO_ALERTS = {"exclude_alerts": "true"}
#: ``/api/v1/rules`` pages followed at most (each ``group_limit=100`` groups)
MAX_RULE_PAGES = 1000


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
        url: base URL, e.g. ``http://prometheus:9090`` (``user:pass@`` is basic auth, percent-decoded).
        path_prefix: prefix before ``/api/v1`` (Mimir: ``/prometheus``).
        tenant: sent as ``X-Scope-OrgID`` on every request (Mimir, Cortex, multi-tenant Thanos).
        headers: extra headers ``{name: value}`` (values are treated as secrets).
        bearer_token_file: file with a bearer token; ``$GPUMON_BEARER_TOKEN`` is used when unset.
        basic_auth_file: file with ``user:password`` on one line.
        ca_file: PEM bundle to verify the server with; ``insecure`` skips verification.
        timeout: seconds per request: connect, redirects and reading the whole body.
        deadline: seconds for every request of this client together (None: no overall bound).
        max_bytes: cap on a response body after decompression (:data:`MAX_BYTES`).
        query_params: sent with every query (Thanos Query: ``dedup=true`` so HA replicas count
            once, ``partial_response=true`` so a missing store is a warning, hence inconclusive,
            instead of an error; see :data:`BACKEND_QUERY_PARAMS`).
        transport: an httpx transport (tests use ``httpx.MockTransport``).
    Raises:
        PromError(kind="config"): unreadable secret file, or a URL that does not parse or carries a
            query string or fragment (``url="--prom"``, the URL not shown).
    """

    def __init__(self, url: str, *, path_prefix: str = "", tenant: str | None = None,
                 headers: dict[str, str] | None = None, bearer_token_file: str | None = None,
                 basic_auth_file: str | None = None, ca_file: str | None = None, insecure: bool = False,
                 timeout: float = 30.0, deadline: float | None = None, max_bytes: int = MAX_BYTES,
                 query_params: dict[str, str] | None = None, transport: httpx.BaseTransport | None = None):
        self.query_params = dict(query_params or {})
        parts, user, password = promhttp.parse_base(url)
        for value in (headers or {}).values():
            redact.add(value)
        self.base = promhttp.shown(parts).rstrip("/") + ("/" + path_prefix.strip("/") if path_prefix.strip("/") else "")
        self.origin = promhttp.origin(parts)
        self.public_headers: dict[str, str] = {"Accept": "application/json"}
        if tenant:
            bad = _bad_header_char(tenant)
            if bad:
                raise PromError("config", "--tenant", f"the tenant id holds {bad}")
            self.public_headers["X-Scope-OrgID"] = tenant
        for key, value in (headers or {}).items():
            check_header(key, value)
        self.secret_headers: dict[str, str] = dict(headers or {})
        token = _read_secret(bearer_token_file, "bearer token") if bearer_token_file else \
            os.environ.get("GPUMON_BEARER_TOKEN", "").strip() or None
        if token and not bearer_token_file:
            redact.add(token)
            if _bad_header_char(token):
                raise PromError("config", "$GPUMON_BEARER_TOKEN", f"the token holds {_bad_header_char(token)} "
                                "(the value is not shown)")
        # the URL's userinfo percent-decoded, as a browser or curl sends it (P%40ss is P@ss)
        userpass = _read_secret(basic_auth_file, "basic auth", ascii_only=False) if basic_auth_file else \
            (f"{user}:{password or ''}" if user else None)
        if userpass is not None and ":" not in userpass:
            raise PromError("config", basic_auth_file or "", "basic auth file must hold user:password")
        if token:
            self.secret_headers["Authorization"] = f"Bearer {token}"
        elif userpass:
            self.secret_headers["Authorization"] = "Basic " + base64.b64encode(userpass.encode()).decode()
            redact.add(userpass.partition(":")[2])
        if "Authorization" in self.secret_headers:
            redact.add(self.secret_headers["Authorization"])
            redact.add(self.secret_headers["Authorization"].partition(" ")[2])
        verify: bool | str = False if insecure else (ca_file or True)
        if ca_file and not insecure and not Path(ca_file).is_file():
            raise PromError("config", ca_file, "CA file not found")
        self.timeout, self.max_bytes = timeout, max_bytes
        self.overall = deadline
        self.deadline_at = time.monotonic() + deadline if deadline else None
        self.stalled = 0  # requests in a row that timed out
        self.timeouts = 0  # requests that timed out, in all
        self._count_lock = threading.Lock()
        # Answers folded as they are decoded (a hook) are the fleet-sized ones (a sample per GPU,
        # a target per node). The server computes them side by side; the client reads and decodes
        # one at a time, so their bodies (bytes, then text, each as large as the answer) are not
        # all in memory at once. Decoding holds the GIL anyway: the wall does not move.
        self._fleet_answer = threading.Lock()
        self.http = httpx.Client(timeout=timeout, verify=verify, follow_redirects=False, transport=transport,
                                 event_hooks={"response": [promhttp.stop_at_redirect]})
        promhttp.bound(self.http)

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
    def get(self, path: str, params: dict | list | None = None, hook=None) -> Answer:
        """GET ``<base><path>`` and return the decoded envelope, within the request deadline.

        ``hook``: a ``json.loads`` object hook, called on every object of the answer as it is
        decoded (:meth:`query`'s ``each``, :meth:`targets`' ``keep``).

        Redirects are followed (up to 5) within the origin of ``--prom`` only; one leaving it is a
        ``connection`` error naming where it pointed.
        Nothing is sent after :data:`STALL_LIMIT` timeouts in a row or :data:`TIMEOUT_BUDGET` in
        all (a ``timeout`` error at once).
        Raises:
            PromError: see :class:`PromError` kinds.
        """
        if self.stalled >= STALL_LIMIT:
            raise PromError("timeout", self.base + path, f"not sent: the last {self.stalled} requests each timed out "
                            f"(--timeout {self.timeout:g}s); the server stopped answering",
                            hint="check the server's load, or raise --timeout")
        if self.timeouts >= TIMEOUT_BUDGET:
            raise PromError("timeout", self.base + path, f"not sent: {self.timeouts} requests of this run timed out "
                            f"(--timeout {self.timeout:g}s each); the server stopped answering in time",
                            hint="check the server's load, or raise --timeout")
        try:
            answer = self._get(path, params, hook)
        except PromError as exc:
            if exc.kind == "timeout":
                with self._count_lock:
                    self.stalled += 1
                    self.timeouts += 1
            raise
        with self._count_lock:
            self.stalled = 0
        return answer

    def _get(self, path: str, params: dict | list | None, hook=None) -> Answer:
        url = self.base + path
        # only encodings _read can bound (httpx would otherwise also offer br/zstd when installed)
        headers = {**self.public_headers, **self.secret_headers, "Accept-Encoding": "gzip, deflate"}
        deadline = time.monotonic() + self.timeout
        overall = self.deadline_at is not None and self.deadline_at < deadline
        deadline = min(deadline, self.deadline_at) if self.deadline_at is not None else deadline
        # every connect, handshake, read and write of this request ends by its deadline: a server
        # trickling its headers or body cannot reset a per-read timeout for ever (gpumon.promhttp)
        with promhttp.deadline(deadline):
            for _ in range(MAX_REDIRECTS + 1):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise self._timed_out(url, overall)
                try:
                    request = self.http.build_request("GET", url, params=params, headers=headers, timeout=remaining)
                    resp = self.http.send(request, stream=True)
                    try:
                        if hook is None:
                            body = self._read(resp, deadline, overall)
                        else:
                            if not self._fleet_answer.acquire(timeout=max(0.0, deadline - time.monotonic())):
                                raise self._timed_out(url, overall)
                            try:
                                return decode(resp, self._read(resp, deadline, overall), hook)
                            finally:
                                self._fleet_answer.release()
                    finally:
                        resp.close()
                except promhttp.Redirect as moved:
                    # only within the origin of --prom: nothing another host answers (a cloud
                    # metadata service's credentials) may reach a report
                    url = promhttp.redirect_target(moved.url, moved.status, moved.location, self.origin)
                    params = None  # the Location carries its own query string
                    continue
                except httpx.ConnectTimeout:
                    raise self._timed_out(url, overall, "no connection") from None
                except httpx.TimeoutException:
                    raise self._timed_out(url, overall) from None
                except httpx.InvalidURL as exc:  # e.g. over httpx's 65,536-character URL limit
                    raise PromError("config", redact.clip(strip_userinfo(url), 200), f"request not sent: {exc}") from None
                except httpx.HTTPError as exc:
                    raise PromError("connection", strip_userinfo(url), f"cannot connect: {exc}",
                                    hint="check the URL, port, proxy and TLS options (--ca-file, --insecure-skip-verify)") from None
                return decode(resp, body, hook)
        raise PromError("http", strip_userinfo(url), f"more than {MAX_REDIRECTS} redirects",
                        hint="a redirect loop (an auth proxy or ingress sending the request back): check --prom")

    def _timed_out(self, url: str, overall: bool, what: str = "") -> PromError:
        url = strip_userinfo(url)
        if overall:
            return PromError("timeout", url, f"the overall --deadline of {self.overall:g}s ran out",
                             hint="raise --deadline, narrow --checks or --lookback, or check the server's load")
        what = what or "the server sent its answer too slowly: no complete answer"
        return PromError("timeout", url, f"{what} within {self.timeout:g}s (--timeout)",
                         hint="raise --timeout, or narrow --lookback; a slow query may also "
                              "mean the server is overloaded")

    def _read(self, resp: httpx.Response, deadline: float, overall: bool) -> bytes | bytearray:
        return read_body(resp, self.max_bytes, deadline, lambda: self._timed_out(str(resp.url), overall))

    def _shape(self, path: str, what: str, data: object) -> PromError:
        return shape_error(self.base + path, what, data)

    def query(self, expr: str, time: float | None = None, each=None) -> Answer:
        """Instant query; ``data`` becomes the ``result`` list (each ``{"metric", "value"}``, the
        metric a mapping of strings, the value ``[time, "string"]``).

        ``each``: a callable given every sample of the vector result as it is decoded; the samples
        are not kept (``data`` is ``[]``), so an answer of a sample per GPU of a large fleet is
        never held decoded all at once. It must be thread-safe when queries run concurrently. It
        may have been given samples of an answer that then fails (a body cut short, an error
        status): the caller drops what it gathered when this raises. An answer other than a
        vector with ``each`` is a shape error.
        """
        params = {"query": expr, **self.query_params}
        if time is not None:
            params["time"] = f"{time:.3f}"
        ans = self.get("/api/v1/query", params, streaming(each) if each else None)
        if each is not None:
            data = ans.data if isinstance(ans.data, dict) else {}
            kind, result = data.get("resultType"), data.get("result")
            # streamed samples are None in the list; anything else in it is not a sample
            if kind == "vector" and isinstance(result, list) and all(item is None for item in result):
                ans.data = []
                return ans
            raise self._shape("/api/v1/query", "query", ans.data)
        items = result_items(ans.data)
        if items is None:
            raise self._shape("/api/v1/query", "query", ans.data)
        ans.data = items
        return ans

    def targets(self, keep=None) -> Answer:
        """``/api/v1/targets?state=active``; ``data`` is the ``activeTargets`` list (objects with
        string labels; ``scrapeInterval``, ``health``, ``lastError`` strings when present).

        ``keep``: called with each well-formed target as it is decoded, returns what to keep of
        it (a tuple, which the JSON decoder never makes, or a smaller mapping, itself a valid
        target) or None to leave it out: the answer lists every job's targets with their
        discovered labels, several KB each, and a large cluster has thousands of them.
        """
        ans = self.get("/api/v1/targets", {"state": "active"}, targets_hook(keep) if keep else None)
        data = ans.data if isinstance(ans.data, dict) else None
        active = (data.get("activeTargets") or []) if data is not None else None
        if isinstance(active, list) and keep:
            active = [t for t in active if t is not LEFT_OUT]
        if not isinstance(active, list) or not all(isinstance(t, tuple) or _is_target(t) for t in active):
            raise self._shape("/api/v1/targets", "targets", ans.data)
        ans.data = active
        return ans

    def rules(self) -> Answer:
        """``/api/v1/rules``; ``data`` is the list of groups (follows ``groupNextToken`` pages; a
        token the server repeats, or more than :data:`MAX_RULE_PAGES` pages, is an error). Without
        the rules' active alerts where the server can (:data:`_NO_ALERTS`)."""
        groups, params, seen, warnings, infos = [], dict(_NO_ALERTS), set(), [], []
        for _ in range(MAX_RULE_PAGES):
            ans = self.get("/api/v1/rules", params)
            warnings += ans.warnings
            infos += ans.infos
            data = ans.data if isinstance(ans.data, dict) else None
            page = (data.get("groups") or []) if data is not None else None
            if not isinstance(page, list) or not all(isinstance(g, dict) and isinstance(g.get("rules", []), list)
                                                     and all(isinstance(r, dict) for r in g.get("rules", []))
                                                     and isinstance(g.get("name", ""), str) for g in page):
                raise self._shape("/api/v1/rules", "rules", ans.data)
            groups += page
            token = data.get("groupNextToken")
            if not token:
                return Answer(groups, warnings, infos)
            if not isinstance(token, str) or token in seen:
                raise PromError("api", self.base + "/api/v1/rules", f"the server repeated groupNextToken "
                                f"{redact.clip(str(token), 40)!r}: its rule pages loop", hint="a bug in the server or a proxy; "
                                "leave rules-loaded out with --checks")
            seen.add(token)
            params = {**_NO_ALERTS, "group_next_token": token, "group_limit": "100"}
        raise PromError("api", self.base + "/api/v1/rules", f"more than {MAX_RULE_PAGES} pages of rule groups")

    def metadata(self, metric: str) -> Answer:
        """``/api/v1/metadata?metric=M``; ``data`` is the list of ``{"type", "help", "unit"}``."""
        ans = self.get("/api/v1/metadata", {"metric": metric})
        data = ans.data if isinstance(ans.data, dict) else {}
        entries = data.get(metric) or []
        if not isinstance(entries, list) or not all(isinstance(e, dict) and all(isinstance(v, str) for v in e.values())
                                                    for e in entries):
            raise self._shape("/api/v1/metadata", "metadata", ans.data)
        ans.data = entries
        return ans

    def series(self, match: str, start: float, end: float) -> Answer:
        """``/api/v1/series``: ``data`` is the list of label sets of series matching ``match``
        between ``start`` and ``end`` (unix seconds)."""
        ans = self.get("/api/v1/series", {"match[]": match, "start": f"{start:.3f}", "end": f"{end:.3f}"})
        data = ans.data if ans.data is not None else []
        if not isinstance(data, list) or not all(map(_is_labels, data)):
            raise self._shape("/api/v1/series", "series", ans.data)
        ans.data = data
        return ans
