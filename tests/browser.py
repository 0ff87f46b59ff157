"""Debian's headless Chromium for tests that look at gpumon's HTML report: load a file, dump
the DOM after layout, take a screenshot. Runs as root in CI, hence ``--no-sandbox``; every run
gets a fresh profile and no network features (no QUIC, sync, component updates)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars")


def chromium() -> str:
    """The chromium binary; FileNotFoundError says how to install it."""
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    raise FileNotFoundError("chromium not found: apt-get install -y --no-install-recommends chromium "
                            "(make prometheus-installed does)")


def _run(*args: str) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="gpumon-chromium-") as profile:
        return subprocess.run([chromium(), *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True,
                              text=True, timeout=120, check=True)


def dump_dom(page: Path) -> str:
    """The DOM of ``page`` as Chromium serialises it after loading."""
    return _run("--dump-dom", page.resolve().as_uri()).stdout


def screenshot(page: Path, out: Path, width: int = 1400, height: int = 1800) -> Path:
    """A PNG of ``page`` at ``width`` x ``height`` CSS pixels."""
    _run(f"--window-size={width},{height}", f"--screenshot={out}", page.resolve().as_uri())
    return out
