"""Makefile entry points that talk to the user before they act: `make demo` says what it needs
from apt-get before it installs or runs anything, and explains when it cannot install it."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from .conftest import ROOT

pytestmark = pytest.mark.skipif(not shutil.which("make"), reason="needs make")


def make(*args, env=None) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "-s", *args], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={**os.environ, **(env or {})})


def test_demo_says_what_it_needs_before_anything_else():
    plan = "\n".join(make("-n", "demo").stdout.splitlines()[:2])
    needs = plan.index('echo "make demo needs a prometheus binary (Debian\'s prometheus package')
    assert needs < plan.index("apt-get install"), plan
    # with a prometheus at hand it says nothing of what it would need (the chromium line only when
    # chromium is missing: it is optional)
    proc = make("demo-needs", env={"GPUMON_PROMETHEUS": "/nonexistent/prometheus"})
    assert proc.returncode == 0 and "needs" not in proc.stdout, proc.stdout
    assert ("chromium is not installed" in proc.stdout) == (shutil.which("chromium") is None), proc.stdout


@pytest.mark.skipif(os.geteuid() == 0, reason="as root, make demo installs the package instead")
def test_demo_without_prometheus_or_sudo_explains_and_stops(tmp_path):
    for tool in ("make", "sh", "id"):
        (tmp_path / tool).symlink_to(shutil.which(tool))
    proc = make("demo-needs", env={"PATH": str(tmp_path)})
    assert proc.returncode == 2 and "apt-get install prometheus" in proc.stdout, proc.stdout + proc.stderr
