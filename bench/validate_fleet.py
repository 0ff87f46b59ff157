"""What ``gpumon validate`` costs against naive validators, at fleet size, on one Prometheus or on a
global view (Thanos Query over several clusters), all measured in one run.

For ``--gpus N --clusters K`` (N GPUs in all, 8 per node, split evenly over K clusters):

1. each cluster's nodes (distinct names and UUIDs across clusters) are rendered once as
   dcgm-exporter 4.x pages (``fleetlib.render_pages``), the benchmark's faults
   (``fleetlib.fault_set``) on the first cluster's first nodes, and served on one port per
   cluster (one scrape target per node);
2. ``--history`` seconds of the healthy fleet are backfilled into each cluster's TSDB through
   ``promtool tsdb create-blocks-from openmetrics`` in time slices of at most ``--chunk-mib``
   (``fleetserve.backfill_streamed``): no file grows with the fleet;
3. one Prometheus per cluster (no rules) scrapes its nodes every 15 s (the spec's interval); with
   K > 1 each has ``external_labels: {cluster: cK}``, a Thanos sidecar, and one Thanos Query
   fronts them all (``--backend thanos``: ``dedup``, ``partial_response``);
4. after ``--settle`` seconds of scraping, through a counting proxy: ``gpumon validate`` once cold
   (warming the server's caches), then measured twice (requests, bytes, upstream seconds, wall and
   peak RSS from ``/usr/bin/time``, the proxy's per-request log: the costliest requests print); with
   ``--also REV`` that revision too on the same server, in the order A B B A (``--rounds`` times), with both walls' ratio
   and whether their findings are identical; then the two naive validators, 4 in flight (as validate),
   a seeded sample of ``--naive-sample`` queries each, wall scaled to all of them:
   ``required``, one ``count(M{job, UUID})`` per *required* metric and GPU (the one users write
   first), and ``spec``, the same per spec'd metric. The ratios naive wall / validate wall of
   both print together, with ``uptime``'s load before and after.

Usage: .venv/bin/python bench/validate_fleet.py --gpus 8000 [--clusters 1] [--history 3600]
       [--chunk-mib 1024] [--prometheus PATH] [--thanos PATH] [--rev REV | --src DIR] [--also REV] [--json OUT]
Every server binds 127.0.0.1 and is stopped by PID at exit, on Ctrl-C and on SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpumon.localprom import free_port, stop_process, wait_ready  # noqa: E402
from gpumon.simpages import gpu_uuid  # noqa: E402
from gpumon.spec import load_spec  # noqa: E402

import fleetlib as fl  # noqa: E402
from fleet import Source, log, run_naive, run_validate, scalar  # noqa: E402
from fleetserve import CountingProxy, FleetPrometheus, FleetServer, backfill_streamed, promtool_for  # noqa: E402

THANOS = Path.home() / ".cache/gpumon-tools/thanos-0.42.4/bin/thanos"


def load() -> str:
    """``uptime``'s load averages (1, 5, 15 min)."""
    return "%.2f %.2f %.2f" % os.getloadavg()


def cluster_pages(nodes: int, clusters: int) -> list[tuple[dict, dict]]:
    """Per cluster, (healthy, live) {node: Page}: nodes ``gpu-node-1..N`` split in order (names,
    hence UUIDs, are distinct across clusters); the live pages of the first cluster carry the
    benchmark's faults on its first nodes (the history is healthy: a GPU gone now was seen before)."""
    pages = fl.render_pages(nodes)
    names = list(pages)
    per = -(-nodes // clusters)
    out = [{n: pages[n] for n in names[i * per:(i + 1) * per]} for i in range(clusters)]
    first = len(out[0])
    return [(out[0], fl.render_pages(first, fl.fault_set(first)))] + [(c, c) for c in out[1:]]


class Sidecar:
    """``thanos sidecar`` in front of one Prometheus (StoreAPI over remote read), stopped by PID."""

    def __init__(self, thanos: str, prom: FleetPrometheus, folder: Path):
        self.grpc, http = f"127.0.0.1:{free_port()}", free_port()
        self.log = open(folder / f"sidecar-{prom.port}.log", "wb")
        self.proc = subprocess.Popen([thanos, "sidecar", f"--prometheus.url={prom.url}",
                                      f"--tsdb.path={Path(prom.tmp.name) / 'data'}", f"--grpc-address={self.grpc}",
                                      f"--http-address=127.0.0.1:{http}"], stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        wait_ready(self.proc, f"http://127.0.0.1:{http}/-/ready", 120, "sidecar", lambda: "")

    def stop(self) -> None:
        stop_process(self.proc)
        self.log.close()


class Query:
    """``thanos query`` over ``endpoints`` (``--query.replica-label=replica``), stopped by PID."""

    def __init__(self, thanos: str, endpoints: list[str], folder: Path):
        http = free_port()
        self.url = f"http://127.0.0.1:{http}"
        self.log = open(folder / "query.log", "wb")
        self.proc = subprocess.Popen([thanos, "query", f"--http-address=127.0.0.1:{http}",
                                      f"--grpc-address=127.0.0.1:{free_port()}", "--query.replica-label=replica",
                                      *[f"--endpoint={e}" for e in endpoints]], stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        wait_ready(self.proc, f"{self.url}/-/ready", 120, "query", lambda: "")

    def stop(self) -> None:
        stop_process(self.proc)
        self.log.close()


def start_cluster(stack: ExitStack, i: int, healthy: dict, pages: dict, args, spec, work: Path) -> FleetPrometheus:
    """One cluster: its page server (``pages``) and Prometheus with the streamed backfill of the
    ``healthy`` pages; returns the server."""
    job, interval = spec.exporter.job, spec.exporter.scrape_interval
    gen = stack.enter_context(FleetServer(pages))
    scrape = fl.scrape_config(job, gen.address, pages, interval, spec.exporter.scrape_timeout)
    figures = {}

    def backfill(folder: Path) -> None:
        if args.history <= 0:
            return
        end = time.time() - interval
        figures.update(backfill_streamed(promtool_for(args.prometheus),
                                         lambda out, a, b: fl.write_history(out, healthy, job, a, b, interval),
                                         end - args.history, end, interval, folder / "data", work,
                                         args.chunk_mib << 20))

    prom = FleetPrometheus([scrape], [], "1m", args.prometheus, backfill=backfill)
    if args.clusters > 1:
        prom.external_labels = {"cluster": f"c{i}", "replica": "0"}
    stack.callback(prom.stop)
    prom.start()
    prom.backfill_figures = figures
    log(f"cluster {i}: {len(pages)} nodes, Prometheus {prom.url} (pid {prom.proc.pid}); backfill {figures} in "
        f"{prom.backfill_seconds:.0f}s")
    return prom


def measure(args, spec, sources: list[Source], url: str, backend: str, uuids: list[str]) -> dict:
    """validate of each revision in ``sources`` twice cold (warming the server's caches), then
    measured twice in the order A B B A (the lookback's data grows during the run: the mean of a
    revision's two runs cancels a steady drift), then both naive validators; one proxy."""
    out: dict = {"load before": load()}
    with CountingProxy(url) as proxy:
        extra = ["--backend", backend] if backend != "prometheus" else []

        def once(src: Source) -> dict:
            return run_validate(src, src.path / "gpumon.yaml", proxy, args.concurrency, extra)
        for src in sources:
            first = once(src)
            log(f"validate {src.label} (cold): {first['wall']:.1f}s, exit {first['exit']}, {first['findings']} findings "
                f"{first['stderr']}")
        runs: dict[str, list[dict]] = {src.label: [] for src in sources}
        for src in (sources + sources[::-1]) * args.rounds:
            runs[src.label].append(once(src))
            log(f"validate {src.label}: {runs[src.label][-1]['wall']:.2f}s (load {load()})")
        out["validate runs"] = runs
        out["validate"] = runs[sources[0].label][-1]
        out["load validate"] = load()
        for kind, queries in (("required", fl.naive_required_queries(spec, uuids)), ("spec", fl.naive_queries(spec, uuids))):
            out[f"naive {kind}"] = run_naive(queries, proxy, args.concurrency, args.naive_sample)
            log(f"naive {kind}: {out[f'naive {kind}']['wall']:.0f}s scaled")
    out["load after"] = load()
    return out


def costliest(runs: list[dict], top: int = 6) -> list[str]:
    """The ``top`` requests by upstream seconds (the server's time, seen from the proxy) of a
    revision's last measured run, and the summed seconds per request kind (the query's first
    function or selector) of all of them."""
    kinds: dict[str, float] = {}
    for took, _, _, what in runs[-1]["log"]:
        path, _, rest = what.partition("?")
        text = urllib.parse.unquote_plus(rest.split(" ", 1)[-1] if " " in rest else rest)
        kind = text.partition("query=")[2][:48] or path
        kinds[kind] = kinds.get(kind, 0.0) + took
    rows = sorted(runs[-1]["log"], reverse=True)[:top]
    out = [f"{took:6.2f}s @{at:6.2f}s {urllib.parse.unquote_plus(what)[:140]!r}" for took, at, _, what in rows]
    return out + [f"{sec:6.2f}s summed  {kind!r}" for kind, sec in sorted(kinds.items(), key=lambda kv: -kv[1])[:top]]


def report(res: dict) -> None:
    print(f"\n=== {res['gpus']:,} GPUs in {res['clusters']} cluster(s) ({res['view']}); history {res['history']:g}s, "
          f"backfill {res['backfill']}; load before / during / after: {res['load before']} / "
          f"{res['load validate']} / {res['load after']}")
    runs = res["validate runs"]
    for label, mine in runs.items():
        v, wall = mine[-1], sum(r["wall"] for r in mine) / len(mine)
        walls = " / ".join(f"{r['wall']:.2f}" for r in mine)
        print(f"-- validate {label}: exit {v['exit']}, {v['findings']} findings, {v['requests']} requests, "
              f"{v['bytes'] / 1e6:.2f} MB (largest {v['largest'] / 1e6:.2f} MB), peak RSS {v['rss'] / 2**20:.1f} MiB, "
              f"wall {walls}s (mean {wall:.2f}s), "
              f"upstream {v['prom_seconds']:.1f}s summed")
        for kind in ("required", "spec"):
            n = res[f"naive {kind}"]
            print(f"   naive {kind:8}: {n['queries']:,} queries ({n['sampled']:,} run), wall {n['wall']:.1f}s scaled, "
                  f"{n['bytes'] / 1e6:.2f} MB; naive / validate wall = {fl.ratio(n['wall'], wall):.1f}x")
        for line in costliest(mine):
            print("   " + line)
        if v["stderr"]:
            print("   stderr: " + v["stderr"])
    if len(runs) == 2:
        (a, ra), (b, rb) = runs.items()
        mean = [sum(r["wall"] for r in rs) / len(rs) for rs in (ra, rb)]
        print(f"-- wall {a} / {b} = {fl.ratio(mean[0], mean[1]):.2f}x ({mean[0]:.2f}s / {mean[1]:.2f}s, same server, ABBA)")
        same = all(r["digest"] == ra[0]["digest"] for r in ra + rb)
        print(f"-- findings (check, severity, subject, labels) of every measured run: {'identical' if same else 'DIFFER'}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpus", type=int, default=1000, help="GPUs in all (8 per node) [1000]")
    ap.add_argument("--clusters", type=int, default=1, help="clusters behind Thanos Query (1: Prometheus alone) [1]")
    ap.add_argument("--history", type=float, default=3600, help="seconds of history backfilled per cluster [3600]")
    ap.add_argument("--chunk-mib", type=int, default=1024, help="largest backfill slice, MiB [1024]")
    ap.add_argument("--settle", type=float, default=60, help="seconds of scraping before validate [60]")
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=1, help="measured runs in the order A B B A, this many times [1]")
    ap.add_argument("--naive-sample", type=int, default=2000, help="naive queries run per kind, scaled [2000]")
    ap.add_argument("--prometheus", default=os.environ.get("GPUMON_PROMETHEUS") or "/usr/bin/prometheus")
    ap.add_argument("--thanos", default=str(THANOS))
    ap.add_argument("--serve", type=float, default=0, help="keep the servers up this many seconds after (debugging)")
    code = ap.add_mutually_exclusive_group()
    code.add_argument("--rev")
    code.add_argument("--src")
    ap.add_argument("--also", metavar="REV", help="also measure validate of this revision on the same server "
                                                  "(e.g. main), side by side, ABBA order")
    ap.add_argument("--json")
    args = ap.parse_args(argv)

    def on_term(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_term)
    spec = load_spec(ROOT / "gpumon.yaml")
    src = Source(args.rev, args.src)
    sources = [src] + ([Source(args.also, None)] if args.also else [])
    nodes = max(1, args.gpus // fl.GPUS_PER_NODE)
    res = {"gpus": nodes * fl.GPUS_PER_NODE, "clusters": args.clusters, "history": args.history, "revision": src.label}
    try:
        with tempfile.TemporaryDirectory(prefix="gpumon-vfleet-") as tmp, ExitStack() as stack:
            work = Path(tmp)
            log(f"gpumon {src.label}: rendering {nodes} nodes in {args.clusters} cluster(s); load {load()}")
            proms = [start_cluster(stack, i, healthy, live, args, spec, work)
                     for i, (healthy, live) in enumerate(cluster_pages(nodes, args.clusters))]
            res["backfill"] = [p.backfill_figures for p in proms]
            for prom in proms:
                want = len(prom.scrape_configs[0]["static_configs"])
                prom.wait_for(lambda: scalar(prom.url, f'count(up{{job="{spec.exporter.job}"}})') >= want, 600, 2)
            url, backend = proms[0].url, "prometheus"
            if args.clusters > 1:
                sidecars = [Sidecar(args.thanos, p, work) for p in proms]
                for s in sidecars:
                    stack.callback(s.stop)
                query = Query(args.thanos, [s.grpc for s in sidecars], work)
                stack.callback(query.stop)
                url, backend = query.url, "thanos"
            res["view"] = "Thanos Query over sidecars" if args.clusters > 1 else "one Prometheus"
            log(f"settling {args.settle:g}s; validate against {url}")
            time.sleep(args.settle)
            uuids = [gpu_uuid(f"gpu-node-{n + 1}", g) for n in range(nodes) for g in range(fl.GPUS_PER_NODE)]
            res.update(measure(args, spec, sources, url, backend, uuids))
            res["prometheus rss"] = [p.rss_bytes() for p in proms]
            report(res)
            if args.serve:
                log(f"serving {url} for {args.serve:g}s")
                time.sleep(args.serve)
    except KeyboardInterrupt:
        log("interrupted: servers stopped")
        return 130
    finally:
        for one in sources:
            one.close()
        if args.json and "validate" in res:
            Path(args.json).write_text(json.dumps(res, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
