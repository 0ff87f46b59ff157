"""Rule-evaluation cost on both Prometheus majors, side by side in one run.

One synthetic dcgm-exporter target serves NODES x 8 GPUs (every spec'd field of the bundled
spec); Debian's Prometheus 2.42 and the pinned 3.x (``make tools``) scrape it at the same time
and load the same rendered rule file (every group at its own interval, the intervals scaled down
to 2 s so a short run sees many evaluations). After SECONDS, each server's
last evaluation time (``/api/v1/rules`` ``evaluationTime``, which Prometheus also exports as
``prometheus_rule_group_last_duration_seconds``) is sampled every 2 s; the script prints the mean
per group on each engine and the ratio 3.x / 2.42. Both run on the same machine at the same time,
so machine noise hits both alike; the ratio is the figure, not the seconds.

Usage: .venv/bin/python bench/engines_eval.py [NODES] [SECONDS]   (defaults: 125 nodes = 1,000 GPUs, 60 s)
"""

from __future__ import annotations

import re
import statistics

import httpx
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from gpumon.localprom import LocalPrometheus  # noqa: E402
from gpumon.loopback import ExpositionServer  # noqa: E402
from gpumon.render import render  # noqa: E402
from gpumon.spec import load_spec  # noqa: E402
from tests.engines import prometheus_engines  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from rule_eval import exposition  # noqa: E402  (one synthetic fleet for every bench)


def durations(prom: LocalPrometheus) -> dict[str, float]:
    """{rule group: last evaluation seconds} on one server: ``evaluationTime`` of ``/api/v1/rules``,
    the value Prometheus also exports as ``prometheus_rule_group_last_duration_seconds`` (these
    servers do not scrape themselves)."""
    groups = httpx.get(f"{prom.url}/api/v1/rules", timeout=30).json()["data"]["groups"]
    return {g["name"]: float(g.get("evaluationTime") or 0.0) for g in groups}


def main(nodes: int = 125, seconds: float = 60) -> None:
    spec = load_spec(ROOT / "gpumon.yaml")
    text = render(spec)[f"rules/{spec.name}.rules.yaml"]
    text = re.sub(r"(?m)^(\s+interval:) \S+$", r"\1 2s", text)  # every group every 2 s
    body = exposition(spec, nodes, spec.metrics)
    engines = prometheus_engines()
    with tempfile.TemporaryDirectory() as tmp, ExpositionServer(lambda: body) as exp:
        rules = Path(tmp) / "gpumon.rules.yaml"
        rules.write_text(text)
        servers = [LocalPrometheus({spec.exporter.job: [exp.address]}, [rules], scrape_interval="5s",
                                   evaluation_interval="2s", binary=e.prometheus) for e in engines]
        for s in servers:
            s.start()
        try:
            time.sleep(seconds)
            samples: list[list[dict[str, float]]] = [[] for _ in servers]
            for _ in range(10):
                for i, s in enumerate(servers):
                    samples[i].append(durations(s))
                time.sleep(2)
        finally:
            for s in servers:
                s.stop()
    groups = sorted(set().union(*[d.keys() for runs in samples for d in runs]))
    names = [f"prometheus {e.version}" for e in engines]
    print(f"{nodes * 8} GPUs, {len(spec.metrics)} spec'd fields; mean of 10 samples of each group's last "
          "evaluation time, both servers in one run")
    print(f"{'group':<40}" + "".join(f"{n:>22}" for n in names) + f"{'ratio last/first':>18}")
    totals = [0.0] * len(engines)
    for g in groups:
        means = [statistics.mean(d.get(g, 0.0) for d in runs) for runs in samples]
        totals = [t + m for t, m in zip(totals, means)]
        ratio = means[-1] / means[0] if means[0] else float("nan")
        print(f"{g:<40}" + "".join(f"{m * 1000:>19.1f} ms" for m in means) + f"{ratio:>18.2f}")
    print(f"{'total':<40}" + "".join(f"{t * 1000:>19.1f} ms" for t in totals)
          + f"{totals[-1] / totals[0] if totals[0] else float('nan'):>18.2f}")


if __name__ == "__main__":
    main(*(int(a) if i == 0 else float(a) for i, a in enumerate(sys.argv[1:3])))
