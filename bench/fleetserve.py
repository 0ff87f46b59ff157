"""Servers of the fleet-scale benchmark (``bench/fleet.py``): the fleet generator, a counting HTTP
proxy in front of Prometheus, and a Prometheus launched on a data folder with backfilled history.
All bind 127.0.0.1 and are stopped by the benchmark (threads by ``shutdown``, Prometheus by PID)."""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import yaml

from gpumon.localprom import LocalPrometheus
from gpumon.loopback import TEXT_FORMAT, ServedInThread, free_port

from fleetlib import PAGE_PATH, Page


class FleetServer(ServedInThread):
    """One port serving every node's pre-rendered page at ``/metrics/<node>``; ``pages`` may be
    swapped whole (``server.pages = other``) to inject or clear faults between scrapes."""

    def __init__(self, pages: dict[str, Page]):
        self.pages = pages
        self.port = free_port()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive: Prometheus reuses one connection per target

            def do_GET(self):  # noqa: N802 - http.server API
                page = outer.pages.get(self.path[len(PAGE_PATH):]) if self.path.startswith(PAGE_PATH) else None
                status, body = (page.status, page.render(time.time())) if page else (404, b"no such node\n")
                if status != 200:
                    body = b"An error has occurred while serving metrics:\n\ncollector failed\n" if page else body
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", TEXT_FORMAT)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"


@dataclass
class Traffic:
    """What crossed a :class:`CountingProxy`: requests, response body bytes (uncompressed: the
    proxy asks Prometheus for identity encoding) and the upstream seconds of each request (the
    time Prometheus took to answer it in full, seen from the proxy)."""

    requests: int = 0
    bytes: int = 0
    upstream_seconds: float = 0.0
    statuses: dict[int, int] = field(default_factory=dict)
    largest: int = 0
    #: (upstream seconds, start offset from the first request, method, path with its query string)
    #: of every request, in arrival order: where the time goes, request by request
    log: list[tuple[float, float, str, str]] = field(default_factory=list)
    started: float | None = None


class CountingProxy(ServedInThread):
    """A loopback HTTP proxy to ``upstream`` that counts requests, bytes and upstream time in
    ``traffic`` (reset with :meth:`reset`). GET and POST; headers passed through except the
    hop-by-hop ones and ``Accept-Encoding``."""

    _DROP = {"host", "content-length", "connection", "accept-encoding", "keep-alive", "transfer-encoding"}

    def __init__(self, upstream: str, timeout: float = 600):
        self.upstream = upstream.rstrip("/")
        self.client = httpx.Client(timeout=timeout, limits=httpx.Limits(max_connections=64))
        self.lock = threading.Lock()
        self.traffic = Traffic()
        self.port = free_port()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # headers and body go out in two writes: with Nagle's algorithm on, the body waits for
            # the client's delayed ACK of the headers (about 40 ms on Linux), on every request
            disable_nagle_algorithm = True

            def _forward(self, method: str):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items() if k.lower() not in outer._DROP}
                start = time.perf_counter()
                try:
                    resp = outer.client.request(method, outer.upstream + self.path, content=body, headers=headers)
                    status, data, ctype = resp.status_code, resp.content, resp.headers.get("content-type", "")
                except httpx.HTTPError as exc:
                    status, data, ctype = 502, f"proxy: {exc}".encode(), "text/plain"
                took = time.perf_counter() - start
                with outer.lock:
                    t = outer.traffic
                    t.requests += 1
                    t.bytes += len(data)
                    t.largest = max(t.largest, len(data))
                    t.upstream_seconds += took
                    t.statuses[status] = t.statuses.get(status, 0) + 1
                    t.started = start if t.started is None else min(t.started, start)
                    query = body.decode(errors="replace") if body else ""
                    t.log.append((took, start - t.started, method, self.path + (f" {query}" if query else "")))
                try:
                    self.send_response(status)
                    if ctype:
                        self.send_header("Content-Type", ctype)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def do_GET(self):  # noqa: N802
                self._forward("GET")

            def do_POST(self):  # noqa: N802
                self._forward("POST")

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def reset(self) -> Traffic:
        """Return the traffic so far and start counting from zero."""
        with self.lock:
            old, self.traffic = self.traffic, Traffic()
        return old

    def __exit__(self, *exc) -> None:
        super().__exit__(*exc)
        self.client.close()


def promtool_for(prometheus: str) -> str:
    """The promtool next to ``prometheus`` (a 3.x build dir), else the one on PATH."""
    sibling = Path(prometheus).with_name("promtool")
    if sibling.exists():
        return str(sibling)
    found = shutil.which("promtool")
    if not found:
        raise FileNotFoundError("promtool not found: apt-get install --no-install-recommends prometheus")
    return found


class FleetPrometheus(LocalPrometheus):
    """:class:`gpumon.localprom.LocalPrometheus` with the benchmark's own scrape config and a
    data folder that ``backfill(tsdb_dir)`` fills before the server starts (blocks made by
    promtool are picked up when the TSDB opens)."""

    def __init__(self, scrape_configs: list[dict], rule_files: list[Path], evaluation_interval: str,
                 binary: str, backfill=None, startup_timeout: float = 900):
        self.scrape_configs = scrape_configs
        self.backfill = backfill
        self.backfill_seconds = 0.0
        super().__init__({}, rule_files, evaluation_interval=evaluation_interval, binary=binary,
                         startup_timeout=startup_timeout)

    def _config(self, folder: Path) -> Path:
        path = super()._config(folder)
        cfg = yaml.safe_load(path.read_text())
        cfg["scrape_configs"] = self.scrape_configs
        cfg["global"].pop("scrape_timeout", None)
        path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        return path

    def start(self) -> "FleetPrometheus":
        folder = self._folder()
        if self.backfill:
            start = time.perf_counter()
            self.backfill(folder)
            self.backfill_seconds = time.perf_counter() - start
        config = self._config(folder)
        self._spawn([self.binary, f"--config.file={config}", f"--storage.tsdb.path={folder / 'data'}",
                     f"--web.listen-address=127.0.0.1:{self.port}", "--storage.tsdb.retention.time=1d"])
        return self

    def rss_bytes(self) -> int:
        """Resident set size of the server now (``VmRSS`` of /proc/PID/status), 0 if unknown."""
        try:
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        except (OSError, AttributeError):
            pass
        return 0


def run_backfill(promtool: str, history_file: Path, tsdb_dir: Path) -> None:
    """``promtool tsdb create-blocks-from openmetrics FILE DIR``; raises RuntimeError with its
    output on failure. The input file is removed afterwards (it is large)."""
    proc = subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics", str(history_file), str(tsdb_dir)],
                          capture_output=True, text=True)
    history_file.unlink(missing_ok=True)
    if proc.returncode != 0:
        raise RuntimeError(f"promtool backfill failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")


def backfill_streamed(promtool: str, write, start: float, end: float, step: float, tsdb_dir: Path,
                      folder: Path, max_bytes: int = 1 << 30) -> dict:
    """Backfill ``start..end`` (every ``step`` s) in time slices, each written by ``write(out,
    first, last)`` (returns samples written) to one OpenMetrics file of at most about
    ``max_bytes``, turned into blocks by :func:`run_backfill` and removed before the next slice
    is written: the disk never holds more than one slice (a 1 h backfill of 8,000 GPUs is 13 GB
    in one file). Returns {"samples", "files", "largest file bytes"}."""
    import io

    from fleetlib import history_chunks

    probe = io.StringIO()
    write(probe, start, start)
    out = {"samples": 0, "files": 0, "largest file bytes": 0}
    for first, last in history_chunks(start, end, step, len(probe.getvalue()), max_bytes):
        path = folder / f"history-{out['files']}.om"
        with open(path, "w", encoding="utf-8") as fh:
            out["samples"] += write(fh, first, last)
        out["largest file bytes"] = max(out["largest file bytes"], path.stat().st_size)
        out["files"] += 1
        run_backfill(promtool, path, tsdb_dir)
    return out
