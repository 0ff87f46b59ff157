"""The slow tier's scheduler (tests/xdist_groups.py): a module's tests on one engine run on one
worker, so its module servers start once; waiting tests go to the waiting worker."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import BATCH_NICENESS
from tests.xdist_groups import group_of, module_of

ROOT = Path(__file__).resolve().parent.parent


def test_a_module_on_one_engine_is_one_unit():
    assert group_of("tests/test_matrix.py::test_pages[prom2.42]") == "test_matrix[prom2.42]"
    assert group_of("tests/test_sources.py::test_pass[prom3.16-relabelled_out]") == "test_sources[prom3.16]"
    assert group_of("tests/test_vmalert.py::test_x[vm1.151-am0.25]") == "test_vmalert[vm1.151,am0.25]"
    assert group_of("tests/test_thanos.py::test_store") == "test_thanos"
    # a parameter that only looks like a version is not an engine
    assert group_of("tests/test_spec.py::test_x[v1.2-prom]") == "test_spec"


def test_spread_and_whole_modules():
    spread = "tests/test_ruletests.py::test_promtool_passes_on_rendered_tests[prom2.42]"
    assert group_of(spread) == spread
    assert group_of("tests/test_live_alertmanager.py::test_one[vm1.79]") == "test_live_alertmanager[vm1.79]"
    assert module_of("test_matrix[prom2.42]") == module_of("tests/test_matrix.py::t[prom2.42]") == "test_matrix"


_CONFTEST = '''
import os, pytest
from tests.conftest import pytest_addoption, pytest_configure, pytest_xdist_make_scheduler  # noqa: F401

@pytest.fixture(scope="module")
def server(request):
    with open(os.environ["SETUPS"], "a") as f:
        f.write(f"{request.module.__name__} {os.environ['PYTEST_XDIST_WORKER']} {os.nice(0)} "
                f"{os.getsid(0) == os.getpid()}\\n")
'''
_MODULE = '''
import time, pytest

@pytest.mark.parametrize("i", range(6))
def test_it(server, i):
    time.sleep(SLEEP)
'''
#: CPU-bound modules: more than the CPU workers can take at once, so units are still queued when the
#: waiting worker has run out of its own and stops
_CPU_MODULES = tuple(f"test_{c}" for c in "abcdefgh")


@pytest.mark.slow
def test_a_module_starts_its_server_once_and_waiting_tests_take_their_own_worker(tmp_path):
    """A real pytest-xdist run: with ``--dist loadgroup`` each module's module fixture is set up once
    (pytest-xdist's own groups are lost with pytest 9.2, pytest-dev/pytest-xdist#1386, and then a
    module's tests spread over both workers and set it up on each), and the waiting module runs
    alone on the last worker, which stops when it has run out of waiting units while the CPU
    workers go on with theirs. Each worker leads a session of its own, and the CPU workers run at
    the batch's nice value (tests/conftest.py), the waiting one at the run's."""
    (tmp_path / "conftest.py").write_text(_CONFTEST)
    for name in _CPU_MODULES:
        (tmp_path / f"{name}.py").write_text(_MODULE.replace("SLEEP", "0.1"))
    (tmp_path / "test_bench_fleet.py").write_text(_MODULE.replace("SLEEP", "0"))
    setups = tmp_path / "setups.txt"
    env = {**os.environ, "SETUPS": str(setups), "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "3",
                           "--wait-workers", "1", "--dist", "loadgroup", "--rootdir", str(tmp_path), str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = [line.split() for line in setups.read_text().splitlines()]
    modules = [m for m, *_ in rows]
    assert sorted(modules) == sorted([*_CPU_MODULES, "test_bench_fleet"]), json.dumps(rows)
    workers = {m: w for m, w, *_ in rows}
    assert workers["test_bench_fleet"] == "gw2" and "gw2" not in {workers[m] for m in _CPU_MODULES}
    nice = {m: int(n) for m, _, n, _ in rows}
    assert nice["test_bench_fleet"] == os.nice(0) and {nice[m] for m in _CPU_MODULES} == {max(os.nice(0), BATCH_NICENESS)}
    assert {lead for *_, lead in rows} == {"True"}, rows
