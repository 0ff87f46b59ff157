"""The servers the suite runs against: Debian's Prometheus 2.42 and the pinned Prometheus 3.x and
Thanos that ``make tools`` builds from their Go modules (versions in ``tools/versions.env``).

Every test that starts a Prometheus or runs promtool is parametrized over :func:`prometheus_engines`,
so the same assertions hold on both majors. Point the suite at other builds with
``GPUMON_PROMETHEUS_DIRS=/opt/prom-2.53/bin:/opt/prom-3.1/bin`` (folders holding ``prometheus`` and
``promtool``), and at another tool cache with ``GPUMON_TOOLS``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@lru_cache(maxsize=None)
def pinned() -> dict[str, str]:
    """``tools/versions.env`` as {KEY: value} (the one place versions are pinned)."""
    out = {}
    for line in (ROOT / "tools" / "versions.env").read_text().splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            key, value = line.split("=", 1)
            out[key.strip()] = value.strip()
    return out


def tools_cache() -> Path:
    """Where ``make tools`` builds: ``$GPUMON_TOOLS`` or ``~/.cache/gpumon-tools``."""
    return Path(os.environ.get("GPUMON_TOOLS") or Path.home() / ".cache" / "gpumon-tools")


def _version(binary: str) -> str:
    """``2.42.0`` from ``prometheus, version 2.42.0+ds (branch: …)``; '?' when it does not say."""
    proc = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30)
    found = re.search(r"version (\d+\.\d+\.\d+)", proc.stdout + proc.stderr)
    return found.group(1) if found else "?"


@dataclass(frozen=True)
class Engine:
    """One Prometheus build: its ``prometheus`` and ``promtool`` binaries and their version."""

    prometheus: str
    promtool: str
    version: str

    @property
    def id(self) -> str:
        """Test id, e.g. ``prom2.42`` (the major and minor are what differ in behaviour)."""
        return "prom" + ".".join(self.version.split(".")[:2])

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0]) if self.version[:1].isdigit() else 0


def _engine(folder: Path) -> Engine:
    prom, tool = folder / "prometheus", folder / "promtool"
    for path in (prom, tool):
        if not os.access(path, os.X_OK):
            raise FileNotFoundError(f"{path} not found: run `make tools` (builds Prometheus "
                                    f"{pinned()['PROMETHEUS_VERSION']} into {tools_cache()})"
                                    " or `make prometheus-installed` (Debian's 2.42)")
    return Engine(str(prom), str(tool), _version(str(prom)))


@lru_cache(maxsize=None)
def prometheus_engines() -> tuple[Engine, ...]:
    """Every Prometheus the suite runs against, oldest first.

    Default: Debian's (``prometheus`` on PATH) and the pinned 3.x in the tool cache. A missing one
    raises FileNotFoundError naming the make target that installs it: a missing server is a broken
    setup, never a reason to test less.
    """
    dirs = os.environ.get("GPUMON_PROMETHEUS_DIRS")
    if dirs:
        folders = [Path(d) for d in dirs.split(os.pathsep) if d]
    else:
        debian = shutil.which("prometheus")
        folders = [Path(debian).parent if debian else Path("/usr/bin"),
                   tools_cache() / f"prometheus-{pinned()['PROMETHEUS_VERSION']}" / "bin"]
    return tuple(sorted((_engine(f) for f in folders), key=lambda e: [int(p) for p in re.findall(r"\d+", e.version)]))


def thanos_binary() -> str:
    """The pinned Thanos built by ``make tools``; FileNotFoundError with the hint otherwise."""
    path = tools_cache() / f"thanos-{pinned()['THANOS_VERSION']}" / "bin" / "thanos"
    if not os.access(path, os.X_OK):
        raise FileNotFoundError(f"{path} not found: run `make tools`")
    return str(path)


def describe() -> list[str]:
    """One line per server, for the test run's header."""
    lines = [f"prometheus {e.version}: {e.prometheus} (promtool {e.promtool})" for e in prometheus_engines()]
    try:
        lines.append(f"thanos {_version(thanos_binary())}: {thanos_binary()}")
    except FileNotFoundError as exc:
        lines.append(f"thanos: {exc}")
    for package in ("prometheus-alertmanager", "victoria-metrics"):  # Debian's packages
        proc = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package], capture_output=True, text=True)
        lines.append(f"{package} {proc.stdout.strip() or 'not installed'} (Debian)")
    return lines


if __name__ == "__main__":  # `python -m tests.engines`: what `make test` prints before the suite
    print("servers under test:")
    for line in describe():
        print("  " + line)
