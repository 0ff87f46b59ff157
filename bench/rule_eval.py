"""Rule-evaluation cost at fleet size, measured side by side in one real Prometheus.

Two modes (``.venv/bin/python bench/rule_eval.py MODE [NODES] [SECONDS]``):

``fleet`` (default; issue 16)
    One synthetic dcgm-exporter target serves NODES x 8 GPUs of *every* spec'd field of the
    bundled spec (plausible values, a healthy fleet). Prometheus loads the whole rendered rule
    file plus two *floor* groups: one recording rule ``group by (identity) (M)`` per spec'd metric
    (``floor_all``) and per required metric (``floor_required``), evaluated at the scrape interval
    (the least any rule set that looks at every series must do). It prints, per gpumon group and in
    total, evaluation seconds per minute (median ``evaluationTime`` of /api/v1/rules x 60 / group
    interval) and its ratio to each floor, then the series gpumon's recording rules hold against the
    raw ``DCGM_*`` series (issue 16's targets: <= 3x the floor, <= 0.2x the raw series). Defaults:
    125 nodes = 1,000 GPUs, 240 s, scrape 15 s, evaluation 30 s (kube-prometheus-stack's defaults
    are 30 s / 30 s; the issue's fleet benchmark scrapes every 15 s). The history is only as long as
    the run, so windowed rules (30 m gap ratio, 1 h lookback) read fewer samples than in a fleet
    with hours of history: their cost here is a lower bound.
``presence``
    gpumon's shared presence records and the per-field missing-metric alerts against the same
    alerts with every recorded series replaced by the expression it records (each alert
    re-selecting raw metrics), every 2 s; prints the median evaluation time of each and the ratio.
"""

from __future__ import annotations

import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from gpumon.localprom import LocalPrometheus  # noqa: E402
from gpumon.loopback import ExpositionServer  # noqa: E402
from gpumon.rules import fresh, inventory, names, presence  # noqa: E402
from gpumon.rules.model import RuleGroup  # noqa: E402
from gpumon.rules.output import group_dict  # noqa: E402
from gpumon.rules.promql import by, gpu_ids, job_sel  # noqa: E402
from gpumon.spec import load_spec  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def _value(m, g: int, tick: int) -> float:
    """A plausible reading of ``m`` for GPU ``g``: inside the spec range, 0 for XID and error
    counters, a growing energy counter (so the frozen-counter alert stays quiet)."""
    if m.kind == "counter" and m.unit == "millijoules":
        return 1_000_000 + 300_000 * tick + g
    if m.unit == "code" or m.kind == "counter":
        return 0
    lo = m.range_min if m.range_min is not None else 0
    hi = m.range_max if m.range_max is not None else lo + 100
    v = lo + (hi - lo) * (0.3 + g / 80)
    for t in m.thresholds:  # below every alerting threshold: a healthy fleet
        if (t.op in (">", ">=") and v >= t.value) or (t.op in ("<", "<=") and v <= t.value):
            v = lo
    return v


def exposition(spec, nodes: int, metrics=None, tick: int = 0) -> str:
    """dcgm-exporter 4.x text for NODES x 8 GPUs: ``metrics`` (default the required ones)."""
    lines = []
    for m in spec.required_metrics if metrics is None else metrics:
        lines.append(f"# TYPE {m.name} {'counter' if m.kind == 'counter' else 'gauge'}")
        extra = ',err_code="0",err_msg=""' if "err_code" in m.alert_labels else ""
        for n in range(nodes):
            for g in range(8):
                lines.append(f'{m.name}{{gpu="{g}",UUID="GPU-{n:08d}-{g:04d}",pci_bus_id="00000000:{g:02X}:00.0",'
                             f'device="nvidia{g}",modelName="NVIDIA H100 80GB HBM3",Hostname="node-{n:05d}",'
                             f'DCGM_FI_DRIVER_VERSION="570.148.08"{extra}}} {_value(m, g, tick):g}')
    return "\n".join(lines) + "\n"


def alerts(spec) -> list:
    """The per-field presence alerts (three tiers per required field)."""
    return [r for m in spec.required_metrics for r in
            (presence.metric_absent(spec, m), presence.node_metric_missing(spec, m), presence.gpu_metric_missing(spec, m))]


def inline(spec, expr: str) -> str:
    """Replace gpumon's recorded series by the raw expressions they record."""
    raw_any = " or ".join(job_sel(spec, m.name) for m in spec.required_metrics)
    inv = f"group by ({by(gpu_ids(spec))}) ({raw_any})"

    def missing(match):
        return f"(INVENTORY unless on ({by(gpu_ids(spec))}) {job_sel(spec, match.group(1))})"

    # the inventory rule's mark (one series while the rule succeeds): a raw read cannot fail apart from its alert
    expr = expr.replace(fresh.succeeded(names.INVENTORY, fresh.inventory_group(spec)), "vector(1)")
    expr = re.sub(re.escape(names.FIELD_MISSING) + r'\{job="[^"]+",' + names.FIELD_LABEL + r'="(\w+)"\}', missing, expr)
    expr = re.sub(re.escape(names.INVENTORY) + r'\{(\w+)=""\}', lambda m: f'({inv}) unless on ({by(gpu_ids(spec))}) {{{m.group(1)}!=""}}', expr)
    return expr.replace(names.INVENTORY, f"({inv})").replace("INVENTORY", f"({inv})")


def _median_eval(prom, seconds: float, names_: set[str] | None = None) -> tuple[dict, dict]:
    """Poll /api/v1/rules for ``seconds``: per group the list of evaluation times (s) and the interval (s)."""
    samples: dict[str, list[float]] = {}
    interval: dict[str, float] = {}
    seen: dict[str, str] = {}
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for g in httpx.get(f"{prom.url}/api/v1/rules", timeout=30).json()["data"]["groups"]:
            interval[g["name"]] = float(g["interval"])
            if g["lastEvaluation"] != seen.get(g["name"]) and not g["lastEvaluation"].startswith("0001"):
                seen[g["name"]] = g["lastEvaluation"]
                samples.setdefault(g["name"], []).append(g["evaluationTime"])
        time.sleep(1.0)
    return samples, interval


def fleet(nodes: int, seconds: float, scrape: float = 15, evaluation: float = 30) -> None:
    """The issue 16 figures (see the module docstring)."""
    from gpumon.rules import build_groups
    from gpumon.rules.output import plain_rule_file
    spec = load_spec(ROOT / "gpumon.yaml")
    metrics = spec.metrics
    start = time.monotonic()
    body = lambda: exposition(spec, nodes, metrics, tick=int((time.monotonic() - start) // scrape))  # noqa: E731
    ids = by(spec.exporter.labels.identity)
    floors = []
    for fname, ms in (("floor_all", metrics), ("floor_required", spec.required_metrics)):
        floors.append({"name": fname, "interval": f"{scrape:g}s", "rules": [
            {"record": f"{fname}:present:group", "expr": f"group by (job, {ids}) ({job_sel(spec, m.name)})",
             "labels": {"field": m.name}} for m in ms]})
    groups = build_groups(spec)
    recorded = sorted({r.record for g in groups for r in g.rules if r.record})
    with tempfile.TemporaryDirectory() as tmp:
        ours = Path(tmp) / "gpumon.rules.yaml"
        ours.write_text(plain_rule_file(spec, groups))
        floor = Path(tmp) / "floor.rules.yaml"
        floor.write_text(yaml.safe_dump({"groups": floors}, sort_keys=False))
        with ExpositionServer(body) as exp, LocalPrometheus(
                {spec.exporter.job: [exp.address]}, [ours, floor], scrape_interval=f"{scrape:g}s",
                scrape_timeout=f"{min(scrape, 10):g}s", evaluation_interval=f"{evaluation:g}s") as prom:
            prom.wait_for(lambda: prom.query(names.INVENTORY), 180)
            samples, interval = _median_eval(prom, seconds)
            raw = prom.query('count({__name__=~"DCGM_.+"})')
            rec = prom.query(f'count by (__name__) ({{__name__=~"{"|".join(re.escape(r) for r in recorded)}"}})')
            firing = prom.query('count by (alertname) (ALERTS{alertstate="firing"})')
    per_min = {g: statistics.median(v) * 60 / interval[g] for g, v in samples.items()}
    fa, fr = per_min["floor_all"], per_min["floor_required"]
    print(f"fleet: {nodes} nodes x 8 GPUs = {nodes * 8} GPUs, {len(metrics)} spec'd fields "
          f"({len(spec.required_metrics)} required), scrape {scrape:g}s, evaluation {evaluation:g}s, "
          f"{seconds:g}s measured")
    print(f"  {'group':28} {'interval':>8} {'evals':>5} {'median s':>9} {'s/min':>8} {'/floor_all':>10} {'/floor_req':>10}")
    total = 0.0
    for g in sorted(per_min, key=lambda x: (not x.startswith("floor"), x)):
        if not g.startswith("floor"):
            total += per_min[g]
        print(f"  {g:28} {interval[g]:>7g}s {len(samples[g]):>5} {statistics.median(samples[g]):>9.4f} "
              f"{per_min[g]:>8.3f} {per_min[g] / fa:>10.2f} {per_min[g] / fr:>10.2f}")
    print(f"  {'gpumon total':28} {'':>8} {'':>5} {'':>9} {total:>8.3f} {total / fa:>10.2f} {total / fr:>10.2f}")
    raw_n = float(raw[0]["value"][1]) if raw else 0
    rec_n = {r["metric"]["__name__"]: float(r["value"][1]) for r in rec}
    print(f"series: raw DCGM_* {raw_n:.0f}; gpumon recorded {sum(rec_n.values()):.0f} = "
          f"{sum(rec_n.values()) / raw_n:.3f}x raw")
    for n, c in sorted(rec_n.items(), key=lambda x: -x[1]):
        print(f"  {n:55} {c:>8.0f} {c / raw_n:>7.3f}x")
    print("alerts firing:", {r["metric"]["alertname"]: r["value"][1] for r in firing} or "none")


def main() -> None:
    args = sys.argv[1:]
    mode = args.pop(0) if args and not args[0].isdigit() else "fleet"
    if mode == "fleet":
        fleet(int(args[0]) if args else 125, float(args[1]) if len(args) > 1 else 240)
        return
    nodes = int(args[0]) if args else 250
    seconds = float(args[1]) if len(args) > 1 else 60
    spec = load_spec(ROOT / "gpumon.yaml")
    body = exposition(spec, nodes)
    ours = RuleGroup("gpumon", tuple(inventory.inventory(spec) + inventory.field_missing(spec, spec.required_metrics)
                                        + alerts(spec)), 2.0)
    theirs = [{**group_dict(RuleGroup("x", (r,)))["rules"][0], "expr": inline(spec, r.expr)} for r in alerts(spec)]
    groups = [group_dict(ours), {"name": "inline", "interval": "2s", "rules": theirs}]
    samples: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        rules = Path(tmp) / "bench.rules.yaml"
        rules.write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
        with ExpositionServer(lambda: body) as exp, LocalPrometheus(
                {spec.exporter.job: [exp.address]}, [rules], scrape_interval="2s", scrape_timeout="2s",
                evaluation_interval="2s") as prom:
            prom.wait_for(lambda: prom.query(names.INVENTORY), 90)
            fired = {g: prom.query('count(ALERTS{alertstate!=""})') for g in ("any",)}
            seen: dict[str, str] = {}
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                for g in httpx.get(f"{prom.url}/api/v1/rules", timeout=10).json()["data"]["groups"]:
                    if g["lastEvaluation"] != seen.get(g["name"]):
                        seen[g["name"]] = g["lastEvaluation"]
                        samples.setdefault(g["name"], []).append(g["evaluationTime"] * 1000)
                time.sleep(0.5)
    ours_ms, theirs_ms = statistics.median(samples["gpumon"]), statistics.median(samples["inline"])
    print(f"fleet: {nodes} nodes x 8 GPUs = {nodes * 8} GPUs, {len(spec.required_metrics)} required fields, "
          f"{len(body.splitlines())} exposition lines per scrape; {len(alerts(spec))} alerts in each group")
    print(f"  gpumon (shared presence records + alerts): median {ours_ms:8.2f} ms over {len(samples['gpumon'])} evaluations")
    print(f"  inline (alerts re-select raw metrics)     : median {theirs_ms:8.2f} ms over {len(samples['inline'])} evaluations")
    print(f"ratio gpumon/inline = {ours_ms / theirs_ms:.2f}   (alerts firing during the run: {fired['any'] or 'none'})")


if __name__ == "__main__":
    main()
