"""Peak memory of ``gpumon validate`` as the fleet grows, against a stand-in server answering as a
healthy fleet, in a process of its own (so its answer buffers are not counted), side by side for
two revisions in one run.

A real Prometheus holding 64,000 GPUs' series needs more than this 2-core machine can scrape; what
validate keeps in memory depends only on the answers, so a stand-in that answers the same shapes
(``bench/fleetlib.py``'s 4.x labels, 8 GPUs per node) measures the client. The stand-in answers:

* the reporting parts (``group by (...) (last_over_time(M{job, gpu=~".*[048]"}[..]) or ...)``):
  every GPU of the part, by the last digit of its index, one series each, as Prometheus does;
* each tracked metric's state (``label_replace(count(...), "gpumon_state", "now", ...)``): every
  GPU carries it;
* ``/api/v1/targets``: one healthy target per node, with the fields Prometheus 2.42 sends;
* every other query an empty vector (a healthy fleet: no bad value, gap, duplicate or reset);
  ``/api/v1/rules`` no group, ``/api/v1/metadata`` nothing.

With ``--faults`` the fleet has the shapes of faults that make validate keep per-metric sets (the
benchmark's real fleets have them): one GPU gone since the lookback began (every required metric's
state lists it as gone), and on one node the profiling fields and the SM clock missing (their
counts are 8 short, their per-node counts name that node).

With ``--global-view`` it answers as Thanos Query over 4 clusters does: a ``cluster`` label on
every series and target. With ``--no-targets-api`` it answers as Mimir does: no targets API (404),
the job's ``up`` from a query instead (every target's sample for ``up{job=...}``, the count for the
"not up, and how many" query).

For each ``--gpus`` size, ``gpumon validate`` of each revision runs under ``/usr/bin/time``
(``--format json``, the default concurrency) and its peak RSS prints, with the growth per 1,000
GPUs between the smallest and largest size and the ratio of the two revisions.

Usage: .venv/bin/python bench/validate_memory.py [--gpus 1000,16000,64000] [--rev REV] [--also REV] [--global-view] [--no-targets-api] [--faults]
The stand-in binds 127.0.0.1 and is stopped at exit.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from threading import Thread

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "generator"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from fleet import Source  # noqa: E402
from gpumon.simpages import gpu_uuid  # noqa: E402

PER_NODE = 8
JOB = "dcgm-exporter"
MODEL, DRIVER = "NVIDIA H100 80GB HBM3", "550.54.15"
SHARD = re.compile(r'gpu(=~|!~)"\.\*\[(\d+)\]"')
METRIC = re.compile(r"last_over_time\((\w+)\{")
#: the fields missing on one node with --faults (profiling off there, and one more)
SHORT = ("DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
         "DCGM_FI_PROF_DRAM_ACTIVE", "DCGM_FI_PROF_PCIE_TX_BYTES", "DCGM_FI_PROF_PCIE_RX_BYTES")


def node_name(n: int) -> str:
    return f"gpu-node-{n:05d}"


def node_address(n: int) -> str:
    return f"10.{n // 62500}.{n // 250 % 250}.{n % 250}:9400"


class Fleet:
    """The stand-in's answers for a fleet of ``gpus`` GPUs, 8 per node: healthy, or with
    ``faults`` a gone GPU and a node missing the :data:`SHORT` fields."""

    def __init__(self, gpus: int, global_view: bool = False, targets_api: bool = True, faults: bool = False):
        self.gpus, self.global_view, self.targets_api = gpus, global_view, targets_api
        self.nodes = (gpus + PER_NODE - 1) // PER_NODE
        # --faults: GPU 7 of node 2 gone; node 1 without the profiling fields and the SM clock
        self.gone = (2, 7) if faults else None
        self.short_node, self.short = (1, SHORT) if faults else (None, ())

    def labels(self, n: int, g: int) -> dict:
        """The inventory's label set of GPU ``g`` of node ``n``."""
        return {"instance": node_address(n), "Hostname": node_name(n), "UUID": gpu_uuid(node_name(n), g),
                "gpu": str(g), "modelName": MODEL, "DCGM_FI_DRIVER_VERSION": DRIVER, **self.cluster(n)}

    def state(self, query: str) -> list[dict]:
        """A metric's state: how many GPUs carry it now; for a required metric the gone GPU too."""
        metric = METRIC.search(query).group(1)
        now = self.gpus - (self.gone is not None) - PER_NODE * (metric in self.short)
        out = [{"metric": {"gpumon_state": "now"}, "value": [time.time(), str(now)]}]
        if self.gone and '"gpumon_state", "gone"' in query:
            out.append({"metric": {**self.labels(*self.gone), "gpumon_state": "gone"}, "value": [time.time(), "1"]})
        return out

    def cluster(self, node: int) -> dict:
        """The Thanos external label of a node's series (4 clusters), none for one Prometheus."""
        return {"cluster": f"c{node * 4 // self.nodes}"} if self.global_view else {}

    def reporting(self, query: str) -> list[dict]:
        """The GPUs of the part the query's shard matcher selects (all without one)."""
        shard = SHARD.search(query)
        keep = (lambda d: True) if not shard else \
            (lambda d: (str(d) in shard.group(2)) == (shard.group(1) == "=~"))
        out = []
        for i in range(self.gpus):
            n, g = divmod(i, PER_NODE)
            if keep(g % 10) and (n, g) != self.gone:
                out.append({"metric": self.labels(n, g), "value": [time.time(), "1"]})
        return out

    def query(self, query: str) -> list[dict]:
        if query.strip() == "vector(1)":
            return [{"metric": {}, "value": [time.time(), "1"]}]
        if query.startswith("group by (") and "\n or last_over_time(" in query:
            return self.reporting(query)
        up = f'up{{job="{JOB}"}}'
        if query == up:
            return [{"metric": {"__name__": "up", "job": JOB, "instance": node_address(n), **self.cluster(n)},
                     "value": [time.time(), "1"]} for n in range(self.nodes)]
        if query.startswith(f"{up} != 1 or "):
            return [{"metric": {"gpumon_targets": "all"}, "value": [time.time(), str(self.nodes)]}]
        if query.startswith("label_replace(count("):
            return self.state(query)
        if query.startswith("(count by (instance) (") and METRIC.search(query).group(1) in self.short:
            # the per-node count of a short metric: only the short node, 0 (none carries it there)
            n = self.short_node
            return [{"metric": {"instance": node_address(n), **self.cluster(n)}, "value": [time.time(), "0"]}]
        return []

    def targets(self) -> list[dict]:
        now = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())
        return [{"discoveredLabels": {"__address__": node_address(n), "__metrics_path__": "/metrics",
                                      "__scheme__": "http", "job": JOB, **self.cluster(n)},
                 "labels": {"instance": node_address(n), "job": JOB, **self.cluster(n)}, "scrapePool": JOB,
                 "scrapeUrl": f"http://{node_address(n)}/metrics", "globalUrl": f"http://{node_address(n)}/metrics",
                 "lastError": "", "lastScrape": now, "lastScrapeDuration": 0.05, "health": "up",
                 "scrapeInterval": "15s", "scrapeTimeout": "10s"} for n in range(self.nodes)]


def serve(fleet: Fleet) -> ThreadingHTTPServer:
    """The stand-in on 127.0.0.1 (a free port), in a daemon thread."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            url = urllib.parse.urlsplit(self.path)
            params = dict(urllib.parse.parse_qsl(url.query))
            self.answer(url.path, params)

        def do_POST(self):  # noqa: N802
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
            self.answer(urllib.parse.urlsplit(self.path).path, dict(urllib.parse.parse_qsl(body)))

        def answer(self, path: str, params: dict):
            if path == "/api/v1/query":
                data = {"resultType": "vector", "result": fleet.query(params.get("query", ""))}
            elif path == "/api/v1/targets" and fleet.targets_api:
                data = {"activeTargets": fleet.targets(), "droppedTargets": []}
            elif path == "/api/v1/rules":
                data = {"groups": []}
            elif path == "/api/v1/metadata":
                data = {}
            elif path == "/api/v1/status/buildinfo":
                data = {"version": "2.42.0"}
            else:
                return self.send(404, {"status": "error", "errorType": "not_found", "error": "not found"})
            self.send(200, {"status": "success", "data": data})

        def send(self, status: int, obj: dict):
            body = json.dumps(obj, separators=(",", ":")).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    Thread(target=server.serve_forever, daemon=True).start()
    return server


def peak_rss(src: Source, url: str) -> tuple[float, int, float]:
    """(peak RSS in MiB, exit code, wall s) of one ``gpumon validate`` of ``src`` against ``url``."""
    cmd = ["/usr/bin/time", "-f", "GPUMON_TIME %M", *src.gpumon("validate", str(src.path / "gpumon.yaml"),
                                                                 "--prom", url, "--format", "json",
                                                                 "--timeout", "600", "--max-response-mib", "1024")]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=src.path, env=src.env(), capture_output=True, text=True)
    wall = time.perf_counter() - start
    kib = next((int(line.split()[1]) for line in proc.stderr.splitlines() if line.startswith("GPUMON_TIME ")), 0)
    if proc.returncode not in (0, 1):
        sys.stderr.write(proc.stderr[-1500:])
    return kib / 1024, proc.returncode, wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpus", default="1000,16000,64000", help="fleet sizes, comma-separated")
    ap.add_argument("--rev", help="measure this git revision (default: this checkout)")
    ap.add_argument("--also", help="a second revision measured beside it, on the same stand-in")
    ap.add_argument("--global-view", action="store_true", help="answer as Thanos Query over 4 clusters")
    ap.add_argument("--no-targets-api", action="store_true", help="answer /api/v1/targets with 404, as Mimir does")
    ap.add_argument("--faults", action="store_true", help="a gone GPU and a node missing 6 fields")
    args = ap.parse_args()
    sizes = [int(s) for s in args.gpus.split(",")]
    sources = [Source(args.rev, None)] + ([Source(args.also, None)] if args.also else [])
    rows: dict[str, list[float]] = {s.label: [] for s in sources}
    try:
        for gpus in sizes:
            server = serve(Fleet(gpus, args.global_view, not args.no_targets_api, args.faults))
            url = f"http://127.0.0.1:{server.server_address[1]}"
            for src in sources:
                mib, code, wall = peak_rss(src, url)
                rows[src.label].append(mib)
                print(f"{gpus:>7} GPUs  {src.label:<16} peak RSS {mib:7.1f} MiB  exit {code}  wall {wall:5.1f} s",
                      flush=True)
            server.shutdown()
            server.server_close()
    finally:
        for src in sources:
            src.close()
    if len(sizes) > 1:
        for label, mibs in rows.items():
            slope = (mibs[-1] - mibs[0]) / (sizes[-1] - sizes[0]) * 1000
            print(f"{label:<16} +{slope:.2f} MiB per 1,000 GPUs ({sizes[0]:,} -> {sizes[-1]:,})")
    if len(sources) == 2:
        a, b = (rows[s.label] for s in sources)
        print("ratio " + "  ".join(f"{n:,}: {x / y:.2f}" for n, x, y in zip(sizes, a, b)))


if __name__ == "__main__":
    main()
