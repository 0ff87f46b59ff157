"""Shared fixtures: paths, the bundled spec, rendering into a temp folder."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from generator.spec import load_spec

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"


def pytest_collection_modifyitems(config, items):
    """Tests that need promtool/prometheus fail loudly (not skip) when the binaries are missing:
    `make test` installs them, so a missing binary is a broken setup, not an optional feature."""


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
