"""How the live vmalert matrix (tests/matrix_vmlive.py) turns ``ALERTS`` samples into a per-step
timeline: each group's last evaluation before the next step's samples, and a restart's down steps
carried over (no server: the slow part is tests/test_matrix_vmlive.py)."""

from __future__ import annotations

from tests import matrix_vmlive
from tests.matrix import Case, Page

LOST = '{Hostname="gpu-node-2", alertname="GpuLost", gpu="1"}'
GAPS = '{Hostname="gpu-node-2", alertname="GpuMetricIntermittent", dcgm_field="X", gpu="0"}'


def test_a_step_reads_each_groups_last_evaluation_before_the_next_step():
    case = Case("x", (), length=6)
    t0 = 1000
    # the 5 s group: GpuLost fires at the second evaluation of step 1 only, and at the first of step 3 only
    firing = {t0 + 17: [LOST], t0 + 32: [LOST], t0 + 20: [GAPS], t0 + 30: [GAPS]}
    seen = matrix_vmlive.timeline(firing, t0, case, {"GpuMetricIntermittent": 10})
    lost, gaps = Page("GpuLost", "gpu-node-2", 1), Page("GpuMetricIntermittent", "gpu-node-2", 0, "X")
    assert seen == {1: frozenset({lost}), 2: frozenset({gaps}), 3: frozenset({gaps})}


def test_a_step_while_vmalert_is_down_keeps_the_pages_of_the_step_before():
    case = Case("x", (), length=8, restarts=(3,), down=2)
    t0 = 1000
    firing = {t0 + s * 10 + 7: [LOST] for s in (1, 2, 5, 6)}
    seen = matrix_vmlive.timeline(firing, t0, case, {})
    assert sorted(seen) == [1, 2, 3, 4, 5, 6]
    assert matrix_vmlive.down_steps(case) == {3, 4}
