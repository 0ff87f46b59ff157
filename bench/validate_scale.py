"""What ``gpumon validate`` costs at fleet size: this checkout against another ref (default
``main``), side by side on one live fleet in one real Prometheus (issue 16, part 3).

One process serves NODES x 8 GPUs of dcgm-exporter 4.x-style pages (the bundled spec's tracked
fields, one scrape target per node: Prometheus relabels ``node-00042:9400`` to
``127.0.0.1:<port>/metrics/node-00042``, so every node is its own ``instance``) to a real Prometheus
for a few minutes, with a few faults injected:

* ``DCGM_FI_DEV_FB_USED`` is not exported by node 3 (``series-missing`` on one node);
* GPU 5 of node 7 stops reporting anything half-way through (``gpu-lost``);
* GPU 2 of node 11 reads 250 °C (``value-out-of-range``);
* GPU 1 of node 13 exports ``DCGM_FI_DEV_POWER_USAGE`` in every other scrape only (``series-intermittent``);
* no GPU exports ``DCGM_FI_DEV_VGPU_LICENSE_STATUS`` (vGPU only: ``optional-absent``).

Pages are rendered once (only the energy counter, which the frozen check watches, and the faulty
lines change per scrape). Then ``gpumon validate gpumon.yaml --format json`` of this checkout and
of REF (a temporary ``git worktree``, run with the same venv through ``PYTHONPATH``) run through a
counting proxy on 127.0.0.1, alternating, twice each (the second run of each side counts: the
first pays for Prometheus' cold caches), and the script prints per side:
requests, response bytes on the wire (gzip, as the client asks) and decoded, peak RSS of the
validate process, wall seconds, upstream seconds (the sum over requests of the time Prometheus
took to answer in full: its own query time plus loopback transfer, and, 4 requests being in flight
at once, the time they waited for each other), and Prometheus CPU seconds during the run minus what
scraping alone costs (``process_cpu_seconds_total``, measured for 20 s before), Prometheus' own
query seconds (the growth of ``prometheus_engine_query_duration_seconds_sum`` over the slices
``prepare_time``, ``inner_eval`` and ``result_sort`` during the run: what the engine spent on
validate's queries, without the time they queued for each other or for a core), with the ratio
this/REF; and whether both found the same (check, severity, subject, message), times
("5m ago", RFC 3339 stamps) masked. Last, the naive validator (issue 16: one
``count(M{job, UUID="..."})`` per spec'd metric x GPU, same concurrency, through the same proxy):
a seeded sample of ``--naive-sample`` of its queries, wall and seconds scaled to all of them.

Usage: .venv/bin/python bench/validate_scale.py [--gpus 400] [--minutes 3] [--scrape-interval 10s]
       [--ref main] [--prometheus /usr/bin/prometheus] [--naive-sample 2000] [--json FILE]
The machine is shared: develop at 200-500 GPUs; 8,000 GPUs need ~1.5 GB for Prometheus.
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from pathlib import Path

import httpx
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from gpumon.localprom import LocalPrometheus  # noqa: E402
from gpumon.loopback import ExpositionServer, free_port  # noqa: E402
from gpumon.spec import load_spec  # noqa: E402

SPEC = ROOT / "gpumon.yaml"
DROPPED_FLEETWIDE = "DCGM_FI_DEV_VGPU_LICENSE_STATUS"
NODE_MISSING, GPU_LOST, HOT, INTERMITTENT = 3, 7, 11, 13  # node numbers of the faults


def _value(m, g: int) -> str:
    """A plausible reading: inside the spec's range, varying with the GPU index."""
    lo = m.range_min if m.range_min is not None else 0
    hi = m.range_max if m.range_max is not None else lo + 100
    return f"{lo + (hi - lo) * (0.2 + 0.05 * g):g}" if m.unit != "state" else "0"


class Fleet:
    """NODES x 8 GPUs; :meth:`page` is the ``/metrics`` body of one node at one scrape."""

    def __init__(self, spec, nodes: int, lost_after: float):
        self.metrics = [m for m in spec.tracked_metrics if m.name != DROPPED_FLEETWIDE]
        self.dynamic = [m for m in self.metrics if m.frozen_check]  # must increase between scrapes
        self.nodes = [f"node-{n:05d}" for n in range(nodes)]
        self.started, self.lost_after = time.monotonic(), lost_after
        self.scrapes: dict[str, int] = {}
        self.static: dict[str, str] = {}
        self.lost_gpu: dict[str, str] = {}
        for n, node in enumerate(self.nodes):
            lines, lost = [], []
            for g in range(8):
                for m in self.metrics:
                    if m in self.dynamic or (n == NODE_MISSING and m.name == "DCGM_FI_DEV_FB_USED") or \
                            (n == INTERMITTENT and g == 1 and m.name == "DCGM_FI_DEV_POWER_USAGE"):
                        continue
                    value = "250" if (n == HOT and g == 2 and m.name == "DCGM_FI_DEV_GPU_TEMP") else _value(m, g)
                    (lost if (n == GPU_LOST and g == 5) else lines).append(self.line(node, g, m.name, value))
            self.static[node] = "\n".join(lines) + "\n"
            self.lost_gpu[node] = "\n".join(lost) + "\n" if lost else ""

    @staticmethod
    def line(node: str, g: int, metric: str, value: str) -> str:
        """One sample line with dcgm-exporter 4.x's labels in its order."""
        n = int(node.split("-")[1])
        return (f'{metric}{{gpu="{g}",UUID="GPU-{n:08d}-0000-0000-0000-{g:012d}",pci_bus_id="00000000:{g + 16:02X}:00.0",'
                f'device="nvidia{g}",modelName="NVIDIA H100 80GB HBM3",Hostname="{node}",'
                f'DCGM_FI_DRIVER_VERSION="570.148.08"}} {value}')

    def page(self, node: str) -> "str | tuple[int, str]":
        if node not in self.static:
            return 404, "no such node\n"
        count = self.scrapes[node] = self.scrapes.get(node, 0) + 1
        n = int(node.split("-")[1])
        now = int(time.time())
        extra = [self.line(node, g, m.name, str(now * 250 + g)) for m in self.dynamic for g in range(8)
                 if not (n == GPU_LOST and g == 5 and self._lost())]
        if n == INTERMITTENT and count % 2:
            extra.append(self.line(node, 1, "DCGM_FI_DEV_POWER_USAGE", "300"))
        lost = self.lost_gpu[node] if not self._lost() else ""
        return self.static[node] + lost + "\n".join(extra) + "\n"

    def _lost(self) -> bool:
        return time.monotonic() - self.started > self.lost_after


class PathServer(ExpositionServer):
    """One port for the whole fleet: ``/metrics/<node>`` serves that node's page."""

    def __init__(self, fleet: Fleet):
        super().__init__(lambda: (404, ""))
        self.httpd.RequestHandlerClass.do_GET = self._handler(fleet)  # type: ignore[attr-defined]

    @staticmethod
    def _handler(fleet: Fleet):
        def do_get(handler):
            status, text = (lambda r: r if isinstance(r, tuple) else (200, r))(fleet.page(handler.path.rsplit("/", 1)[-1]))
            data = text.encode()
            try:
                handler.send_response(status)
                handler.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                handler.send_header("Content-Length", str(len(data)))
                handler.end_headers()
                handler.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass
        return do_get


class FleetPrometheus(LocalPrometheus):
    """A LocalPrometheus whose one job scrapes every node through ``/metrics/<node>`` of one port,
    keeping ``instance="<node>:9400"`` (relabeling: the address becomes the instance label first)."""

    def __init__(self, job: str, nodes: list[str], port: int, scrape_interval: str, binary: str | None):
        self.job, self.nodes, self.fleet_port = job, nodes, port
        super().__init__({}, scrape_interval=scrape_interval, evaluation_interval="1m", binary=binary,
                         startup_timeout=120)

    def _config(self, folder: Path) -> Path:
        cfg = {"global": {"scrape_interval": self.scrape_interval, "scrape_timeout": self.scrape_interval,
                          "evaluation_interval": "1m"},
               "scrape_configs": [{
                   "job_name": self.job,
                   "static_configs": [{"targets": [f"{n}:9400" for n in self.nodes]}],
                   "relabel_configs": [
                       {"source_labels": ["__address__"], "target_label": "instance"},
                       {"source_labels": ["__address__"], "regex": "(.*):9400", "target_label": "__metrics_path__",
                        "replacement": "/metrics/$1"},
                       {"target_label": "__address__", "replacement": f"127.0.0.1:{self.fleet_port}"}]}]}
        path = folder / "prometheus.yml"
        path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        return path


class CountingProxy:
    """A loopback HTTP proxy in front of Prometheus that counts requests, response bytes as sent
    (``wire``) and decoded, and the seconds each upstream answer took in full."""

    def __init__(self, upstream: str):
        self.upstream, self.lock = upstream, threading.Lock()
        self.http = httpx.Client(timeout=600)
        self.reset()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):  # noqa: N802 - http.server API
                headers = {k: v for k, v in self.headers.items() if k.lower() in ("accept-encoding", "accept")}
                started = time.monotonic()
                with outer.http.stream("GET", outer.upstream + self.path, headers=headers) as resp:
                    body = b"".join(resp.iter_raw())
                took = time.monotonic() - started
                encoding = resp.headers.get("content-encoding", "")
                decoded = len(zlib.decompress(body, 47)) if encoding in ("gzip", "deflate") and body else len(body)
                with outer.lock:
                    outer.log.append((took, decoded, self.path))
                    outer.requests += 1
                    outer.wire += len(body)
                    outer.decoded += decoded
                    outer.upstream_s += took
                self.send_response(resp.status_code)
                for key in ("content-type", "content-encoding"):
                    if key in resp.headers:
                        self.send_header(key, resp.headers[key])
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def reset(self) -> None:
        self.requests, self.wire, self.decoded, self.upstream_s = 0, 0, 0, 0.0
        self.log: list[tuple[float, int, str]] = []  # (seconds, decoded bytes, path and query string)

    def close(self) -> None:
        self.httpd.shutdown()
        self.http.close()


#: runs gpumon's CLI and prints its own peak memory (VmHWM, KiB) and where gpumon was imported from;
#: not ru_maxrss, which after the exec still holds the peak of the process that started it (Linux
#: keeps the peak of the memory an exec replaces, and Python's subprocess starts children with vfork)
WRAPPER = ("import re, sys, gpumon\nfrom gpumon.cli import main\nsys.argv = ['gpumon'] + sys.argv[1:]\n"
           "try:\n    main()\nfinally:\n    print('MAXRSS', re.search(r'VmHWM:\\s+(\\d+) kB', open('/proc/self/status').read())"
           ".group(1), gpumon.__file__, file=sys.stderr)\n")


def prometheus_cpu(url: str) -> float:
    """Prometheus' own ``process_cpu_seconds_total`` (from its ``/metrics``)."""
    text = httpx.get(url + "/metrics", timeout=30).text
    return float(re.search(r"^process_cpu_seconds_total (\S+)$", text, re.M).group(1))


#: the engine's own time per query (Prometheus 2.x and 3.x): the queue slice is waiting, not work
QUERY_SLICES = ("prepare_time", "inner_eval", "result_sort")


def prometheus_query_seconds(url: str) -> float:
    """Seconds Prometheus' engine spent on queries so far (summed over :data:`QUERY_SLICES`)."""
    text = httpx.get(url + "/metrics", timeout=30).text
    return sum(float(v) for k, v in re.findall(r'^prometheus_engine_query_duration_seconds_sum\{slice="(\w+)"\} (\S+)$',
                                                text, re.M) if k in QUERY_SLICES)


def run_naive(spec, uuids: list[str], proxy: CountingProxy, concurrency: int, sample: int) -> dict:
    """The naive validator (``bench/fleetlib.naive_queries``): a seeded sample of ``sample`` of its
    queries with ``concurrency`` in flight, wall and Prometheus seconds scaled to all of them."""
    import random
    from concurrent.futures import ThreadPoolExecutor

    sys.path.insert(0, str(ROOT / "bench"))
    from fleetlib import naive_queries

    queries = naive_queries(spec, uuids)
    chosen = random.Random(16).sample(queries, sample) if sample < len(queries) else queries
    proxy.reset()
    engine = prometheus_query_seconds(proxy.upstream)
    with httpx.Client(timeout=120, limits=httpx.Limits(max_connections=concurrency)) as client:
        started = time.monotonic()
        with ThreadPoolExecutor(concurrency) as pool:
            list(pool.map(lambda q: client.get(f"{proxy.url}/api/v1/query", params={"query": q}).raise_for_status(),
                          chosen))
        wall = time.monotonic() - started
    scale = len(queries) / len(chosen)
    return {"queries": len(queries), "sampled": len(chosen), "wall s": wall * scale,
            "Prom query s": (prometheus_query_seconds(proxy.upstream) - engine) * scale,
            "upstream s": proxy.upstream_s * scale, "decoded MB": proxy.decoded / 1e6 * scale}


def run_validate(tree: Path, proxy: CountingProxy, background: float) -> dict:
    """``gpumon validate`` of ``tree`` through the proxy: its figures and findings. ``background``
    is Prometheus' CPU seconds per second while nobody queries it (scraping, ingestion)."""
    proxy.reset()
    cpu = prometheus_cpu(proxy.upstream)
    engine = prometheus_query_seconds(proxy.upstream)
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", WRAPPER, "validate", str(SPEC), "--prom", proxy.url, "--format", "json",
                           "--timeout", "600"], capture_output=True, text=True, cwd=tree, timeout=3600,
                          env={**os.environ, "PYTHONPATH": str(tree)})
    wall = time.monotonic() - started
    cpu = prometheus_cpu(proxy.upstream) - cpu - background * wall
    engine = prometheus_query_seconds(proxy.upstream) - engine
    tail = proc.stderr.rsplit("MAXRSS", 1)
    if len(tail) < 2:
        raise SystemExit(f"validate of {tree} failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
    rss_kib, where = tail[1].split()[:2]
    if not where.startswith(str(tree)):
        raise SystemExit(f"validate of {tree} imported {where}: PYTHONPATH did not take")
    report = json.loads(proc.stdout)
    return {"exit": proc.returncode, "requests": proxy.requests, "wire MB": proxy.wire / 1e6,
            "decoded MB": proxy.decoded / 1e6, "peak RSS MB": int(rss_kib) / 1024, "wall s": wall,
            "upstream s": proxy.upstream_s, "Prom query s": engine, "Prom CPU s": cpu, "findings": report.get("findings", []), "log": list(proxy.log)}


def _masked(findings: list[dict]) -> set[tuple]:
    """(check, severity, subject, message) with times masked: both runs happen minutes apart."""
    def mask(text: str) -> str:
        text = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", "<time>", text)
        text = re.sub(r"\(\d+[hms][\dhms]* ago\)", "(<ago>)", text)
        return re.sub(r"\d+%", "<n>%", text)  # scrape shares move by a scrape between the runs
    return {(f.get("check"), f.get("severity"), f.get("subject"), mask(f.get("message", ""))) for f in findings}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpus", type=int, default=400, help="GPUs (8 per node, at least 128)")
    ap.add_argument("--minutes", type=float, default=3.0, help="minutes of scraping before validate runs")
    ap.add_argument("--scrape-interval", default="10s")
    ap.add_argument("--ref", default="main", help="the git ref to compare with")
    ap.add_argument("--also", help="a second git ref, measured the same way (its column and this/it ratio)")
    ap.add_argument("--prometheus", default=None, help="prometheus binary (default: as the tests find it)")
    ap.add_argument("--slowest", type=int, default=0, help="list the N slowest requests of each side")
    ap.add_argument("--naive-sample", type=int, default=2000, help="naive validator queries run, scaled (0: none)")
    ap.add_argument("--json", help="write the figures (without findings and request logs) here")
    args = ap.parse_args()
    nodes = max(16, args.gpus // 8)
    spec = load_spec(SPEC)
    seconds = args.minutes * 60
    fleet = Fleet(spec, nodes, lost_after=seconds / 2)
    other = Path(tempfile.mkdtemp(prefix="gpumon-validate-ref-"))
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "--quiet", str(other), args.ref], check=True)
    third = Path(tempfile.mkdtemp(prefix="gpumon-validate-also-")) if args.also else None
    if third:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "--quiet", str(third), args.also],
                       check=True)
    trees = [ROOT, other] + ([third] if third else [])
    try:
        with PathServer(fleet) as server, \
                FleetPrometheus(spec.exporter.job, fleet.nodes, server.port, args.scrape_interval,
                                args.prometheus) as prom:
            print(f"{nodes} nodes x 8 = {nodes * 8} GPUs, {len(fleet.metrics)} fields, scraped every "
                  f"{args.scrape_interval} for {args.minutes:g} min by {prom.url}", flush=True)
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                time.sleep(min(30.0, max(0.0, deadline - time.monotonic())))
                up = prom.query(f'count(up{{job="{spec.exporter.job}"}} == 1)')
                print(f"  {deadline - time.monotonic():5.0f} s left, targets up: "
                      f"{up[0]['value'][1] if up else 0}/{nodes}", flush=True)
            head = re.search(r"^prometheus_tsdb_head_series (\S+)$", httpx.get(prom.url + "/metrics", timeout=60).text, re.M)
            print(f"head series: {float(head.group(1)):.0f}", flush=True)
            proxy = CountingProxy(prom.url)
            try:
                # each side twice, alternating; the second run of each counts (the first of the
                # four pays for Prometheus' cold caches)
                idle = prometheus_cpu(prom.url)
                time.sleep(20)
                background = (prometheus_cpu(prom.url) - idle) / 20
                print(f"Prometheus CPU while only scraping: {background:.2f} s/s", flush=True)
                print("load average before the runs: %.2f %.2f %.2f" % os.getloadavg(), flush=True)
                runs = [run_validate(tree, proxy, background) for tree in trees + trees]
                print("load average after the runs: %.2f %.2f %.2f" % os.getloadavg(), flush=True)
                ours, theirs = runs[len(trees)], runs[len(trees) + 1]
                also = runs[-1] if third else None
                uuids = [f"GPU-{n:08d}-0000-0000-0000-{g:012d}" for n in range(nodes) for g in range(8)]
                naive = run_naive(spec, uuids, proxy, 4, args.naive_sample) if args.naive_sample else None
                print("first runs (cold): wall "
                      f"{runs[0]['wall s']:.1f} s / {runs[1]['wall s']:.1f} s, upstream "
                      f"{runs[0]['upstream s']:.1f} s / {runs[1]['upstream s']:.1f} s", flush=True)
            finally:
                proxy.close()
    finally:
        for tree in trees[1:]:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False)
    print(f"\n{'':14}{'this checkout':>15}{args.ref:>15}{'ratio':>9}" + (f"{args.also:>15}{'ratio':>9}" if also else ""))
    for key in ("requests", "wire MB", "decoded MB", "peak RSS MB", "wall s", "upstream s", "Prom query s",
                "Prom CPU s"):
        a, b = ours[key], theirs[key]
        c = also[key] if also else None
        print(f"{key:14}{a:15.2f}{b:15.2f}{(a / b if b else float('nan')):9.3f}"
              + (f"{c:15.2f}{(a / c if c else float('nan')):9.3f}" if also else ""))
    for key in ("upstream s", "Prom query s"):
        print(f"{'wall/' + key[:-2]:14}{ours['wall s'] / max(ours[key], 1e-9):15.2f}"
              f"{theirs['wall s'] / max(theirs[key], 1e-9):15.2f}")
    if naive:
        print(f"naive validator: {naive['queries']:,} queries ({naive['sampled']:,} run, scaled): wall "
              f"{naive['wall s']:.1f} s, Prometheus query {naive['Prom query s']:.1f} s, decoded {naive['decoded MB']:.1f} MB; "
              f"naive / this checkout: wall {naive['wall s'] / ours['wall s']:.1f}x, Prometheus query "
              f"{naive['Prom query s'] / max(ours['Prom query s'], 1e-9):.1f}x")
    if args.json:
        strip = ("findings", "log")
        Path(args.json).write_text(json.dumps({
            "gpus": nodes * 8, "ref": args.ref, "load": os.getloadavg(), "this": {k: v for k, v in ours.items() if k not in strip},
            args.ref: {k: v for k, v in theirs.items() if k not in strip}, "naive": naive,
            **({args.also: {k: v for k, v in also.items() if k not in strip},
                "findings identical (also)": _masked(ours["findings"]) == _masked(also["findings"])} if also else {}),
            "findings identical": _masked(ours["findings"]) == _masked(theirs["findings"])}, indent=1))
    print(f"exit codes: {ours['exit']} / {theirs['exit']}; findings: {len(ours['findings'])} / {len(theirs['findings'])}")
    a, b = _masked(ours["findings"]), _masked(theirs["findings"])
    print("findings identical (times masked):", "yes" if a == b else "NO")
    if also:
        print(f"findings identical to {args.also}:", "yes" if a == _masked(also["findings"]) else "NO")
    for tag, only in (("only here", a - b), (f"only on {args.ref}", b - a)):
        for f in sorted(only, key=str)[:10]:
            print(f"  {tag}: {f[0]} {f[1]} {f[2]}: {f[3][:200]}")
    print("checks that found something:", ", ".join(sorted({f[0] for f in a})))
    if args.slowest:
        from urllib.parse import unquote_plus
        for tag, side in (("this checkout", ours), (args.ref, theirs)):
            kinds: dict[str, list[float]] = {}
            sizes: dict[str, int] = {}
            for took, size, path in side["log"]:
                text = unquote_plus(path)
                kind = " ".join(re.sub(r"\(.*", "", text.split("query=", 1)[-1].split("&time=")[0], flags=re.S).split())[:40] \
                    if "query=" in text else text.split("?")[0]
                kinds.setdefault(kind, []).append(took)
                sizes[kind] = sizes.get(kind, 0) + size
            print(f"upstream seconds (and decoded MB) by request kind, {tag}:")
            for kind, times in sorted(kinds.items(), key=lambda kv: -sum(kv[1])):
                print(f"  {sum(times):7.2f} s {sizes[kind] / 1e6:7.3f} MB {len(times):4d} x  {kind}")
            print(f"slowest requests, {tag}:")
            for took, size, path in sorted(side["log"], reverse=True)[:args.slowest]:
                print(f"  {took:6.2f} s {size / 1e3:8.1f} kB  {unquote_plus(path)[:160]!r}")


if __name__ == "__main__":
    main()
