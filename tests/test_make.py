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
    plan = make("-n", "demo").stdout.splitlines()
    assert plan[0].startswith('echo "make demo needs a prometheus binary (Debian\'s prometheus package')
    assert not any("apt-get" in line for line in plan[:2]) and any("apt-get install" in line for line in plan)
    proc = make("demo-needs", env={"GPUMON_PROMETHEUS": "/nonexistent/prometheus"})
    assert proc.returncode == 0 and proc.stdout.splitlines()[0].startswith("make demo needs a prometheus binary")


@pytest.mark.skipif(os.geteuid() == 0, reason="as root, make demo installs the package instead")
def test_demo_without_prometheus_or_sudo_explains_and_stops(tmp_path):
    for tool in ("make", "sh", "id"):
        (tmp_path / tool).symlink_to(shutil.which(tool))
    proc = make("demo-needs", env={"PATH": str(tmp_path)})
    assert proc.returncode == 2 and "apt-get install prometheus" in proc.stdout, proc.stdout + proc.stderr
