"""The fault-scenario matrix (issue 11): every scenario of tests/matrix_cases.py pages exactly
the expected alerts, each once, within its bound, and nothing else; Prometheus' rule engine
(promtool) evaluates the rendered rules on the simulated fleet, and every page is accounted for at
every 10 s step (tests/matrix_timeline.py). docs/matrix.md is its real output
(``python -m tests.matrix``)."""

from __future__ import annotations

import pytest

from gpumon.simfaults import FAULT_KINDS
from tests import matrix, matrix_timeline
from tests.matrix_cases import CASES, OPEN


def test_matrix_covers_every_fault_kind_and_enough_scenarios():
    kinds = {f.kind for c in CASES for f in c.faults + c.initial + tuple(x for _, more in c.later for x in more)}
    assert kinds == set(FAULT_KINDS), set(FAULT_KINDS) - kinds
    assert len(CASES) >= 45 and len({c.name for c in CASES}) == len(CASES)


def test_every_scenario_pages_exactly_as_expected(promtool):
    outcomes, seconds, log = matrix.run(CASES, promtool)
    print(f"\n{matrix.table(outcomes)}\n{len(outcomes)} scenarios in {seconds:.1f}s")
    failed = [o.case.name for o in outcomes if not o.ok]
    assert not failed, (failed, log[-6000:])


def test_the_open_scenarios_still_fail(promtool):
    """Faults the rules still get wrong (tests/matrix_cases.py OPEN). When one passes,
    move it to CASES."""
    if not OPEN:
        pytest.skip("no open scenario")
    outcomes, _, _ = matrix.run(OPEN, promtool)
    assert [o.ok for o in outcomes] == [False] * len(OPEN), [(o.case.name, o.problems) for o in outcomes]
    print("\n".join(f"{o.case.name}: {'; '.join(o.problems)}" for o in outcomes))


def test_a_wrong_expectation_fails(promtool):
    """The matrix can fail: a down node where nothing is expected, and GpuLost for the wrong GPU."""
    from gpumon.simfaults import Fault
    cases = [matrix.Case("expects nothing, a node is down", (), (Fault("http500", node="gpu-node-2"),), bound=6),
             matrix.Case("expects the wrong GPU", (matrix.Page("GpuLost", "gpu-node-2", 0),),
                         (Fault("drop", node="gpu-node-2", gpu=1),), bound=10)]
    outcomes, _, _ = matrix.run(cases, promtool)
    assert [o.ok for o in outcomes] == [False, False]
    assert outcomes[0].seen[matrix.AT + 6] == ["GpuExporterDown (gpu-node-2)"]
    assert outcomes[1].seen[matrix.AT + 10] == ["GpuLost (gpu-node-2 gpu 1)"]
    assert "GpuLost (gpu-node-2 gpu 0) never fired" in outcomes[1].problems


P, Q = matrix.Page("GpuLost", "n", 0), matrix.Page("GpuXidCritical", "n", 0, "X")


def _judge(timeline, **kw):
    case = matrix.Case("c", (P,), bound=4, at=2, length=12, **kw)
    return matrix_timeline.judge(case, {s: frozenset(p) for s, p in timeline.items()}, matrix.STEP).problems


def test_the_timeline_is_judged_at_every_step():
    """Between the checks of the old matrix (before, at the bound, at the end) a page that flips,
    an extra page, or one that starts too late is still found."""
    ok = {s: {P} for s in range(4, 12)}
    assert _judge(ok) == []
    assert _judge({**ok, 8: set()}) == ["GpuLost (n gpu 0) fired 2 times (40-70s, 90-110s)"]
    assert _judge({**ok, 3: {Q}}) == ["GpuXidCritical (n gpu 0 X) fired, not expected (30-30s)"]
    assert _judge({s: {P} for s in range(7, 12)}) == ["GpuLost (n gpu 0) started at t=70s, later than t=60s"]
    assert _judge({**ok, 1: {P}}) == ["GpuLost (n gpu 0) fired 2 times (10-10s, 40-110s)",
                                      "GpuLost (n gpu 0) fired before the fault (t=10s)",
                                      "just before the fault: GpuLost (n gpu 0), expected nothing"]
    assert _judge({s: {P} for s in range(4, 10)}, clear=8, resolve=1) == [
        "GpuLost (n gpu 0) still fired at t=90s, 10s after the fault cleared at t=80s",
        "at the end (t=110s): nothing, expected GpuLost (n gpu 0)"]


def test_promtools_report_is_read_as_a_timeline():
    report = '''  FAILED:
    expr: "count by (alertname) (ALERTS{alertname!=\\"case-3\\"})", time: 2m5s,
        exp: nil
        got: {Hostname="n", alertname="GpuLost", gpu="0"} 1E+00
             {alertname="GpuMetricAbsent", cluster="a", dcgm_field="X"} 1E+00
'''
    assert matrix_timeline.parse_report(report, matrix.STEP, matrix.Page) == {
        3: {12: frozenset({P, matrix.Page("GpuMetricAbsent", field="X", cluster="a")})}}
