#!/usr/bin/env python3
"""The README's dashboard pictures: `make demo`'s fleet (3 nodes x 4 GPUs, the same faults, the
bundled spec with 2 s timing) scraped by a real Prometheus on loopback for a few minutes, each
bundled dashboard drawn by `gpumon preview` over that time, and a PNG of each page taken with
Debian's headless Chromium into docs/images/preview-<dashboard>.png. Servers are ours, stopped
by PID at the end.

    .venv/bin/python scripts/preview_screenshots.py [--minutes 8] [--out docs/images]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import demo  # noqa: E402 - the demo's spec timing and faults

from gpumon import render  # noqa: E402
from gpumon.localprom import LocalPrometheus  # noqa: E402
from gpumon.simfaults import Fault  # noqa: E402
from gpumon.simserve import Simulator  # noqa: E402
from gpumon.simulate import Fleet  # noqa: E402
from gpumon.spec import load_spec  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def shoot(page: Path, out: Path) -> None:
    """A PNG of the whole page: the window as tall as the drawn grids."""
    html = page.read_text()
    height = sum(int(h) for h in re.findall(r'class="gp-grid" style="height:(\d+)px', html)) + 160
    binary = demo.shutil.which("chromium") or demo.shutil.which("chromium-browser")
    if not binary:
        raise SystemExit("chromium not found: apt-get install -y --no-install-recommends chromium")
    with tempfile.TemporaryDirectory(prefix="gpumon-chromium-") as profile:
        subprocess.run([binary, *demo.CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--window-size=1250,{height}",
                        f"--screenshot={out}", page.as_uri()], capture_output=True, timeout=180, check=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=8.0, help="history to collect and draw")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "images")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="gpumon-preview-") as tmp:
        spec_path = demo.demo_spec(Path(tmp))
        spec = load_spec(spec_path)
        files = render.render(spec)
        rules = Path(tmp) / "gpumon.rules.yaml"
        rules.write_text(files["rules/gpumon.rules.yaml"])
        dashboards = {}
        for name, text in files.items():
            if name.startswith("dashboards/"):
                dashboards[Path(name).stem] = Path(tmp) / name
                dashboards[Path(name).stem].parent.mkdir(exist_ok=True)
                dashboards[Path(name).stem].write_text(text)
        with Simulator(Fleet(3, 4, [Fault.parse(f) for f in demo.FAULTS])) as sim:
            with LocalPrometheus({spec.exporter.job: list(sim.targets.values())}, rule_files=[rules],
                                 scrape_interval="2s", evaluation_interval="2s") as prom:
                print(f"prometheus {prom.url}: collecting {args.minutes:g} min of history ...", flush=True)
                deadline = time.monotonic() + args.minutes * 60
                while time.monotonic() < deadline:
                    time.sleep(5)
                span = f"{int(args.minutes * 60)}s"
                for stem, path in sorted(dashboards.items()):
                    page = Path(tmp) / f"{stem}.html"
                    # run in the temporary folder: the page names the dashboard as dashboards/<file>
                    cmd = [str(Path(sys.executable).with_name("gpumon")), "preview", f"dashboards/{path.name}",
                           "--spec", str(spec_path), "--prom", prom.url, "--time-range", span, "-o", str(page)]
                    code = subprocess.run(cmd, cwd=tmp).returncode
                    print(f"gpumon preview {path.name}: exit {code}", flush=True)
                    if code not in (0, 1):
                        return 1
                    shot = args.out / f"preview-{stem}.png"
                    shoot(page, shot)
                    print(f"screenshot: {shot.relative_to(ROOT) if shot.is_relative_to(ROOT) else shot}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
