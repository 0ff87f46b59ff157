"""A hostile "Prometheus" on 127.0.0.1 for tests (issue #15): each mode is one misbehaviour a
real server, proxy or attacker can show (slow or huge bodies, gzip bombs, redirect loops, wrong
shapes, HTML, plain text, partial responses, error bodies that echo the request's credentials).

``MODES`` maps a mode name to (responder, expected exit codes of ``gpumon validate``). A responder
is ``fn(handler, path, params) -> None`` and writes the whole answer itself.
"""

from __future__ import annotations

import functools
import gzip
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

EMPTY = {"/api/v1/targets": {"activeTargets": [], "droppedTargets": []}, "/api/v1/rules": {"groups": []},
         "/api/v1/metadata": {}, "/api/v1/series": []}
#: longest a responder ever stalls (a test server must not outlive its test by much)
STALL = 20.0


def send(h, status: int, body: bytes | str, ctype: str = "application/json", headers: dict | None = None) -> None:
    data = body.encode() if isinstance(body, str) else body
    h.send_response(status)
    h.send_header("Content-Type", ctype)
    for k, v in (headers or {}).items():
        h.send_header(k, v)
    if "Content-Length" not in (headers or {}):
        h.send_header("Content-Length", str(len(data)))
    h.end_headers()
    try:
        h.wfile.write(data)
    except OSError:
        pass


def ok(h, data, warnings=None) -> None:
    doc = {"status": "success", "data": data}
    if warnings is not None:
        doc["warnings"] = warnings
    send(h, 200, json.dumps(doc))


def vector(samples=()) -> dict:
    return {"resultType": "vector", "result": [{"metric": m, "value": [time.time(), v]} for m, v in samples]}


def probe(params) -> bool:
    return params.get("query", [""])[0] == "vector(1)"


def healthy(h, path, params) -> None:
    """A Prometheus with no data at all: answers every API correctly."""
    if path == "/api/v1/query":
        ok(h, vector([({}, "1")]) if probe(params) else vector())
    elif path in EMPTY:
        ok(h, EMPTY[path])
    else:
        send(h, 404, "404 page not found\n", "text/plain")


def after_probe(fn):
    """Answer the ``vector(1)`` probe correctly, then misbehave with ``fn``."""
    def responder(h, path, params):
        if path == "/api/v1/query" and probe(params):
            return healthy(h, path, params)
        return fn(h, path, params)
    return responder


def on(path_prefix: str, fn):
    """Misbehave with ``fn`` on one API only; healthy elsewhere."""
    def responder(h, path, params):
        return fn(h, path, params) if path.startswith(path_prefix) else healthy(h, path, params)
    return responder


def echo_headers(h) -> str:
    return "\n".join(f"{k}: {v}" for k, v in h.headers.items())


def trickle(h, path, params) -> None:
    """Headers at once, then one byte a second: a per-read timeout never fires."""
    h.send_response(200)
    h.send_header("Content-Type", "application/json")
    h.send_header("Content-Length", "100000")
    h.end_headers()
    end = time.monotonic() + STALL
    try:
        while time.monotonic() < end:
            h.wfile.write(b" ")
            h.wfile.flush()
            time.sleep(0.3)
    except OSError:
        pass


def trickle_headers(h, path, params) -> None:
    """The status line at once, then one header line at a time, never the blank line that ends
    them: each read brings a few bytes, so a per-read timeout never fires."""
    end = time.monotonic() + STALL
    try:
        h.wfile.write(b"HTTP/1.1 200 OK\r\n")
        h.wfile.flush()
        while time.monotonic() < end:
            time.sleep(0.2)
            h.wfile.write(b"X-A: b\r\n")
            h.wfile.flush()
    except OSError:
        pass
    h.close_connection = True


def redirect_to(location: str, status: int = 302):
    """Answer every request with a redirect to ``location`` (``{port}``: this server's port)."""
    def responder(h, path, params):
        send(h, status, "", headers={"Location": location.format(port=h.server.server_address[1])})
    return responder


#: what :func:`metadata_service` hands out: nothing of it may reach a report
FAKE_KEY = "AKIAFAKEFAKE7q2w"


def metadata_service(h, path, params) -> None:
    """Redirect to this server under another host name (``localhost``), which answers like a cloud
    metadata service: credentials as text/plain (tests never reach a real 169.254.169.254)."""
    if h.headers.get("Host", "").startswith("127."):
        port = h.server.server_address[1]
        return send(h, 302, "", headers={"Location": f"http://u:pw-in-location@localhost:{port}/latest/meta-data/iam/"
                                                     "security-credentials/role?X-Amz-Token=tok-in-location"})
    send(h, 200, json.dumps({"AccessKeyId": FAKE_KEY, "SecretAccessKey": "fake-secret"}), "text/plain")


def stall(h, path, params) -> None:
    time.sleep(STALL)
    healthy(h, path, params)


def huge(h, path, params) -> None:
    """A valid-looking JSON answer of 3 MiB (tests run with --max-response-mib 1)."""
    pad = " " * (3 << 20)
    send(h, 200, '{"status":"success","data":{"resultType":"vector","result":[]}' + pad + "}")


def gzip_bomb(h, path, params) -> None:
    """A few KiB of gzip that inflate to 64 MiB of spaces before the JSON even starts."""
    send(h, 200, _bomb(), headers={"Content-Encoding": "gzip"})


@functools.cache
def _bomb() -> bytes:
    # made on first use: compressing 64 MiB costs every test process a second of CPU at import
    return gzip.compress(b" " * (64 << 20) + b'{"status":"success","data":{"resultType":"vector","result":[]}}', 9)


def lying_length(h, path, params) -> None:
    send(h, 200, b'{"status":"success"', headers={"Content-Length": str(10 << 30)})


def close_mid_body(h, path, params) -> None:
    h.send_response(200)
    h.send_header("Content-Type", "application/json")
    h.send_header("Content-Length", "5000")
    h.end_headers()
    h.wfile.write(b'{"status":"success","data":')
    h.wfile.flush()
    h.connection.shutdown(socket.SHUT_RDWR)


def reset(h, path, params) -> None:
    h.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    h.connection.close()


def redirect_loop(h, path, params) -> None:
    send(h, 302, "", headers={"Location": path + "?loop=1"})


def redirect_other_host(h, path, params) -> None:
    """Send the client to another host name of the same server (localhost vs 127.0.0.1), which then
    echoes whatever credentials reached it."""
    host = "localhost" if h.headers.get("Host", "").startswith("127.") else None
    if host:
        port = h.server.server_address[1]
        return send(h, 307, "", headers={"Location": f"http://{host}:{port}{h.path}"})
    send(h, 500, "got: " + echo_headers(h), "text/plain")


def deep_json(h, path, params) -> None:
    send(h, 200, '{"status":"success","data":' + "[" * 100000 + "]" * 100000 + "}")


def rules_token_loop(h, path, params) -> None:
    ok(h, {"groups": [{"name": "g", "file": "f", "rules": []}], "groupNextToken": "same-token"})


def partial_missing_target(h, path, params) -> None:
    """Thanos Query: no targets API, and every data answer is partial (a store is down)."""
    if path == "/api/v1/targets":
        return send(h, 404, "404 page not found\n", "text/plain")
    if path == "/api/v1/query" and probe(params):
        return healthy(h, path, params)
    if path == "/api/v1/query":
        return ok(h, vector(), warnings=["partial response: store 10.0.0.9:10901 unavailable"])
    ok(h, EMPTY.get(path, {}), warnings=["partial response: store 10.0.0.9:10901 unavailable"])


def _static(status: int, body: str, ctype: str = "application/json", headers: dict | None = None):
    return lambda h, path, params: send(h, status, body, ctype, headers)


def _data(data, path: str = "/api/v1/query"):
    """Probe answered; ``path`` answers ``data`` (a success envelope); the rest healthy."""
    return after_probe(lambda h, p, params: ok(h, data) if p == path else healthy(h, p, params))


LOGIN = "<!DOCTYPE html><html><body><h1>Sign in</h1><form action='/oauth/start'></form></body></html>"
FAIL = {2}            # could not check
LATER = {1, 3}        # the probe worked; later answers are broken: failures or inconclusive, never 0
INCONCLUSIVE = {3}

#: mode -> (responder, exit codes validate may give)
MODES = {
    "html-200": (_static(200, "<html><body>Prometheus Time Series DB</body></html>", "text/html"), FAIL),
    "html-login-302": (lambda h, p, q: send(h, 302, "", headers={"Location": "/oauth/start"}) if p != "/oauth/start"
                       else send(h, 200, LOGIN, "text/html"), FAIL),
    "html-login-401": (_static(401, LOGIN, "text/html"), FAIL),
    "html-502": (_static(502, "<html>Bad Gateway</html>", "text/html"), FAIL),
    "text-200": (_static(200, "hello world\n", "text/plain"), FAIL),
    "text-404": (_static(404, "404 page not found\n", "text/plain"), FAIL),
    "text-500": (_static(500, "internal error\n", "text/plain"), FAIL),
    "mimir-no-org-id": (_static(401, "no org id\n", "text/plain"), FAIL),
    "json-not-envelope": (_static(200, '{"foo": 1}'), FAIL),
    "json-array": (_static(200, "[1, 2, 3]"), FAIL),
    "json-null": (_static(200, "null"), FAIL),
    "json-string": (_static(200, '"x1"'), FAIL),
    "status-error-400": (_static(400, '{"status":"error","errorType":"bad_data","error":"invalid query"}'), FAIL),
    "status-error-echo": (lambda h, p, q: send(h, 400, json.dumps({"status": "error", "errorType": "bad_data",
                                                                    "error": echo_headers(h)})), FAIL),
    "text-echo-headers": (lambda h, p, q: send(h, 500, "request was:\n" + echo_headers(h), "text/plain"), FAIL),
    "html-echo-headers": (lambda h, p, q: send(h, 403, f"<html><pre>{echo_headers(h)}</pre></html>", "text/html"),
                          FAIL),
    "auth-401-json-echo": (lambda h, p, q: send(h, 401, json.dumps({"status": "error", "errorType": "auth",
                                                                     "error": "bad " + echo_headers(h)})), FAIL),
    "probe-string-x1": (_static(200, '{"status":"success","data":{"resultType":"string","result":[1,"x1"]}}'), FAIL),
    "probe-result-string": (_static(200, '{"status":"success","data":{"resultType":"vector","result":"x1"}}'), FAIL),
    "probe-scalar-result": (_static(200, '{"status":"success","data":{"resultType":"vector","result":5}}'), FAIL),
    "probe-two-samples": (lambda h, p, q: ok(h, vector([({}, "1"), ({"a": "b"}, "1")])), FAIL),
    "probe-value-2": (lambda h, p, q: ok(h, vector([({}, "2")])), FAIL),
    "probe-data-list": (_static(200, '{"status":"success","data":[1,2]}'), FAIL),
    "result-not-list": (_data({"resultType": "vector", "result": "x"}), LATER),
    "result-items-not-objects": (_data({"resultType": "vector", "result": [1, "a", None]}), LATER),
    "metric-not-object": (_data({"resultType": "vector", "result": [{"metric": "up", "value": [1, "1"]}]}), LATER),
    "value-not-pair": (_data({"resultType": "vector", "result": [{"metric": {}, "value": "1"}]}), LATER),
    "value-number": (_data({"resultType": "vector", "result": [{"metric": {"job": "dcgm-exporter"},
                                                                "value": [1, 1]}]}), LATER),
    "value-not-numeric": (_data({"resultType": "vector", "result": [{"metric": {"job": "dcgm-exporter"},
                                                                    "value": [1, "abc"]}]}), LATER),
    "value-nan-count": (_data({"resultType": "vector", "result": [{"metric": {"job": "x"}, "value": [1, "NaN"]}]}),
                        LATER),
    "targets-not-objects": (_data({"activeTargets": [1, "x", None]}, "/api/v1/targets"), LATER),
    "targets-scrape-interval-number": (_data({"activeTargets": [{"labels": {"job": "dcgm-exporter",
                                                                            "instance": "a:9400"},
                                                                 "scrapeInterval": 15, "health": "up"}]},
                                             "/api/v1/targets"), LATER),
    "targets-data-list": (_data([1, 2], "/api/v1/targets"), LATER),
    "rules-groups-not-list": (_data({"groups": "x"}, "/api/v1/rules"), LATER),
    "rules-entries-wrong": (_data({"groups": [{"name": 1, "rules": "x"}]}, "/api/v1/rules"), LATER),
    "rules-token-loop": (on("/api/v1/rules", rules_token_loop), LATER),
    "metadata-wrong": (_data({"DCGM_FI_DEV_GPU_TEMP": "x"}, "/api/v1/metadata"), LATER),
    # Thanos Query's store list: label sets that are not label sets, on a healthy and a failing store
    "stores-label-sets-wrong": (_data({"store": [{"name": "a", "labelSets": "x"},
                                                 {"name": "b", "labelSets": [{"k": ["v"]}, 1], "lastError": "down"}]},
                                      "/api/v1/stores"), LATER),
    "warnings-not-list": (after_probe(lambda h, p, q: send(h, 200, json.dumps(
        {"status": "success", "data": vector(), "warnings": "one string"}))), LATER),
    "partial-missing-target": (partial_missing_target, INCONCLUSIVE),
    "redirect-loop": (redirect_loop, FAIL),
    "redirect-other-host-echo": (redirect_other_host, FAIL),
    "gzip-bomb": (gzip_bomb, FAIL),
    "huge-body": (huge, FAIL),
    "huge-after-probe": (after_probe(huge), LATER),
    "lying-content-length": (lying_length, FAIL),
    "trickle-body": (trickle, FAIL),
    "trickle-headers": (trickle_headers, FAIL),
    "trickle-headers-after-probe": (after_probe(trickle_headers), LATER),
    # a redirect to an internal address (a cloud metadata service: credentials in the body) is not
    # followed; nor is one to another port or scheme of the same host, or a Location not a URL
    "redirect-metadata": (metadata_service, FAIL),
    "redirect-other-port": (redirect_to("http://127.0.0.1:1/x?token=abc"), FAIL),
    "redirect-https": (redirect_to("https://127.0.0.1:{port}/api/v1/query"), FAIL),
    "redirect-bad-port": (redirect_to("http://127.0.0.1:99999/x"), FAIL),
    "redirect-bad-ipv6": (redirect_to("http://a:b@[::1/x"), FAIL),
    "redirect-bad-port-after-probe": (after_probe(redirect_to("http://127.0.0.1:99999/x")), LATER),
    "stall": (stall, FAIL),
    "stall-after-probe": (after_probe(stall), LATER),
    "bad-encoding": (_static(200, "xx", headers={"Content-Encoding": "br"}), FAIL),
    "corrupt-gzip": (_static(200, "not gzip at all", headers={"Content-Encoding": "gzip"}), FAIL),
    "deep-json": (deep_json, FAIL),
    "close-mid-body": (close_mid_body, FAIL),
    "reset": (reset, FAIL),
    "empty-204": (_static(204, ""), FAIL),
    "unknown-charset": (_static(200, '{"status":"success","data":{"resultType":"vector","result":[]}}',
                                "application/json; charset=x-unknown-9"), FAIL),
}


def _invalid_utf8(h, path, params) -> None:
    send(h, 200, b'{"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":"\xff\xfe"},'
                 b'"value":[1,"1"]}]}}', "application/json; charset=utf-8")


MODES["invalid-utf8"] = (_invalid_utf8, FAIL)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):  # noqa: N802 - http.server's naming
        parts = urlsplit(self.path)
        self.server.requests += 1
        self.server.seen_auth.append(self.headers.get("Authorization"))
        try:
            self.server.responder(self, parts.path, parse_qs(parts.query))
        except (OSError, ValueError):
            pass

    def log_message(self, *args):
        pass


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # a client that gave up on a hostile answer is the expected case


class HostileProm:
    """``with HostileProm("gzip-bomb") as url: ...``; ``mode`` may be changed between runs."""

    def __init__(self, mode: str = "html-200"):
        self.server = _QuietServer(("127.0.0.1", 0), _Handler)
        self.mode = mode
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def mode(self) -> str:
        return self._mode

    @mode.setter
    def mode(self, name: str) -> None:
        self._mode = name
        self.server.responder = MODES[name][0] if name != "healthy" else healthy
        self.server.requests = 0
        self.server.seen_auth = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> "HostileProm":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
