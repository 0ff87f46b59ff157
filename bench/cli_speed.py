"""How long `gpumon render` and `gpumon --help` take, side by side with an earlier commit.

Each command runs as its own process (what a pre-commit hook or a PR check pays), REPEAT times,
alternating between this checkout and the baseline so machine noise hits both alike. Printed per
command: median wall and CPU (user + sys of the child) seconds for each side and their ratio, and
the peak RSS of one render. The baseline is checked out with `git worktree add` into a temporary
folder and run with this venv's Python and `PYTHONPATH` pointing at it (its dependencies are this
venv's), so only gpumon's own code differs.

Each side renders its own bundled gpumon.yaml (an older gpumon rejects keys added since) into
temporary folders; when both spec files are the same bytes, the script fails if the two outputs
differ by a byte.

Targets (issue 10): render <= 1.0 s wall, --help <= 0.3 s wall on the project's 2-core machine.
Usage: .venv/bin/python bench/cli_speed.py [BASELINE_REV] [REPEAT]   (defaults: a43eef0, 5)
"""

from __future__ import annotations

import filecmp
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGETS = {"render": 1.0, "--help": 0.3}


def run(src: Path, args: list[str]) -> tuple[float, float, int]:
    """(wall s, CPU s, peak RSS KiB) of ``python -m gpumon.cli ARGS`` with ``src`` on the path."""
    env = {**os.environ, "PYTHONPATH": str(src), "PYTHONDONTWRITEBYTECODE": "1"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "gpumon.cli", *args], cwd=src, env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{src}: gpumon {' '.join(args)} exited {proc.returncode}: {proc.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, after.ru_maxrss  # ru_maxrss: largest child so far (KiB on Linux)


def rss_of_render(src: Path, spec: Path, out: Path) -> int:
    """Peak RSS (KiB) of one render, measured in a fresh wrapper process so earlier children do
    not count."""
    code = ("import resource,subprocess,sys;"
            "subprocess.run(sys.argv[1:],check=True,stdout=subprocess.DEVNULL);"
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    env = {**os.environ, "PYTHONPATH": str(src)}
    proc = subprocess.run([sys.executable, "-c", code, sys.executable, "-m", "gpumon.cli", "render", str(spec),
                           "-o", str(out)], cwd=src, env=env, capture_output=True, text=True, check=True)
    return int(proc.stdout.strip())


def same_tree(a: Path, b: Path) -> list[str]:
    """Relative paths that differ (or exist on one side only) between folders ``a`` and ``b``."""
    files_a = {p.relative_to(a) for p in a.rglob("*") if p.is_file()}
    files_b = {p.relative_to(b) for p in b.rglob("*") if p.is_file()}
    diff = sorted(str(p) for p in files_a ^ files_b)
    diff += sorted(str(p) for p in files_a & files_b if not filecmp.cmp(a / p, b / p, shallow=False))
    return diff


def main() -> None:
    rev = sys.argv[1] if len(sys.argv) > 1 else "a43eef0"
    repeat = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    with tempfile.TemporaryDirectory(prefix="gpumon-bench-") as tmp:
        base = Path(tmp) / "baseline"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(base), rev], check=True)
        try:
            sides = {"now": ROOT, rev: base}
            outs = {name: Path(tmp) / f"out-{i}" for i, name in enumerate(sides)}
            results: dict[tuple[str, str], list[tuple[float, float]]] = {}
            specs = {name: src / "gpumon.yaml" for name, src in sides.items()}
            commands = {"render": lambda name: ["render", str(specs[name]), "-o", str(outs[name])],
                        "--help": lambda _: ["--help"]}
            for name, src in sides.items():  # warm-up: byte-compile, fill the page cache
                for make in commands.values():
                    run(src, make(name))
            for _ in range(repeat):
                for label, make in commands.items():
                    for name, src in sides.items():
                        wall, cpu, _ = run(src, make(name))
                        results.setdefault((label, name), []).append((wall, cpu))
            same_spec = specs["now"].read_bytes() == specs[rev].read_bytes()
            lines = {name: len(path.read_text().splitlines()) for name, path in specs.items()}
            differ = same_tree(outs["now"], outs[rev]) if same_spec else []
            rss = {name: rss_of_render(src, specs[name], Path(tmp) / f"rss-{name}") for name, src in sides.items()}
            count = sum(1 for p in outs["now"].rglob("*") if p.is_file())
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)], check=False)
    print(f"gpumon CLI speed, median of {repeat} runs; baseline {rev}; {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"{'command':10} {'':6} {'wall s':>8} {'cpu s':>8}   {'target':>8}")
    for label in commands:
        walls = {n: statistics.median(w for w, _ in results[(label, n)]) for n in sides}
        cpus = {n: statistics.median(c for _, c in results[(label, n)]) for n in sides}
        for n in sides:
            mark = ""
            if n == "now":
                mark = f"<= {TARGETS[label]:.1f} " + ("met" if walls[n] <= TARGETS[label] else "MISSED")
            print(f"{label:10} {n:6.6} {walls[n]:8.3f} {cpus[n]:8.3f}   {mark}")
        print(f"{label:10} {'ratio':6} {walls['now'] / walls[rev]:8.3f} {cpus['now'] / cpus[rev]:8.3f}   "
              f"(now / {rev})")
    print(f"render peak RSS: now {rss['now'] / 1024:.0f} MiB, {rev} {rss[rev] / 1024:.0f} MiB "
          f"(ratio {rss['now'] / rss[rev]:.2f})")
    if differ:
        raise SystemExit(f"outputs differ from {rev}: {', '.join(differ[:10])}")
    if same_spec:
        print(f"render output byte-identical to {rev}'s ({count} files)")
    else:
        print(f"the bundled specs differ ({rev}'s has {lines[rev]} lines, now {lines['now']}): outputs not compared")


if __name__ == "__main__":
    main()
