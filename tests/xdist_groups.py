"""How the slow tier spreads over pytest-xdist workers (``--dist loadgroup``, tests/conftest.py).

A module's tests on one engine are one work unit, so its module-scoped servers start once per engine;
the modules in :data:`SPREAD_MODULES` share nothing costly and spread test by test. The groups are
computed here from the node id alone, on the controller: pytest-xdist 3.8 marks a test's group by
appending ``@group`` to a private node-id field that pytest 9.2 no longer reads
(pytest-dev/pytest-xdist#1386), and then ``loadgroup`` silently degrades to ``load``: a module's tests
land on both workers and its servers start on each.

Tests that mostly wait on real time (:data:`WAITING_MODULES`: live servers scraping the simulator, live
Alertmanager runs, the live vmalert matrix, the fleet benchmark's sampling windows) go to their own workers (``--wait-workers``), so their idle minutes
overlap the CPU-bound promtool and server work of the others instead of taking a CPU worker's turn;
the CPU-bound workers run at a lower priority (tests/conftest.py), and never take a waiting unit.
"""

from __future__ import annotations

import re

from xdist.scheduler import LoadScopeScheduling

#: slow modules whose tests share nothing costly (each test runs its own promtool files; the
#: module fixtures only render): their tests spread over the workers one by one
SPREAD_MODULES = {"test_ruletests", "test_fuzz_spec"}
#: modules whose slow tests spend most of their wall time waiting on real time with idle CPUs: live
#: servers scraping the simulator, evaluating and notifying on their own clocks. Measured alone (one engine,
#: busy CPU seconds of the whole machine / wall seconds): test_validate_devices 6/74, test_vmalert 8/60,
#: test_rules_e2e 5/32, test_kubernetes 10/30, test_validate_dashboards 7/32, test_alertmanager 5/35,
#: test_preview_e2e 10/28, test_validate_e2e 11/29, test_demo 5/20; the promtool, fuzzing and Thanos
#: modules, by contrast, keep a core busy for most of their wall time (test_sources 48/44, test_thanos 71/73)
WAITING_MODULES = {
    "test_live_alertmanager", "test_bench_fleet", "test_matrix_vmlive",
    "test_validate_devices", "test_vmalert", "test_rules_e2e", "test_kubernetes", "test_healthy_fleet",
    "test_validate_dashboards", "test_alertmanager", "test_preview_e2e", "test_validate_e2e",
    "test_validate_kubernetes", "test_dashboards_legacy", "test_dashboards_kubernetes", "test_demo",
    "test_dashboards", "test_validate_vm", "test_simulate_sources", "test_validate_sources", "test_calm",
}
#: an engine's test id (tests/engines.py): ``prom2.42``, ``vm1.151``, ``am0.25``
_ENGINE_ID = re.compile(r"(?:prom|vm|am)\d+\.\d+")


def module_of(nodeid: str) -> str:
    """The module of a node id or a work unit: ``tests/test_x.py::test_y[a-b]`` and ``test_x[prom2.42]``
    -> ``test_x``."""
    return nodeid.split("::", 1)[0].split("[", 1)[0].rsplit("/", 1)[-1].removesuffix(".py")


def group_of(nodeid: str) -> str:
    """The work unit of a test: its module and the engines among its parameters
    (``test_matrix[prom2.42]``), or the test itself in a :data:`SPREAD_MODULES` module. Module
    fixtures are set up again for each engine, so one unit per engine costs no extra server start."""
    module = module_of(nodeid)
    if module in SPREAD_MODULES:
        return nodeid
    params = nodeid[nodeid.index("[") + 1:nodeid.rindex("]")] if nodeid.endswith("]") and "[" in nodeid else ""
    engines = [p for p in params.split("-") if _ENGINE_ID.fullmatch(p)]
    return f"{module}[{','.join(engines)}]" if engines else module


def waits(worker: str, workers: int, wait_workers: int) -> bool:
    """Whether xdist worker ``worker`` (``gw3``) is a waiting worker: one of the last ``wait_workers``
    of the ``workers`` started with the run (``gw0`` .. ``gwN-1``, N = ``-n``). Fixed for the whole
    run: counting the workers still up instead made the next worker a waiting one each time a
    waiting worker stopped, until every worker had stopped with CPU-bound units still queued (xdist:
    "Unexpectedly no active workers available"). A worker started in place of a crashed one
    (``gwN`` and up) is CPU-bound."""
    index = int(re.sub(r"\D", "", worker) or 0)
    return workers - wait_workers <= index < workers


class GroupScheduling(LoadScopeScheduling):
    """``loadscope`` with :func:`group_of` as the scope, the collection order kept (tests/conftest.py
    puts the longest modules first), and the last ``wait_workers`` workers given the waiting units
    (:data:`WAITING_MODULES`) and nothing else, the other workers the CPU-bound units and nothing
    else: each stops when its kind has run out (with no waiting workers, every worker takes any unit)."""

    def __init__(self, config, log=None, wait_workers: int = 0):
        super().__init__(config, log)
        self.wait_workers = wait_workers

    def _split_scope(self, nodeid: str) -> str:
        return group_of(nodeid)

    def _assign_work_unit(self, node) -> None:
        waiting = waits(node.gateway.id, self.numnodes, self.wait_workers)
        scope = next((s for s in self.workqueue if (module_of(s) in WAITING_MODULES) == waiting), None)
        if scope is None and (waiting or self.wait_workers):
            # a waiting worker takes no CPU-bound unit (one more busy process on the cores), and a
            # CPU-bound worker no waiting one: it runs at a lower priority (tests/conftest.py)
            node.shutdown()
            return
        if scope is not None:
            self.workqueue.move_to_end(scope, last=False)
        super()._assign_work_unit(node)

    def schedule(self) -> None:
        # keep the collection order (longest modules first), not xdist's most-tests-first
        self.config.option.loadscopereorder = False
        super().schedule()
