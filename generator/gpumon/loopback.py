"""HTTP endpoints on loopback, served from a thread while a ``with`` block runs: a ``/metrics`` page
(what a test or the simulator serves to a real Prometheus) and an Alertmanager webhook receiver.
Standard library only, so ``gpumon simulate`` loads no HTTP client."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

#: Content-Type of the Prometheus text format; Prometheus 3 refuses scrapes without a known one.
TEXT_FORMAT = "text/plain; version=0.0.4; charset=utf-8"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class BurstServer(ThreadingHTTPServer):
    """A ThreadingHTTPServer whose listen backlog holds a burst of connections: the standard
    library's 5 overflows when tens of clients connect at once (dozens of vmalerts notifying one
    webhook receiver, Prometheus scraping many simulated nodes) while the serving thread waits for
    the interpreter lock, and each dropped connection attempt costs its client a retry a second or
    more later (a vmalert blocked that long misses its group's evaluations)."""

    request_queue_size = 128


class ServedInThread:
    """A ThreadingHTTPServer (``self.httpd``) served by a daemon thread (``self.thread``) while
    the ``with`` block runs: the part every loopback test server shares."""

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class ExpositionServer(ServedInThread):
    """A plain-HTTP ``/metrics`` endpoint (on 127.0.0.1 unless ``host`` says otherwise) serving whatever ``body()`` returns.

    ``body`` is called on every scrape, so a test can change what is served between scrapes.
    It may return a str (served with 200), or a tuple (status, text). Not prometheus_client: it
    would rename counters to ``_total``.
    """

    def __init__(self, body: Callable[[], "str | tuple[int, str]"], port: int | None = None,
                 host: str = "127.0.0.1"):
        self.body = body
        self.host = host
        self.port = port or free_port()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server API
                result = outer.body()
                status, text = result if isinstance(result, tuple) else (200, result)
                data = text.encode("utf-8")
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", TEXT_FORMAT)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the scraper gave up (scrape timeout): nothing to answer

            def log_message(self, *args):  # keep test output clean
                pass

        self.httpd = BurstServer((host, self.port), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


class WebhookReceiver(ServedInThread):
    """An Alertmanager webhook receiver on 127.0.0.1 that keeps every notification it gets
    (the parsed JSON bodies, in arrival order) in ``notifications``."""

    def __init__(self):
        self.port = free_port()
        self.notifications: list[dict] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server API
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with outer.lock:
                    outer.notifications.append(json.loads(body or b"{}"))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.httpd = BurstServer(("127.0.0.1", self.port), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"
