"""Shared fixtures: paths, the bundled spec, rendering into a temp folder."""

from __future__ import annotations

import inspect
import shutil
from pathlib import Path

import pytest

from generator.spec import load_spec

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"


#: modules whose every test starts a server (Prometheus, vmalert, VictoriaMetrics, the simulator)
#: or builds and installs the package
_SLOW_MODULES = {"test_rules_e2e", "test_validate_e2e", "test_validate_kubernetes", "test_validate_vm", "test_package",
                 "test_ruletests"}
#: fixtures that start a server or need promtool
_SLOW_FIXTURES = {"promtool", "prom", "env", "cluster", "installed", "delivered"}
#: what a test body calls when it runs a real binary or server itself
_SLOW_CALLS = ("promtool", "amtool", "LocalAlertmanager", "LocalPrometheus", "Simulator(", "ExpositionServer", "serve_forever")


def pytest_collection_modifyitems(config, items):
    """Mark tests that start servers, run promtool or build the package as ``slow``: the fast tier
    (``pytest -m "not slow"``) is everything else. Slow tests fail loudly (not skip) when the
    binaries are missing: `make test` installs them, so a missing binary is a broken setup, not an
    optional feature."""
    for item in items:
        module = item.module.__name__.rsplit(".", 1)[-1] if item.module else ""
        try:
            source = inspect.getsource(item.function)
        except (OSError, TypeError):
            source = ""
        if (module in _SLOW_MODULES or _SLOW_FIXTURES & set(getattr(item, "fixturenames", ()))
                or any(call in source for call in _SLOW_CALLS)):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def default_spec():
    return load_spec(ROOT / "gpumon.yaml")


@pytest.fixture(scope="session")
def promtool() -> str:
    path = shutil.which("promtool")
    assert path, "promtool not found: run `make test` (it installs Debian's prometheus package)"
    return path
