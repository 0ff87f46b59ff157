"""Fleet-scale cost of gpumon (issue 16): rule evaluation against the floor, series added by the
recording rules, and ``gpumon validate`` against a naive validator, measured side by side in one
real Prometheus with an hour of history.

For each size (``--gpus 1000,8000``):

1. the fleet generator pre-renders N/8 nodes x 8 GPUs of dcgm-exporter 4.x pages
   (``gpumon.simulate.Fleet``: the exporter's default fields and label set) and serves them on
   one port, one scrape target per node (``/metrics/<node>``, explicit ``instance`` label);
2. ``--history`` seconds of those series (every scrape interval) are backfilled with
   ``promtool tsdb create-blocks-from openmetrics`` into the TSDB before Prometheus starts, streamed
   in time slices of at most ``--chunk-mib`` (``fleetserve.backfill_streamed``);
   recorded series are not backfilled (they build up during the warm-up and the windows, see
   docs/performance.md);
3. Prometheus scrapes every target every 15 s (the spec's interval) and evaluates, side by side,
   gpumon's rendered rule groups (global ``--eval-interval``, 30 s) and the two floor groups
   (``floor.required``, ``floor.spec``: one ``group by (job, identity)`` per metric, every 15 s);
4. phase ``healthy``: after ``--warmup`` seconds, ``prometheus_rule_group_last_duration_seconds``
   and ``..._interval_seconds`` are sampled from Prometheus' ``/metrics`` for ``--window``
   seconds; busy seconds per minute per group = mean duration / interval x 60; series counted;
5. phase ``faults``: the pages are swapped for the same fleet with the benchmark's faults
   (``bench/fleetlib.fault_set``) and step 4 is repeated;
6. ``gpumon validate`` (of the measured revision) runs against the faulted fleet through a counting
   proxy (requests, bytes, upstream seconds), under ``/usr/bin/time`` (peak RSS, wall); then the
   naive validator (``count(M{UUID="..."})`` per spec'd metric x GPU, same concurrency, at most
   ``--naive-sample`` queries, wall scaled to all of them).

The code measured comes from ``--rev REV`` (``git worktree add`` into a temporary folder), or
``--src DIR``, else this checkout; ``--rules FILE`` loads a rule file instead of the rendered one.
Every server binds 127.0.0.1 and is stopped at exit, on Ctrl-C and on SIGTERM.

Usage: .venv/bin/python bench/fleet.py --gpus 1000,8000 [--window 180] [--rev REV | --src DIR]
       [--rules FILE] [--prometheus PATH] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

import httpx
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpumon.simpages import gpu_uuid  # noqa: E402
from gpumon.durations import parse_duration  # noqa: E402
from gpumon.spec import load_spec  # noqa: E402

import fleetlib as fl  # noqa: E402
from fleetserve import CountingProxy, FleetPrometheus, FleetServer, backfill_streamed, promtool_for  # noqa: E402


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------ code under test
class Source:
    """The gpumon code measured: a folder with ``generator/gpumon/`` and ``gpumon.yaml``; for ``--rev``
    a detached ``git worktree`` in a temporary folder, removed at exit."""

    def __init__(self, rev: str | None, src: str | None):
        self.rev, self.tmp = rev, None
        if rev:
            self.tmp = tempfile.mkdtemp(prefix="gpumon-fleet-rev-")
            subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", self.tmp, rev], check=True,
                           capture_output=True)
            self.path = Path(self.tmp)
        else:
            self.path = Path(src).resolve() if src else ROOT
        self.commit = subprocess.run(["git", "-C", str(self.path), "rev-parse", "--short", "HEAD"],
                                     capture_output=True, text=True).stdout.strip() or "?"
        dirty = subprocess.run(["git", "-C", str(self.path), "status", "--porcelain", "--", "generator/gpumon", "gpumon.yaml"],
                               capture_output=True, text=True).stdout.strip()
        self.label = self.commit + ("+dirty" if dirty else "")
        self.pycache = tempfile.mkdtemp(prefix="gpumon-fleet-pyc-")

    def env(self) -> dict:
        """gpumon runs as installed: its bytecode compiled once and cached (pip compiles on install;
        without the cache every run compiles every module, 0.15 s of validate's start), in a
        folder of this run's, not in the measured tree."""
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        return {**env, "PYTHONPATH": str(self.path / "generator"), "PYTHONPYCACHEPREFIX": self.pycache}

    def gpumon(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "gpumon.cli", *args]

    def render(self, out: Path) -> Path:
        """Render the revision's bundled spec with the revision's code; returns the rule file."""
        subprocess.run(self.gpumon("render", str(self.path / "gpumon.yaml"), "-o", str(out)), cwd=self.path,
                       env=self.env(), check=True, capture_output=True)
        return out / "rules" / "gpumon.rules.yaml"

    def close(self) -> None:
        shutil.rmtree(self.pycache, ignore_errors=True)
        if self.tmp:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", self.tmp], capture_output=True)


# ------------------------------------------------------------------ measuring
def rule_metrics(prom_url: str) -> dict[str, dict[str, float]]:
    return fl.parse_rule_metrics(httpx.get(f"{prom_url}/metrics", timeout=30).text)


def sample_groups(prom_url: str, seconds: float, step: float = 2.0, rules_every: float = 30.0):
    """Poll Prometheus' ``/metrics`` every ``step`` s for ``seconds`` and fold each group in; every
    ``rules_every`` s also snapshot each rule's last evaluation time (``/api/v1/rules``).
    Returns ({group: GroupSamples}, [rule-family snapshots])."""
    samples: dict[str, fl.GroupSamples] = {}
    snapshots: list = []
    deadline = time.monotonic() + seconds
    next_rules = time.monotonic() + rules_every / 2
    while True:
        for name, metrics in rule_metrics(prom_url).items():
            samples.setdefault(name, fl.GroupSamples()).add(metrics)
        if time.monotonic() >= next_rules:
            groups = httpx.get(f"{prom_url}/api/v1/rules", timeout=60).json()["data"]["groups"]
            snapshots.append(fl.rule_families(groups))
            next_rules += rules_every
        if time.monotonic() >= deadline:
            return samples, snapshots
        time.sleep(step)


def query(prom_url: str, expr: str) -> list[dict]:
    resp = httpx.get(f"{prom_url}/api/v1/query", params={"query": expr}, timeout=300)
    resp.raise_for_status()
    return resp.json()["data"]["result"]


def scalar(prom_url: str, expr: str) -> int:
    res = query(prom_url, expr)
    return int(float(res[0]["value"][1])) if res else 0


def count_series(prom_url: str, job: str, gpumon_records: list[str], floor_records: list[str]) -> dict:
    """Series now: raw ``DCGM_*`` of the job, per gpumon recording rule name, the floors', ALERTS,
    and the head's total (``/api/v1/status/tsdb``)."""
    per_record = {r["metric"]["__name__"]: int(float(r["value"][1])) for r in
                  query(prom_url, f'count by (__name__) ({{__name__=~"{fl.name_regex(gpumon_records)}"}})')}
    tsdb = httpx.get(f"{prom_url}/api/v1/status/tsdb", timeout=60).json()["data"]
    return {"raw": scalar(prom_url, f'count({{__name__=~"DCGM_.+",job="{job}"}})'),
            "gpumon": sum(per_record.values()), "per_record": dict(sorted(per_record.items(), key=lambda kv: -kv[1])),
            "floor": scalar(prom_url, f'count({{__name__=~"{fl.name_regex(floor_records)}"}})'),
            "alerts": scalar(prom_url, 'count({__name__=~"ALERTS|ALERTS_FOR_STATE"})'),
            "head": tsdb.get("headStats", {}).get("numSeries", 0)}


def phase(prom: FleetPrometheus, name: str, window: float, job: str, gpumon_records, floor_records) -> dict:
    log(f"phase {name}: sampling rule groups for {window:g}s")
    samples, snapshots = sample_groups(prom.url, window)
    figures = fl.eval_figures(samples)
    series = count_series(prom.url, job, gpumon_records, floor_records)
    return {"figures": figures, "series": series, "prometheus_rss": prom.rss_bytes(),
            "costliest": fl.costliest(snapshots)}


def query_timed(prom_url: str, this: list[dict], also: list[dict], rounds: int,
                floor: list[dict] = ()) -> dict[str, tuple[float, float]]:
    """Each rule of ``this`` and of its renamed copy ``also`` (:func:`fleetlib.prefixed`, loaded in
    the same server) run as an instant query, one at a time, the two copies' queries alternating,
    ``rounds`` times; Prometheus' own ``evalTotalTime`` (``stats=all``) of each. Returns {group
    (this copy's name): (this, also)} of the medians summed over the group's rules, seconds. One
    query at a time with the copies interleaved, so neither copy's groups meet the other's
    evaluations more often (the busy seconds of the rule groups themselves depend on which groups
    happen to evaluate at the same moment on the same cores). The ``floor`` groups' rules are timed
    in the same rounds, under this copy's side (their names start with ``floor.``)."""
    sides = [[(g["name"].removeprefix(fl.ALSO_PREFIX), i, r["expr"]) for g in groups for i, r in enumerate(g["rules"])]
             for groups in (list(this) + list(floor), also)]
    client = httpx.Client(timeout=600)
    times: dict[tuple[int, str, int], list[float]] = {}
    for _ in range(rounds):
        for k in range(max(map(len, sides))):
            for side, queries in enumerate(sides):
                if k < len(queries):
                    group, i, expr = queries[k]
                    ans = client.get(f"{prom_url}/api/v1/query", params={"query": expr, "stats": "all"}).json()
                    if ans.get("status") != "success":  # a failed query is not a cheap one
                        raise RuntimeError(f"{group}: {ans.get('error')}")
                    took = ans["data"]["stats"]["timings"]["evalTotalTime"]
                    times.setdefault((side, group, i), []).append(float(took))
    client.close()
    out: dict[str, tuple[float, float]] = {}
    for (side, group, _), seen in times.items():
        a, b = out.get(group, (0.0, 0.0))
        med = statistics.median(seen)
        out[group] = (a + med, b) if side == 0 else (a, b + med)
    return out


def wait_groups_evaluated(prom_url: str, groups: list[str], timeout: float) -> None:
    """Wait until every group has finished one evaluation (a first evaluation of gpumon's groups
    at 8k GPUs takes minutes)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = rule_metrics(prom_url)
        if all(m.get(g, {}).get("last_evaluation_timestamp_seconds", 0) > 0 for g in groups):
            return
        time.sleep(2)
    log(f"warning: not every group evaluated within {timeout:g}s")


def run_validate(src: Source, spec_path: Path, proxy: CountingProxy, concurrency: int, extra: list[str] = ()) -> dict:
    """``gpumon validate --prom PROXY`` (and ``extra`` options) of the measured revision under
    ``/usr/bin/time``: exit code, wall, peak RSS and the proxy's traffic."""
    proxy.reset()
    cmd = ["/usr/bin/time", "-f", "GPUMON_TIME %M %e", *src.gpumon("validate", str(spec_path), "--prom", proxy.url,
                                                                   "--concurrency", str(concurrency), "--timeout", "600",
                                                                   "--deadline", "3600", "--max-response-mib", "1024",
                                                                   "--format", "json", *extra)]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=src.path, env=src.env(), capture_output=True, text=True)
    wall = time.perf_counter() - start
    traffic = proxy.reset()
    rss_kib = 0
    for line in proc.stderr.splitlines():
        if line.startswith("GPUMON_TIME "):
            rss_kib = int(line.split()[1])
    findings, digest = None, None
    try:
        listed = json.loads(proc.stdout).get("findings", [])
        findings = len(listed)
        # what a finding is, without its message (which may carry times such as "5m ago")
        digest = sorted(json.dumps([f.get(k) for k in ("check", "severity", "subject", "labels")], sort_keys=True)
                        for f in listed)
    except (ValueError, AttributeError):
        pass
    return {"exit": proc.returncode, "wall": wall, "rss": rss_kib * 1024, "requests": traffic.requests,
            "bytes": traffic.bytes, "largest": traffic.largest, "prom_seconds": traffic.upstream_seconds,
            "statuses": traffic.statuses, "findings": findings, "digest": digest, "log": traffic.log,
            "stderr": proc.stderr[-800:] if proc.returncode not in (0, 1) else ""}


def run_naive(queries: list[str], proxy: CountingProxy, concurrency: int, sample: int) -> dict:
    """A naive validator (``fl.naive_queries``: one instant ``count(M{job, UUID})`` per spec'd
    metric x GPU; ``fl.naive_required_queries``: per required metric x GPU) with ``concurrency``
    in flight; at most ``sample`` of them (a seeded random sample), wall and bytes scaled to the
    full set."""
    total = len(queries)
    chosen = random.Random(16).sample(queries, sample) if sample < total else queries
    proxy.reset()
    client = httpx.Client(timeout=120, limits=httpx.Limits(max_connections=concurrency))

    def one(q: str) -> None:
        client.get(f"{proxy.url}/api/v1/query", params={"query": q})

    start = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(one, chosen))
    wall = time.perf_counter() - start
    client.close()
    traffic = proxy.reset()
    scale = total / len(chosen)
    return {"queries": total, "sampled": len(chosen), "wall_sampled": wall, "wall": wall * scale,
            "bytes": int(traffic.bytes * scale), "prom_seconds": traffic.upstream_seconds * scale}


# ------------------------------------------------------------------ one size
def run_size(gpus: int, args, src: Source, rules_file: Path, spec, work: Path) -> dict:
    nodes = max(1, gpus // fl.GPUS_PER_NODE)
    job, interval = spec.exporter.job, spec.exporter.scrape_interval
    log(f"{nodes * fl.GPUS_PER_NODE} GPUs ({nodes} nodes): rendering pages")
    healthy = fl.render_pages(nodes)
    faults = fl.fault_set(nodes, args.fault_copies)
    faulted = fl.render_pages(nodes, faults)
    floor = fl.floor_groups(spec, interval)
    floor_file = work / f"floor-{gpus}.rules.yaml"
    floor_file.write_text(yaml.safe_dump({"groups": floor}, sort_keys=False))
    gpumon_groups = yaml.safe_load(rules_file.read_text())["groups"]
    gpumon_records, floor_records = fl.recorded_names(gpumon_groups), fl.recorded_names(floor)
    rule_files = [rules_file, floor_file]
    also_groups = []
    if args.also_rules:
        # the other rule file beside this one, renamed: both read the same series under one load
        also_groups = fl.prefixed(yaml.safe_load(Path(args.also_rules).read_text())["groups"])
        also_file = work / f"also-{gpus}.rules.yaml"
        also_file.write_text(yaml.safe_dump({"groups": also_groups}, sort_keys=False))
        rule_files.append(also_file)
    result: dict = {"gpus": nodes * fl.GPUS_PER_NODE, "nodes": nodes, "faults": len(faults),
                    "page_bytes": sum(len(p.body) for p in healthy.values()),
                    "groups": [g["name"] for g in gpumon_groups], "also_rules": args.also_rules}

    def backfill(folder: Path) -> None:
        if args.history <= 0:
            return
        end = time.time() - interval
        log(f"streaming {args.history:g}s of history for {nodes} nodes through promtool in slices of "
            f"<= {args.chunk_mib} MiB")
        done = backfill_streamed(promtool_for(args.prometheus),
                                 lambda out, first, last: fl.write_history(out, healthy, job, first, last, interval),
                                 end - args.history, end, interval, folder / "data", folder, args.chunk_mib << 20)
        result["history_samples"] = done["samples"]
        result["history_files"], result["history_largest_file"] = done["files"], done["largest file bytes"]
        log(f"backfilled {done['samples']:,} samples from {done['files']} files (largest "
            f"{done['largest file bytes'] / 2**20:,.0f} MiB)")

    with ExitStack() as stack:
        gen = stack.enter_context(FleetServer(healthy))
        scrape = fl.scrape_config(job, gen.address, healthy, interval, spec.exporter.scrape_timeout)
        prom = FleetPrometheus([scrape], rule_files, f"{args.eval_interval:g}s", args.prometheus,
                               backfill=backfill)
        stack.callback(prom.stop)
        prom.start()
        result["backfill_seconds"] = prom.backfill_seconds
        log(f"Prometheus {prom.url} ready (pid {prom.proc.pid}); waiting for targets and first evaluations")
        prom.wait_for(lambda: scalar(prom.url, f'count(up{{job="{job}"}} == 1)') >= nodes, 300, 2)
        wait_groups_evaluated(prom.url, [g["name"] for g in gpumon_groups + floor + also_groups], 900)
        log(f"warm-up {args.warmup:g}s")
        time.sleep(args.warmup)
        result["healthy"] = phase(prom, "healthy", args.window, job, gpumon_records, floor_records)
        gen.pages = faulted
        # the faults drop series: wait until a scrape has served them (a loaded machine delays
        # scrapes past any fixed sleep), then two evaluations of every group on them
        raw = f'count({{__name__=~"DCGM_.+",job="{job}"}})'
        seen = prom.wait_for(lambda: scalar(prom.url, raw) < result["healthy"]["series"]["raw"],
                             20 * max(interval, args.eval_interval), 1)
        log(f"faults injected ({len(faults)}), {'scraped' if seen else 'NOT seen in a scrape'}; "
            f"settling {2 * max(interval, args.eval_interval):g}s")
        time.sleep(2 * max(interval, args.eval_interval))
        result["faults_phase"] = phase(prom, "faults", args.window, job, gpumon_records, floor_records)
        if also_groups and args.query_rounds:
            log(f"every rule of both files as an instant query, one at a time, {args.query_rounds} rounds")
            timed = query_timed(prom.url, gpumon_groups, also_groups, args.query_rounds, floor)
            every = {g["name"]: parse_duration(g["interval"]) if g.get("interval") else args.eval_interval
                     for g in gpumon_groups + floor
                     + [{**g, "name": g["name"].removeprefix(fl.ALSO_PREFIX)} for g in also_groups]}
            result["query_timed"] = {k: (a, b, every.get(k, args.eval_interval)) for k, (a, b) in timed.items()}
        if not args.skip_validate:
            proxy = stack.enter_context(CountingProxy(prom.url))
            log("gpumon validate through the counting proxy")
            result["validate"] = run_validate(src, src.path / "gpumon.yaml", proxy, args.concurrency)
            log("naive validator")
            uuids = [gpu_uuid(f"gpu-node-{n + 1}", g) for n in range(nodes) for g in range(fl.GPUS_PER_NODE)]
            result["naive"] = run_naive(fl.naive_queries(spec, uuids), proxy, args.concurrency, args.naive_sample)
        result["prometheus_rss_end"] = prom.rss_bytes()
    return result


# ------------------------------------------------------------------ report
def mib(n: float) -> str:
    return f"{n / 2**20:,.1f} MiB"


def report(res: dict, out=sys.stdout) -> None:
    """Print one size's figures (ratios from this one run)."""
    p = lambda *a: print(*a, file=out)  # noqa: E731
    p(f"\n=== {res['gpus']:,} GPUs ({res['nodes']} nodes x 8), {res['faults']} faults in phase 'faults'; "
      f"pages {mib(res['page_bytes'])} per scrape round; backfill {res.get('history_samples', 0):,} samples "
      f"in {res.get('backfill_seconds', 0):.0f}s")
    for key in ("healthy", "faults_phase"):
        ph = res[key]
        figs = ph["figures"]
        p(f"-- phase {key.replace('_phase', '')}: rule groups (busy s/min = median eval s / interval s x 60)")
        p(f"   {'group':24} {'rules':>5} {'interval':>8} {'evals':>5} {'median s':>9} {'mean s':>8} {'s/min':>8} {'missed':>6}")
        for f in sorted(figs.values(), key=lambda f: (f.name.startswith(fl.FLOOR_PREFIX), -f.per_minute)):
            p(f"   {f.name:24} {f.rules:5} {f.interval:8g} {f.evaluations:5} {f.median:9.3f} {f.mean:8.3f} "
              f"{f.per_minute:8.2f} {f.missed:6}")
        total = fl.total_per_minute(figs, False)
        for floor in ("floor.required", "floor.spec"):
            fv = fl.total_per_minute(figs, True, floor)
            p(f"   gpumon total {total:.2f} s/min vs {floor} {fv:.3f} s/min: ratio {fl.ratio(total, fv):.1f}x")
        if res.get("also_rules"):
            also = fl.also_per_minute(figs)
            p(f"   side by side: this {total:.2f} s/min vs --also-rules {res['also_rules']} {also:.2f} s/min: "
              f"this / also = {fl.ratio(total, also):.2f}x; also / floor.spec = "
              f"{fl.ratio(also, fl.total_per_minute(figs, True, 'floor.spec')):.1f}x")
        missed = sum(f.missed for n, f in figs.items() if not n.startswith(fl.FLOOR_PREFIX))
        p(f"   gpumon evaluations missed in the window: {missed}")
        left_out = fl.unmeasured(figs, res.get("groups", []))
        if left_out:
            p(f"   WARNING: no evaluation of {', '.join(left_out)} finished in the window: the gpumon total leaves "
              "them out; sample for at least two intervals of the slowest group (--window)")
        if any(f.missed or f.median > f.interval for f in figs.values()):
            p("   WARNING: Prometheus is saturated (a group ran longer than its interval or skipped evaluations): "
              "every group waits for the same cores, the floor's seconds are inflated by gpumon's load and the "
              "ratios understate gpumon's cost")
        s = ph["series"]
        p(f"   series: raw DCGM_* {s['raw']:,}; gpumon recorded {s['gpumon']:,} = {fl.ratio(s['gpumon'], s['raw']):.3f}x raw; "
          f"floors {s['floor']:,}; ALERTS* {s['alerts']:,}; head {s['head']:,}; Prometheus RSS {mib(ph['prometheus_rss'])}")
        p("   largest recorded: " + ", ".join(f"{k} {v:,}" for k, v in list(s["per_record"].items())[:4]))
        if ph.get("costliest"):
            p("   costliest gpumon rules (all rules of one name; median s per evaluation, s/min):")
            for group, name, med, per_min in ph["costliest"]:
                p(f"     {per_min:6.2f} s/min {med:8.3f} s  {group}  {name}")
    if res.get("query_timed"):
        qt = res["query_timed"]
        p("-- each rule as an instant query, one at a time, the two files alternating (median evalTotalTime, "
          "summed per group; faults phase)")
        floors = {k: v[0] * 60 / v[2] for k, v in qt.items() if k.startswith(fl.FLOOR_PREFIX)}
        qt = {k: v for k, v in qt.items() if not k.startswith(fl.FLOOR_PREFIX)}
        for group, (a, b, every) in sorted(qt.items(), key=lambda kv: -kv[1][1] * 60 / kv[1][2]):
            p(f"   {group:24} every {every:4g}s: this {a:7.3f} s ({a * 60 / every:6.2f} s/min)   also {b:7.3f} s "
              f"({b * 60 / every:6.2f} s/min)   this / also {fl.ratio(a, b):5.2f}x")
        a, b = (sum(v[i] * 60 / v[2] for v in qt.values()) for i in (0, 1))
        p(f"   all groups, per minute at their intervals: this {a:.2f} s/min   also {b:.2f} s/min   "
          f"this / also {fl.ratio(a, b):.2f}x")
        for name, fv in sorted(floors.items()):
            p(f"   {name} {fv:.3f} s/min: this / {name} {fl.ratio(a, fv):.2f}x, also / {name} {fl.ratio(b, fv):.2f}x")
    if "validate" in res:
        v, n = res["validate"], res["naive"]
        p(f"-- validate (faults phase): exit {v['exit']}, {v['findings']} findings, {v['requests']} requests, "
          f"{mib(v['bytes'])} (largest answer {mib(v['largest'])}), peak RSS {mib(v['rss'])}, wall {v['wall']:.1f}s, "
          f"Prometheus {v['prom_seconds']:.1f}s summed over requests (wall / that = {fl.ratio(v['wall'], v['prom_seconds']):.2f})")
        if v["stderr"]:
            p("   validate stderr: " + v["stderr"].replace("\n", "\n   "))
        p(f"   naive: {n['queries']:,} queries ({n['sampled']:,} run, scaled), wall {n['wall']:.1f}s, {mib(n['bytes'])}, "
          f"Prometheus {n['prom_seconds']:.1f}s; naive / gpumon wall = {fl.ratio(n['wall'], v['wall']):.2f}x, "
          f"Prometheus seconds = {fl.ratio(n['prom_seconds'], v['prom_seconds']):.2f}x (the naive wall includes the "
          "Python client's and the proxy's cost per request, which dominates at tens of thousands of requests)")


def growth(results: list[dict], out=sys.stdout) -> None:
    """Cost per 1,000 GPUs at each size, and the growth from the smallest size to the largest."""
    if len(results) < 2:
        return
    print("\n=== growth (per 1,000 GPUs; healthy phase)", file=out)
    for r in results:
        figs = r["healthy"]["figures"]
        k = r["gpus"] / 1000
        line = (f"   {r['gpus']:>6,} GPUs: gpumon {fl.total_per_minute(figs, False) / k:.2f} s/min, "
                f"floor.spec {fl.total_per_minute(figs, True, 'floor.spec') / k:.3f} s/min, "
                f"recorded series {r['healthy']['series']['gpumon'] / k:,.0f}")
        if "validate" in r:
            line += f", validate {mib(r['validate']['bytes'] / k)} {r['validate']['wall'] / k:.1f}s"
        print(line, file=out)


def to_json(results: list[dict]) -> list[dict]:
    def conv(o):
        if isinstance(o, fl.GroupFigure):
            return o.__dict__
        raise TypeError(type(o))
    return json.loads(json.dumps(results, default=conv))


def from_json(results: list[dict]) -> list[dict]:
    """Results read back from ``--json``, figures rebuilt (busy s/min recomputed from the median)."""
    for r in results:
        for key in ("healthy", "faults_phase"):
            figs = {}
            for name, d in r[key]["figures"].items():
                d = {**d, "per_minute": d["median"] / d["interval"] * 60}
                figs[name] = fl.GroupFigure(**d)
            r[key]["figures"] = figs
    return results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpus", default="1000", help="comma-separated fleet sizes in GPUs (multiples of 8) [1000]")
    ap.add_argument("--window", type=float, default=180,
                    help="seconds sampled per phase; at least two intervals of the slowest rule group (the gaps "
                         "group: 3m), or its figures are missing from the gpumon total [180]")
    ap.add_argument("--warmup", type=float, default=60, help="seconds after the first evaluations before sampling [60]")
    ap.add_argument("--history", type=float, default=3600, help="seconds of raw history backfilled (0: none) [3600]")
    ap.add_argument("--chunk-mib", type=int, default=1024,
                    help="largest OpenMetrics slice the backfill writes, MiB (the history is streamed) [1024]")
    ap.add_argument("--eval-interval", type=float, default=30, help="global evaluation_interval, s [30]")
    code = ap.add_mutually_exclusive_group()
    code.add_argument("--rev", help="measure this git revision (rules rendered and validate run with its code)")
    code.add_argument("--src", help="measure the gpumon code in this folder")
    ap.add_argument("--rules", help="load this rule file instead of rendering the revision's")
    ap.add_argument("--also-rules", metavar="FILE",
                    help="also load this rule file (say, another revision's rendering) beside the measured one, "
                         "renamed so neither touches the other, and print both costs side by side")
    ap.add_argument("--query-rounds", type=int, default=3,
                    help="with --also-rules: then time every rule of both as instant queries, this many rounds [3]")
    ap.add_argument("--prometheus", default=os.environ.get("GPUMON_PROMETHEUS") or "/usr/bin/prometheus",
                    help="prometheus binary [/usr/bin/prometheus, Debian's 2.42]")
    ap.add_argument("--fault-copies", type=int, default=1, help="copies of the fault set on distinct nodes [1]")
    ap.add_argument("--concurrency", type=int, default=4, help="validate's and the naive validator's concurrency [4]")
    ap.add_argument("--naive-sample", type=int, default=4000, help="at most this many naive queries, scaled [4000]")
    ap.add_argument("--skip-validate", action="store_true", help="rules only")
    ap.add_argument("--json", help="write every figure here as JSON")
    ap.add_argument("--report", metavar="JSON", help="print the figures of an earlier --json file and exit")
    args = ap.parse_args(argv)
    if args.report:
        results = from_json(json.loads(Path(args.report).read_text()))
        for res in results:
            print(f"gpumon {res.get('revision', '?')}")
            report(res)
        growth(results)
        return 0
    sizes = [int(x) for x in args.gpus.split(",") if x.strip()]

    def on_term(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_term)

    spec = load_spec(ROOT / "gpumon.yaml")
    src = Source(args.rev, args.src)
    results = []
    try:
        with tempfile.TemporaryDirectory(prefix="gpumon-fleet-") as tmp:
            work = Path(tmp)
            rules_file = Path(args.rules).resolve() if args.rules else src.render(work / "out")
            print(f"gpumon {src.label} ({src.path}); rules {args.rules or 'rendered by it'}; "
                  f"Prometheus {args.prometheus}; eval interval {args.eval_interval:g}s, scrape "
                  f"{spec.exporter.scrape_interval:g}s; history {args.history:g}s; window {args.window:g}s per phase",
                  flush=True)
            for gpus in sizes:
                res = run_size(gpus, args, src, rules_file, spec, work)
                res["revision"] = src.label
                results.append(res)
                report(res)
                sys.stdout.flush()
            growth(results)
    except KeyboardInterrupt:
        log("interrupted: servers stopped")
        return 130
    finally:
        src.close()
        if args.json and results:
            Path(args.json).write_text(json.dumps(to_json(results), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
