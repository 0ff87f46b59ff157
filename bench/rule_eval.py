"""Rule-evaluation cost at fleet size: gpumon's shared presence recording rules against the same
alerts written without them, measured side by side in one real Prometheus.

One synthetic dcgm-exporter target serves NODES x 8 GPUs for every required field of the bundled
spec. Two rule groups are loaded together:

  gpumon   the rendered presence records (one ``group by`` per field, then the GPU inventory) and
           the per-field fleet / node / GPU missing-metric alerts that compare those small series
  inline   the same alerts with every recorded series replaced by the expression it records, i.e.
           each alert re-selects the raw metrics (the usual hand-written form)

It prints the mean evaluation time of each group (``evaluationTime`` of /api/v1/rules) and their
ratio. Both groups evaluate every 2 s on the same data, so machine noise hits both alike.
Usage: .venv/bin/python bench/rule_eval.py [NODES] [SECONDS]   (defaults: 250 nodes = 2,000 GPUs, 60 s)
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
from generator.localprom import ExpositionServer, LocalPrometheus  # noqa: E402
from generator.rules import inventory, names, presence  # noqa: E402
from generator.rules.model import RuleGroup  # noqa: E402
from generator.rules.output import group_dict  # noqa: E402
from generator.rules.promql import by, gpu_ids, job_sel  # noqa: E402
from generator.spec import load_spec  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def exposition(spec, nodes: int, metrics=None) -> str:
    """dcgm-exporter 4.x text for NODES x 8 GPUs: ``metrics`` (default the required ones)."""
    lines = []
    for m in spec.required_metrics if metrics is None else metrics:
        lines.append(f"# TYPE {m.name} {'counter' if m.kind == 'counter' else 'gauge'}")
        for n in range(nodes):
            for g in range(8):
                lines.append(f'{m.name}{{gpu="{g}",UUID="GPU-{n:08d}-{g:04d}",pci_bus_id="00000000:{g:02X}:00.0",'
                             f'device="nvidia{g}",modelName="NVIDIA H100 80GB HBM3",Hostname="node-{n:05d}",'
                             f'DCGM_FI_DRIVER_VERSION="570.148.08"}} {40 + g}')
    return "\n".join(lines) + "\n"


def alerts(spec) -> list:
    """The per-field presence alerts (three tiers per required field)."""
    return [r for m in spec.required_metrics for r in
            (presence.metric_absent(spec, m), presence.node_metric_missing(spec, m), presence.gpu_metric_missing(spec, m))]


def inline(spec, expr: str) -> str:
    """Replace gpumon's recorded series by the raw expressions they record."""
    keep = by(("job", "instance") + spec.exporter.labels.identity)
    raw_any = " or ".join(job_sel(spec, m.name) for m in spec.required_metrics)
    inv = f"group by ({by(gpu_ids(spec))}) ({raw_any})"

    def present(match):
        return f"group by ({keep}) ({job_sel(spec, match.group(1))})"

    expr = re.sub(re.escape(names.FIELD_PRESENT) + r'\{job="[^"]+",' + names.FIELD_LABEL + r'="(\w+)"\}', present, expr)
    expr = re.sub(re.escape(names.INVENTORY) + r'\{(\w+)=""\}', lambda m: f'({inv}) unless on ({by(gpu_ids(spec))}) {{{m.group(1)}!=""}}', expr)
    return expr.replace(names.INVENTORY, f"({inv})")


def main() -> None:
    args = sys.argv[1:]
    nodes = int(args[0]) if args else 250
    seconds = float(args[1]) if len(args) > 1 else 60
    spec = load_spec(ROOT / "gpumon.yaml")
    body = exposition(spec, nodes)
    ours = RuleGroup("gpumon", tuple(inventory.field_present(spec) + inventory.inventory(spec) + alerts(spec)), 2.0)
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
