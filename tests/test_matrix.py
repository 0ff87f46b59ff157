"""The fault-scenario matrix (issue 11): every scenario of tests/matrix_cases.py pages exactly
the expected alerts, each once, within its bound, and nothing else; Prometheus' rule engine
(promtool) evaluates the rendered rules on the simulated fleet. docs/matrix.md is its real output
(``python -m tests.matrix``)."""

from __future__ import annotations

from generator.simulate import FAULT_KINDS
from tests import matrix
from tests.matrix_cases import CASES


def test_matrix_covers_every_fault_kind_and_enough_scenarios():
    kinds = {f.kind for c in CASES for f in c.faults + c.initial + tuple(x for _, more in c.later for x in more)}
    assert kinds == set(FAULT_KINDS), set(FAULT_KINDS) - kinds
    assert len(CASES) >= 25 and len({c.name for c in CASES}) == len(CASES)


def test_every_scenario_pages_exactly_as_expected(promtool):
    outcomes, seconds, log = matrix.run(CASES, promtool)
    print(f"\n{matrix.table(outcomes)}\n{len(outcomes)} scenarios in {seconds:.1f}s")
    failed = [o.case.name for o in outcomes if not o.ok]
    assert not failed, (failed, log[-6000:])


def test_a_wrong_expectation_fails(promtool):
    """The matrix can fail: a down node where nothing is expected, and GpuLost for the wrong GPU."""
    from generator.simulate import Fault
    cases = [matrix.Case("expects nothing, a node is down", (), (Fault("http500", node="gpu-node-2"),), bound=6),
             matrix.Case("expects the wrong GPU", (matrix.Page("GpuLost", "gpu-node-2", 0),),
                         (Fault("drop", node="gpu-node-2", gpu=1),), bound=10)]
    outcomes, _, _ = matrix.run(cases, promtool)
    assert [o.ok for o in outcomes] == [False, False]
    assert outcomes[0].seen[matrix.AT + 6] == ['{Hostname="gpu-node-2", alertname="GpuExporterDown"}']
    assert outcomes[1].seen[matrix.AT + 10] == ['{Hostname="gpu-node-2", alertname="GpuLost", gpu="1"}']
