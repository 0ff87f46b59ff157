#!/usr/bin/env python3
"""`make demo`: a real Prometheus on loopback scraping `gpumon simulate` (3 nodes x 4 GPUs) with a
few faults, the rules `gpumon render` writes for the bundled spec loaded into it, then
`gpumon validate` and its report. Everything is stopped at the end (by PID, servers we started).

Exit code: 0 when validate found exactly the injected faults' kinds (exit 1 from validate), else 1.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

from generator import render
from generator.localprom import LocalPrometheus
from generator.simulate import Fault, Fleet, Simulator
from generator.spec import default_spec_path, load_spec

FAULTS = [
    "kind=drop,metric=DCGM_FI_DEV_FB_USED,node=gpu-node-2",                # a field gone on one node
    "kind=drop,metric=DCGM_FI_DEV_SM_CLOCK,node=gpu-node-1,gpu=3",         # ... on one GPU
    "kind=nan,metric=DCGM_FI_DEV_POWER_USAGE,node=gpu-node-1,gpu=0",       # NaN passes threshold alerts
    "kind=http500,node=gpu-node-3",                                        # an exporter that fails
]


def main() -> int:
    spec = load_spec(default_spec_path())
    with tempfile.TemporaryDirectory(prefix="gpumon-demo-") as tmp:
        rules = Path(tmp) / "gpumon.rules.yaml"
        rules.write_text(render.render(spec)["rules/gpumon.rules.yaml"])
        print(f"faults: {'; '.join(FAULTS)}")
        with Simulator(Fleet(3, 4, [Fault.parse(f) for f in FAULTS])) as sim:
            print("simulator: " + ", ".join(f"{n}=http://{a}/metrics" for n, a in sim.targets.items()))
            with LocalPrometheus({spec.exporter.job: list(sim.targets.values())}, rule_files=[rules],
                                 scrape_interval="2s", evaluation_interval="2s") as prom:
                print(f"prometheus: {prom.url} (rules: {rules.name}); waiting for 5 scrapes ...", flush=True)
                ready = prom.wait_for(lambda: len(prom.query(
                    f'count_over_time(up{{job="{spec.exporter.job}"}}[1m]) >= 5')) == 3, timeout=90)
                if not ready:
                    print(prom.logs(), file=sys.stderr)
                    return 1
                cmd = [str(Path(sys.executable).with_name("gpumon")), "validate", "--prom", prom.url, "--lookback", "1m"]
                print("$ gpumon " + " ".join(cmd[1:]), flush=True)
                started = time.monotonic()
                code = subprocess.run(cmd).returncode
                print(f"gpumon validate exited {code} after {time.monotonic() - started:.1f}s "
                      "(1 = failed checks, as expected with the faults above)")
    return 0 if code == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
