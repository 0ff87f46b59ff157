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


def test_a_restored_page_pending_at_the_first_evaluation_after_a_restart_is_held():
    """vmalert writes a restored alert as pending at its first evaluation after a restart and as
    firing at the next: one page. A restore that failed stays pending: the page ends."""
    case = Case("x", (), length=8, restarts=(3,), down=1)
    t0 = 1000
    lost = Page("GpuLost", "gpu-node-2", 1)
    firing = {t0 + s * 10 + 7: [LOST] for s in (1, 2, 5, 6)}
    # the new vmalert's first evaluation falls late in step 4, its second in step 5
    restored = matrix_vmlive.timeline(firing, t0, case, {}, pending={t0 + 48: [LOST]})
    assert sorted(restored) == [1, 2, 3, 4, 5, 6] and restored[4] == frozenset({lost})
    assert 4 not in matrix_vmlive.timeline(firing, t0, case, {})
    # pending at every evaluation of step 4 and after: no page held past the first step
    failed = matrix_vmlive.timeline({t0 + s * 10 + 7: [LOST] for s in (1, 2)}, t0, case, {},
                                    pending={t0 + s * 10 + 8: [LOST] for s in (4, 5, 6)})
    assert sorted(failed) == [1, 2, 3, 4]
    # a page pending after the restart that did not fire before it is not a page
    assert 4 not in matrix_vmlive.timeline(firing, t0, case, {}, pending={t0 + 48: [GAPS]})


#: one vmalert run's health text from a loaded CI machine (its figures as read from /metrics)
STARVED = """vmalert_alerts_send_errors_total{addr="http://127.0.0.1:55999/api/v2/alerts"} 3
vmalert_iteration_duration_seconds{group="gpumon.exporter", file="r.yaml",quantile="1"} 3.55
vmalert_iteration_duration_seconds{group="gpumon.plausibility", file="r.yaml",quantile="1"} 37.17
vmalert_iteration_missed_total{group="gpumon.presence", file="r.yaml"} 10
vmalert_execution_errors_total{group="gpumon.values", file="r.yaml"} 2"""


def test_a_run_that_could_not_keep_up_is_starved_and_a_refused_query_is_not():
    reasons = matrix_vmlive.starvation(STARVED)
    assert [r.split("{")[0] for r in reasons] == ["vmalert_alerts_send_errors_total",
                                                   "vmalert_iteration_duration_seconds",
                                                   "vmalert_iteration_missed_total"]
    assert "37.17" in reasons[1]
    assert matrix_vmlive.starvation("nothing missed, failed or slow") == []
    assert matrix_vmlive.starvation("/metrics unreadable: ReadTimeout('timed out')")
    assert matrix_vmlive.starvation(STARVED.splitlines()[-1]) == []


def test_an_outcome_is_starved_by_missed_steps_late_samples_or_its_vmalerts():
    case = Case("x", (), length=6)
    verdict = matrix_vmlive.judge(case, {})
    calm = matrix_vmlive.LiveOutcome(case, verdict, health=["nothing missed, failed or slow"])
    assert calm.starved == []
    assert matrix_vmlive.LiveOutcome(case, verdict, missed=[1]).starved == ["no inventory evaluation at steps [1]"]
    assert matrix_vmlive.LiveOutcome(case, verdict, late=6.0).starved
    assert matrix_vmlive.LiveOutcome(case, verdict, late=1.0).starved == []
    assert len(matrix_vmlive.LiveOutcome(case, verdict, health=["ok", STARVED]).starved) == 3


def test_stored_samples_read_as_runs_of_evaluations():
    """A failed scenario prints its stored samples as runs: a hole longer than two evaluations splits
    a run, and a lone sample stands alone."""
    every = matrix_vmlive.EVAL
    assert matrix_vmlive.runs([0, every, 2 * every, 30, 30 + every]) == f"0-{2 * every}, 30-{30 + every}"
    assert matrix_vmlive.runs([10 + 2 * every, 10]) == f"10-{10 + 2 * every}"
    assert matrix_vmlive.runs([10, 11 + 2 * every]) == f"10, {11 + 2 * every}"
    assert matrix_vmlive.runs([]) == "none"


def test_a_replay_keeps_the_first_pass_in_a_warning_cut_to_its_bound():
    """A scenario that passed only on its second pass still shows in the run's summary why the first
    failed: the warning carries the first pass' report, cut to REPLAYED_MAX characters."""
    import warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.warn(matrix_vmlive.Replayed("FAIL x: GpuLost 180-260s, 290s-\n      stored: ..."))
        warnings.warn(matrix_vmlive.Replayed("y" * (matrix_vmlive.REPLAYED_MAX + 50)))
    short, long = (str(w.message) for w in caught)
    assert "FAIL x: GpuLost 180-260s, 290s-" in short and "stored: ..." in short
    assert long.endswith("y\n...") and len(long) < matrix_vmlive.REPLAYED_MAX + 200
