"""The servers the suite runs against: Debian's Prometheus 2.42, VictoriaMetrics + vmalert 1.79 and
Alertmanager 0.25, beside the pinned current releases that ``make tools`` builds from their Go modules
(Prometheus 3.x, VictoriaMetrics + vmalert, Alertmanager, Thanos; versions in ``tools/versions.env``).

Every test that starts a Prometheus or runs promtool is parametrized over :func:`prometheus_engines`,
so the same assertions hold on both majors; the vmalert tests over :func:`vm_engines` and the
Alertmanager tests over :func:`alertmanager_engines` likewise. Point the suite at other builds with
``GPUMON_PROMETHEUS_DIRS=/opt/prom-2.53/bin:/opt/prom-3.1/bin`` (folders holding ``prometheus`` and
``promtool``), ``GPUMON_VM_DIRS`` (folders holding ``victoria-metrics`` and ``vmalert``),
``GPUMON_ALERTMANAGER_DIRS`` (folders holding ``alertmanager`` or ``prometheus-alertmanager``, and
``amtool``), and at another tool cache with ``GPUMON_TOOLS``.

Missing servers: a missing build is never skipped, locally or in CI (``CI=true``): the lookup raises
FileNotFoundError naming the make target that installs it, and every test using it fails with that
message (tests/conftest.py), while the fast tier, which starts no server, still collects and runs.
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


class _Build:
    """What every server build has: a ``version`` and a test id, ``PREFIX`` plus its major and
    minor version (``prom2.42``, ``vm1.79``, ``am0.25``: they are what differ in behaviour)."""

    PREFIX = ""
    version: str

    @property
    def id(self) -> str:
        return self.PREFIX + ".".join(self.version.split(".")[:2])


@dataclass(frozen=True)
class Engine(_Build):
    """One Prometheus build: its ``prometheus`` and ``promtool`` binaries and their version."""

    PREFIX = "prom"
    prometheus: str
    promtool: str
    version: str

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0]) if self.version[:1].isdigit() else 0


@lru_cache(maxsize=None)
def prometheus_engines() -> tuple[Engine, ...]:
    """Every Prometheus the suite runs against, oldest first.

    Default: Debian's (``prometheus`` on PATH) and the pinned 3.x in the tool cache. A missing one
    raises FileNotFoundError naming the make target that installs it: a missing server is a broken
    setup, never a reason to test less.
    """
    return _sorted(Engine(prom, tool, _version(prom)) for prom, tool in _builds(
        "GPUMON_PROMETHEUS_DIRS", "prometheus", "PROMETHEUS_VERSION", "prometheus", "Prometheus",
        ("prometheus",), ("promtool",)))


def thanos_binary() -> str:
    """The pinned Thanos built by ``make tools``; FileNotFoundError with the hint otherwise."""
    path = tools_cache() / f"thanos-{pinned()['THANOS_VERSION']}" / "bin" / "thanos"
    if not os.access(path, os.X_OK):
        raise FileNotFoundError(f"{path} not found: run `make tools`")
    return str(path)


def _sorted(engines) -> tuple:
    return tuple(sorted(engines, key=lambda e: [int(p) for p in re.findall(r"\d+", e.version)]))


def _missing(path: Path, what: str) -> FileNotFoundError:
    hint = (f"run `make tools` (builds {what} into {tools_cache()})" if str(path).startswith(str(tools_cache()))
            else "run `make prometheus-installed` (Debian's packages)")
    return FileNotFoundError(f"{path} not found: {hint}")


def _builds(env: str, debian_binary: str, pin: str, built: str, what: str, *binaries: tuple[str, ...]) \
        -> list[list[str]]:
    """The paths of ``binaries`` in each folder the suite runs a tool from, in folder order:
    ``$env`` (os.pathsep-separated folders), or Debian's folder of ``debian_binary`` and the tool
    cache's ``<built>-<version pinned as pin>/bin``. Each binary is a tuple of the names it goes by
    (Debian renames some); FileNotFoundError naming the make target when one is missing."""
    dirs = os.environ.get(env)
    if dirs:
        folders = [Path(d) for d in dirs.split(os.pathsep) if d]
    else:
        debian = shutil.which(debian_binary)
        folders = [Path(debian).parent if debian else Path("/usr/bin"),
                   tools_cache() / f"{built}-{pinned()[pin]}" / "bin"]
    out = []
    for folder in folders:
        paths = []
        for names in binaries:
            path = next((folder / n for n in names if os.access(folder / n, os.X_OK)), folder / names[0])
            if not os.access(path, os.X_OK):
                raise _missing(path, f"{what} {pinned()[pin]}")
            paths.append(str(path))
        out.append(paths)
    return out


@dataclass(frozen=True)
class VmEngine(_Build):
    """One VictoriaMetrics single-node + vmalert build (the two always come from one release)."""

    PREFIX = "vm"
    victoria_metrics: str
    vmalert: str
    version: str

    @property
    def current(self) -> bool:
        """Newer than Debian's 1.79: flags whose defaults changed must be set (docs/engines.md)."""
        return [int(p) for p in self.version.split(".")[:2]] > [1, 79]


def _vm_version(binary: str) -> str:
    """``1.79.14`` from ``victoria-metrics-20230303-...-tags-v1.79.14-0-g…`` or ``v1.151.0`` (``-version``)."""
    proc = subprocess.run([binary, "-version"], capture_output=True, text=True, timeout=30)
    found = re.search(r"v(\d+\.\d+\.\d+)", proc.stdout + proc.stderr)
    if found:
        return found.group(1)
    if binary.startswith("/usr/"):   # Debian's build prints nothing: ask dpkg
        proc = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "victoria-metrics"], capture_output=True, text=True)
        found = re.match(r"(\d+\.\d+\.\d+)", proc.stdout.strip())
    return found.group(1) if found else "?"


@lru_cache(maxsize=None)
def vm_engines() -> tuple[VmEngine, ...]:
    """Every VictoriaMetrics + vmalert build the suite runs against, oldest first: Debian's (on
    PATH) and the pinned one in the tool cache, or ``$GPUMON_VM_DIRS``. FileNotFoundError with the
    make target when one is missing."""
    return _sorted(VmEngine(vm, va, _vm_version(va)) for vm, va in _builds(
        "GPUMON_VM_DIRS", "vmalert", "VICTORIAMETRICS_VERSION", "victoriametrics", "VictoriaMetrics",
        ("victoria-metrics",), ("vmalert",)))


@dataclass(frozen=True)
class AlertmanagerEngine(_Build):
    """One Alertmanager build: ``alertmanager`` (Debian names it ``prometheus-alertmanager``) and ``amtool``."""

    PREFIX = "am"
    alertmanager: str
    amtool: str
    version: str


@lru_cache(maxsize=None)
def alertmanager_engines() -> tuple[AlertmanagerEngine, ...]:
    """Every Alertmanager build the suite runs against, oldest first: Debian's and the pinned one
    in the tool cache, or ``$GPUMON_ALERTMANAGER_DIRS``. FileNotFoundError when one is missing."""
    return _sorted(AlertmanagerEngine(am, tool, _version(am)) for am, tool in _builds(
        "GPUMON_ALERTMANAGER_DIRS", "amtool", "ALERTMANAGER_VERSION", "alertmanager", "Alertmanager",
        ("alertmanager", "prometheus-alertmanager"), ("amtool",)))


def describe() -> list[str]:
    """One line per server, for the test run's header (a missing one says how to get it)."""
    lines = [f"prometheus {e.version}: {e.prometheus} (promtool {e.promtool})" for e in prometheus_engines()]
    try:
        lines.append(f"thanos {_version(thanos_binary())}: {thanos_binary()}")
    except FileNotFoundError as exc:
        lines.append(f"thanos: {exc}")
    try:
        lines += [f"victoria-metrics + vmalert {e.version}: {e.victoria_metrics}, {e.vmalert}" for e in vm_engines()]
    except FileNotFoundError as exc:
        lines.append(f"victoria-metrics + vmalert: {exc}")
    try:
        lines += [f"alertmanager {e.version}: {e.alertmanager} (amtool {e.amtool})" for e in alertmanager_engines()]
    except FileNotFoundError as exc:
        lines.append(f"alertmanager: {exc}")
    return lines


if __name__ == "__main__":  # `python -m tests.engines`: what `make test` prints before the suite
    print("servers under test:")
    for line in describe():
        print("  " + line)
