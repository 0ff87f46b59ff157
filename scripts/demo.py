#!/usr/bin/env python3
"""`make demo`: a real Prometheus on loopback scraping `gpumon simulate` (3 nodes x 4 GPUs) with a
few faults, the rules `gpumon render` writes for the bundled spec loaded into it, then
`gpumon validate` with `--dashboards` (gpumon's dashboards and NVIDIA's official one) and its
report, on the terminal and as one HTML file with every panel drawn from the demo's data over the
Prometheus' lifetime (build/demo-report.html, plus a screenshot
build/demo-report.png when Debian's chromium is installed). Everything is stopped at the end (by
PID, servers we started).

The bundled spec is used with the demo's timing (2 s scrapes and collection, rule groups every
2 s), so a Prometheus a few seconds old already has every recording rule the dashboards read.

Exit code: 0 when validate found the injected faults (exit 1 from validate), else 1.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gpumon import render
from gpumon.localprom import LocalPrometheus
from gpumon.simfaults import Fault
from gpumon.simserve import Simulator
from gpumon.simulate import Fleet
from gpumon.spec import default_spec_path, load_spec

ROOT = Path(__file__).resolve().parent.parent
FAULTS = [
    "kind=drop,metric=DCGM_FI_DEV_FB_USED,node=gpu-node-2",                # a field gone on one node
    "kind=drop,metric=DCGM_FI_DEV_SM_CLOCK,node=gpu-node-1,gpu=3",         # ... on one GPU
    "kind=nan,metric=DCGM_FI_DEV_POWER_USAGE,node=gpu-node-1,gpu=0",       # NaN passes threshold alerts
    "kind=http500,node=gpu-node-3",                                        # an exporter that fails
]
#: the bundled spec's timing -> the demo's (2 s scrapes; slow rule groups every 2 s, not 1 m)
TIMING = {"  scrape_interval: 15s": "  scrape_interval: 2s", "  scrape_timeout: 10s": "  scrape_timeout: 2s",
          "  collect_interval: 30s": "  collect_interval: 2s", "  slow_group_interval: 1m": "  slow_group_interval: 2s",
          "  gaps_group_interval: 3m": "  gaps_group_interval: 2s"}
REPORT = ROOT / "build" / "demo-report.html"
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--hide-scrollbars")


def demo_spec(tmp: Path) -> Path:
    text = default_spec_path().read_text()
    for old, new in TIMING.items():
        if old not in text:
            raise SystemExit(f"demo: the bundled spec no longer has {old.strip()!r}; update TIMING in {__file__}")
        text = text.replace(old, new, 1)
    path = tmp / "gpumon.yaml"
    path.write_text(text)
    return path


def screenshot(page: Path) -> Path | None:
    """build/demo-report.png from headless Chromium, or None when it is not installed."""
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if not binary:
        return None
    out = page.with_suffix(".png")
    with tempfile.TemporaryDirectory(prefix="gpumon-chromium-") as profile:
        subprocess.run([binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--window-size=1400,1500",
                        f"--screenshot={out}", page.as_uri()], capture_output=True, timeout=120, check=True)
    return out


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="gpumon-demo-") as tmp:
        spec_path = demo_spec(Path(tmp))
        spec = load_spec(spec_path)
        files = render.render(spec)
        rules = Path(tmp) / "gpumon.rules.yaml"
        rules.write_text(files["rules/gpumon.rules.yaml"])
        dashboards = Path(tmp) / "dashboards"
        dashboards.mkdir()
        for name, text in files.items():
            if name.startswith("dashboards/"):
                (dashboards / Path(name).name).write_text(text)
        print(f"faults: {'; '.join(FAULTS)}")
        with Simulator(Fleet(3, 4, [Fault.parse(f) for f in FAULTS])) as sim:
            print("simulator: " + ", ".join(f"{n}=http://{a}/metrics" for n, a in sim.targets.items()))
            born = time.monotonic()
            with LocalPrometheus({spec.exporter.job: list(sim.targets.values())}, rule_files=[rules],
                                 scrape_interval="2s", evaluation_interval="2s") as prom:
                print(f"prometheus: {prom.url} (rules: {rules.name}); waiting for 5 scrapes ...", flush=True)
                # 5 scrapes of every target, then every rule group evaluated on them (the gap ratio
                # and other sparse records hold nothing on healthy GPUs: wait on the groups, not on them)
                ready = prom.wait_for(lambda: len(prom.query(
                    f'count_over_time(up{{job="{spec.exporter.job}"}}[1m]) >= 5')) == 3
                    and prom.query("job_dcgm_field:gpumon_coverage:ratio"), timeout=90) and prom.settle(60)
                if not ready:
                    print("demo: the targets or the rule groups were not ready in time", file=sys.stderr)
                    print(prom.logs(), file=sys.stderr)
                    return 1
                REPORT.parent.mkdir(exist_ok=True)
                official = ROOT / "tests" / "data" / "dcgm-exporter-dashboard.json"
                cmd = [str(Path(sys.executable).with_name("gpumon")), "validate", str(spec_path), "--prom", prom.url,
                       "--lookback", "1m", "--dashboards", str(dashboards), "--dashboards", str(official),
                       "--format", "html", "-o", str(REPORT),
                       # the dashboards ask for 6h; this Prometheus has held data for well under a minute
                       "--preview-range", f"{int(time.monotonic() - born) + 2}s"]
                print("$ gpumon " + " ".join(cmd[1:]), flush=True)
                started = time.monotonic()
                code = subprocess.run(cmd).returncode
                print(f"gpumon validate exited {code} after {time.monotonic() - started:.1f}s "
                      "(1 = failed checks, as expected with the faults above)")
    print(f"HTML report: {REPORT}")
    shot = screenshot(REPORT)
    if shot:
        print(f"screenshot: {shot}")
    return 0 if code == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
