"""Shared fixtures: paths, the bundled spec, rendering into a temp folder."""

from __future__ import annotations

import functools
import inspect
import os
from pathlib import Path

import pytest

import gpumon.spec
from gpumon.priority import renice
from gpumon.spec import load_spec

from .engines import AlertmanagerEngine, Engine, VmEngine, alertmanager_engines, describe, prometheus_engines, vm_engines

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"

# promtool and the servers the tests start are Go programs that collect garbage at 100 % heap growth;
# at 400 % promtool's rule tests take about a fifth less CPU (values tests: 32.6 s -> 25.5 s user) for
# about 60 MB more memory each, which the suite's few processes can spare. Inherited by xdist workers.
os.environ.setdefault("GOGC", "400")


#: nice value of the CPU-bound xdist workers and the promtool runs they start (a server they start
#: leads a session, so a scheduler group, of its own at 0): the waiting workers, the live vmalert
#: matrix and the servers they start run on the wall clock and keep 0, so the batch yields to them
#: (weight 36 against 1,024, sched(7))
BATCH_NICENESS = 15
#: nice value of a live Alertmanager run (tests/live_alerting.py) where the run may raise a priority
#: (root, as CI runs): its simulated exporters answer 1 s scrapes from the worker's threads and a
#: fleet-wide alert ends when every scrape of one moment times out, which ~60 busy servers of the
#: live vmalert matrix, each a scheduler group of its own, made happen on a 2-core machine. The run
#: needs little CPU, so its priority costs the others little
LIVE_NICENESS = -10


def _own_scheduler_group() -> None:
    """Put this xdist worker in a session of its own. With the kernel's scheduler autogroups on
    (gpumon.priority) the CPU is shared per session, not per process: the servers the tests start
    each run in a new session, and with every worker in the run's one session, all workers and
    their children held one share against one per server (the live vmalert matrix starts ~60).
    A worker that already leads a group (started by hand) stays where it is."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        try:
            os.setsid()
        except OSError:
            pass


_own_scheduler_group()


#: modules whose every test starts a server (Prometheus, vmalert, VictoriaMetrics, the simulator)
#: or builds and installs the package
_SLOW_MODULES = {"test_rules_e2e", "test_live_alertmanager", "test_thanos", "test_validate_e2e", "test_validate_kubernetes", "test_validate_vm", "test_validate_devices", "test_matrix_vm", "test_matrix_vmlive", "test_package", "test_demo",
                 "test_ruletests"}
#: fixtures that start a server or need promtool
_SLOW_FIXTURES = {"promtool", "engine", "vm_engine", "am_engine", "prom", "env", "cluster", "installed", "delivered"}
#: what a test body calls when it runs a real binary or server itself
_SLOW_CALLS = ("promtool", "amtool", "LocalAlertmanager", "LocalPrometheus", "Simulator(", "ExpositionServer", "serve_forever")
#: the longest modules (last full runs), handed out first so no worker is left with one at the end
_LONGEST_FIRST = ("test_matrix_vmlive", "test_live_alertmanager", "test_ruletests", "test_matrix", "test_bench_fleet", "test_fuzz_spec", "test_apply_size",
                  "test_validate_hostile", "test_matrix_vm")


def pytest_addoption(parser):
    parser.addoption("--wait-workers", type=int, default=0, metavar="N",
                     help="with --dist loadgroup: the last N xdist workers take the tests that mostly wait on real "
                          "time first (tests/xdist_groups.py)")


def pytest_configure(config):
    """A CPU-bound xdist worker (not one of the last ``--wait-workers``, tests/xdist_groups.py) runs
    at :data:`BATCH_NICENESS`, and so do the promtool runs it starts."""
    workerinput = getattr(config, "workerinput", None)
    waiting = config.getoption("wait_workers")
    if workerinput is None or not waiting:
        return
    from .xdist_groups import waits
    if not waits(workerinput["workerid"], workerinput["workercount"], waiting):
        renice(os.getpid(), BATCH_NICENESS)


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadgroup`` by :class:`tests.xdist_groups.GroupScheduling`: a module's tests on one
    engine on one worker, waiting tests on the ``--wait-workers``."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from .xdist_groups import GroupScheduling
    return GroupScheduling(config, log, wait_workers=config.getoption("wait_workers"))


def pytest_collection_modifyitems(config, items):
    """Mark tests that start servers, run promtool or build the package as ``slow``: the fast tier
    (``pytest -m "not slow"``) is everything else. Put the longest modules first (the slow tier's
    scheduler, tests/xdist_groups.py, keeps this order). Slow tests fail loudly (not skip) when the
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
    # a stable sort keeps each module's own order (and so its module-scoped fixtures' reuse)
    rank = {name: i for i, name in enumerate(_LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.module.__name__.rsplit(".", 1)[-1] if item.module else "", len(rank)))


@pytest.fixture(scope="session", autouse=True)
def _spec_parsed_once():
    """Parse each spec text once per test process: a :class:`~gpumon.spec.Spec` is frozen (tuples
    of frozen dataclasses), so one parse can serve every test, and the CLI tests load the bundled
    spec hundreds of times (about 0.1 s of CPU each). A text that fails raises anew every time
    (exceptions are not cached), so every error path still runs."""
    real = gpumon.spec.parse_spec
    cached = functools.lru_cache(maxsize=64)(real)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(gpumon.spec, "parse_spec", functools.wraps(real)(lambda text, name="<spec>": cached(text, name)))
        yield


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def default_spec():
    return load_spec(ROOT / "gpumon.yaml")


@pytest.fixture(scope="session")
def default_render(default_spec) -> dict[str, str]:
    """``render(default_spec)`` once per test process (path -> text), for tests that only read it;
    a mapping proxy, so a test cannot change what the next one sees."""
    from types import MappingProxyType

    from gpumon.render import render

    return MappingProxyType(render(default_spec))


@pytest.fixture(scope="session")
def default_render_dir(default_render, tmp_path_factory) -> Path:
    """:func:`default_render` written (by ``gpumon.writer``) into a session temp folder, for
    tests that only read it."""
    from gpumon import writer

    out = tmp_path_factory.mktemp("default-render")
    writer.write(dict(default_render), out)
    return out


def _params(engines, what: str):
    """One param per build of ``engines`` (tests/engines.py); a missing build is one param that
    fails when used, so the fast tier collects without the tools and the slow tier fails loudly
    (locally and in CI alike: a missing server is a broken setup, never a skip)."""
    try:
        return [pytest.param(e, id=e.id) for e in engines()]
    except FileNotFoundError as exc:
        return [pytest.param(exc, id=f"{what}-missing")]


def _engine_params():
    return _params(prometheus_engines, "prometheus")


def pytest_report_header(config):
    """The servers this run tests against, first thing in the output."""
    return ["servers under test:"] + ["  " + line for line in describe()]


@pytest.fixture(scope="module", params=_engine_params())
def engine(request) -> Engine:
    """Each Prometheus build in turn (2.42 and the pinned 3.x): module-scoped, so a module's
    server fixtures start once per build and every test in it runs against both."""
    if isinstance(request.param, Exception):
        pytest.fail(str(request.param))
    return request.param


@pytest.fixture(scope="module", params=_params(vm_engines, "vm"))
def vm_engine(request) -> VmEngine:
    """Each VictoriaMetrics + vmalert build in turn (Debian's 1.79 and the pinned current one)."""
    if isinstance(request.param, Exception):
        pytest.fail(str(request.param))
    return request.param


@pytest.fixture(scope="module", params=_params(alertmanager_engines, "alertmanager"))
def am_engine(request) -> AlertmanagerEngine:
    """Each Alertmanager build in turn (Debian's 0.25 and the pinned current one)."""
    if isinstance(request.param, Exception):
        pytest.fail(str(request.param))
    return request.param


@pytest.fixture
def promtool(engine) -> str:
    """promtool of each Prometheus build in turn."""
    return engine.promtool
