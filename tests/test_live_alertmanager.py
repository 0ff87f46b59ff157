"""The matrix through live Alertmanagers (tests/live_alerting.py): each live engine — Prometheus
2.42 and 3.x, vmalert 1.79 and the current vmalert on their VictoriaMetrics — evaluates the
rendered rules on the simulated fleet with seven causes at once and sends its real firing alerts to
Alertmanager 0.25 and the current Alertmanager, both with the rendered route and inhibit rules.
Each cause makes exactly one notification group, on every engine and every Alertmanager; no page
ends and starts again; the inhibited warning is held, not lost; the lost GPUs are still known after
the inventory lookback, from the engine's own earlier result."""

from __future__ import annotations

import subprocess

import pytest

from tests import live_alerting
from tests.engines import alertmanager_engines, prometheus_engines, vm_engines

pytestmark = pytest.mark.slow


def _live_params():
    """One param per live engine: each Prometheus and each VictoriaMetrics + vmalert build (a
    missing build is a param that fails, as in tests/conftest.py)."""
    out = []
    for engines, what in ((prometheus_engines, "prometheus"), (vm_engines, "vm")):
        try:
            out += [pytest.param(e, id=e.id) for e in engines()]
        except FileNotFoundError as exc:
            out.append(pytest.param(exc, id=f"{what}-missing"))
    return out


@pytest.fixture(scope="module", params=_live_params())
def live(request) -> live_alerting.LiveRun:
    if isinstance(request.param, Exception):
        pytest.fail(str(request.param))
    try:
        ams = alertmanager_engines()
    except FileNotFoundError as exc:
        pytest.fail(str(exc))
    result = live_alerting.run(request.param, ams)
    print(f"\n{result.engine}: " + ", ".join(f"{k} {v:.1f}s" for k, v in result.seconds.items()))
    print(f"{result.engine}: first notified (s after the faults) " + ", ".join(
        f"{name} {node or ''} {t}" for (name, node), t in sorted(result.first_notified.items(), key=lambda x: x[1])))
    return result


def test_one_notification_group_per_cause(live):
    """One group per cause, and no other but the open defects (:data:`live_alerting.OPEN_GROUPS`)."""
    want = sorted({c.group for c in live_alerting.CAUSES} | set(live_alerting.OPEN_GROUPS), key=str)
    for d in live.deliveries:
        got = sorted(set(d.groups().values()), key=str)
        assert got == want, (d.am.id, got, [a["metric"] for a in live.queries["firing"]], live.log)
        assert len(d.groups()) == len(want), (d.am.id, d.groups())


def test_the_open_defects_still_show(live):
    """Each open defect still makes its extra group: when one no longer does, it is fixed and its
    entry leaves :data:`live_alerting.OPEN_GROUPS` (then the test above holds one group per cause)."""
    for d in live.deliveries:
        assert set(live_alerting.OPEN_GROUPS) <= set(d.groups().values()), (d.am.id, d.groups())


def _open_flips(live) -> set[tuple]:
    """The pages :data:`live_alerting.OPEN_FLIPS` lists for this run's engine."""
    return {k for k, (engines, _) in live_alerting.OPEN_FLIPS.items() if live.engine in engines}


def test_no_page_ends_and_starts_again(live):
    """A page notified with two ``startsAt`` ended and fired again: two pages for one cause (the
    short group_interval of the test notifies each start); :data:`live_alerting.OPEN_FLIPS` aside.

    A page on a node one of whose scrapes failed during the run is left out: a failed scrape marks
    every series of the target stale, so every engine ends its value alerts then (the simulator
    answers in the test process, and on a loaded machine a 1 s scrape can time out)."""
    for d in live.deliveries:
        twice = {(dict(k)["alertname"], dict(k).get("Hostname")): v for k, v in d.starts().items() if len(v) > 1}
        unexplained = {k for k in twice if k[1] not in live.failed_scrapes} - _open_flips(live)
        assert not unexplained, (d.am.id, twice, "failed scrapes on", live.failed_scrapes)
        if twice:
            print(f"{live.engine} {d.am.id}: pages started twice {sorted(twice, key=str)}; "
                  f"failed scrapes on {sorted(live.failed_scrapes)}")


def test_every_cause_still_pages_at_the_end(live):
    """Every cause is still active at the end, past every window of the rules (a lost GPU stays
    paged past the inventory lookback; bus-off stays one XID page past the XID record's window; an
    exporter down past the lookback keeps its node name)."""
    for d in live.deliveries:
        active = {(a["labels"]["alertname"], a["labels"].get("Hostname")) for a in d.alerts
                  if a["status"]["state"] == "active"}
        assert {c.group for c in live_alerting.CAUSES} - _open_flips(live) <= active, (d.am.id, sorted(active, key=str))


def test_the_inhibited_warning_is_suppressed_not_lost(live):
    for d in live.deliveries:
        muted = [a for a in d.alerts if a["labels"]["alertname"] in live_alerting.MUTED]
        assert muted and all(a["status"]["state"] == "suppressed" and a["status"]["inhibitedBy"] for a in muted), \
            (d.am.id, muted)


def test_lost_gpus_are_known_from_the_engines_own_last_result(live):
    """Past the inventory lookback the inventory no longer has the lost GPUs (node 1 GPU 0 off the
    bus, node 4 GPU 1 lost), so ``job_gpu:gpumon_known:group`` holds them only through its own
    last value (``last_over_time`` of itself): the engine reads back what it wrote."""
    lost = {("gpu-node-1", "0"), ("gpu-node-4", "1")}
    inventory = {(r["metric"]["Hostname"], r["metric"]["gpu"]) for r in live.queries["inventory in lookback"]}
    known = {(r["metric"]["Hostname"], r["metric"]["gpu"]) for r in live.queries["known lost"]}
    assert not lost & inventory, inventory
    assert lost <= known, (known, live.log)
    xid = {(r["metric"]["Hostname"], r["metric"]["gpu"]) for r in live.queries["xid lost"]}
    assert xid == {("gpu-node-1", "0")}, xid


def _promtool_test(tmp_path, promtool, rules: list[dict], tests: list[dict]) -> None:
    """Run ``tests`` (promtool test groups) on ``rules`` (rendered rules, one group)."""
    import yaml
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": [{"name": "one", "rules": rules}]}))
    doc = {"rule_files": ["rules.yaml"], "evaluation_interval": "15s", "tests": tests}
    (tmp_path / "one.test.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    proc = subprocess.run([promtool, "test", "rules", "one.test.yaml"], cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _rendered(default_render, predicate) -> dict:
    import yaml
    groups = yaml.safe_load(default_render["rules/gpumon.rules.yaml"])["groups"]
    return next(r for g in groups for r in g["rules"] if predicate(r))


def test_the_xid_page_holds_while_the_xid_record_may_take_over(tmp_path, default_render, promtool):
    """The flip the live runs showed, made deterministic: GpuXidCritical alone (its group may
    evaluate after the scrape that marked the XID stale and before job_gpu:gpumon_xid_lost:max, the
    record that keeps the page while the GPU is gone, is recorded, and VictoriaMetrics makes that
    record's new series readable seconds after vmalert writes it), with no such record yet. The page
    holds the XID for as long as the record reads it (8 sample intervals, 4 minutes with the
    bundled spec's 30 s collect interval): still firing 3.5 minutes after the stale marker, ended a
    minute after the hold (nothing holds it)."""
    rule = _rendered(default_render, lambda r: r.get("alert") == "GpuXidCritical")
    series = ('DCGM_FI_DEV_XID_ERRORS{job="dcgm-exporter",Hostname="n1",UUID="GPU-1",gpu="0",err_code="79",'
              'err_msg="GPU has fallen off the bus"}')
    firing = 'count(ALERTS{alertname="GpuXidCritical",alertstate="firing"})'
    one = [{"labels": "{}", "value": 1}]
    _promtool_test(tmp_path, promtool, [rule], [{
        "interval": "15s", "input_series": [{"series": series, "values": "79 79 79 stale"}],
        "promql_expr_test": [{"expr": firing, "eval_time": "30s", "exp_samples": one},
                             {"expr": firing, "eval_time": "50s", "exp_samples": one},
                             {"expr": firing, "eval_time": "255s", "exp_samples": one},
                             {"expr": firing, "eval_time": "330s", "exp_samples": []}]}])


def test_a_missing_set_readable_as_of_an_earlier_evaluation_still_pages(tmp_path, default_render, promtool):
    """vmalert reads what it recorded back from VictoriaMetrics, where one evaluation's heartbeat
    can be readable before the missing set it closes (several remote writes, each searchable
    seconds after it arrives): GpuNodeMetricMissing's condition, with the node's missing set 5 s
    older than the heartbeat, still holds (the live run on vmalert 1.151 saw the page end for 4 s
    and start again); with the set 25 s older (a series left from before a restart) it does not."""
    rule = _rendered(default_render, lambda r: r.get("alert") == "GpuNodeMetricMissing"
                     and r["labels"]["dcgm_field"] == "DCGM_FI_DEV_GPU_TEMP")
    gpus = [("n1", "GPU-1", "0"), ("n1", "GPU-2", "1"), ("n2", "GPU-3", "0")]
    inv = [{"series": f'job_gpu:gpumon_inventory:group{{job="dcgm-exporter",Hostname="{n}",UUID="{u}",gpu="{g}"}}',
            "values": "1x40"} for n, u, g in gpus]
    missing = [{"series": f'job_gpu:dcgm_field_missing:group{{job="dcgm-exporter",Hostname="{n}",UUID="{u}",gpu="{g}",'
                          f'dcgm_field="DCGM_FI_DEV_GPU_TEMP"}}', "values": "1x20"} for n, u, g in gpus[:2]]
    # the per-node counts the inventory group records with the inventory
    counts = [{"series": f'job_node:gpumon_inventory:count{{job="dcgm-exporter",Hostname="{n}"}}', "values": f"{k}x40"}
              for n, k in (("n1", 2), ("n2", 1))]
    beat = [{"series": 'rule_group:gpumon_evaluation:timestamp{rule_group="gpumon.inventory"}', "values": "0+5x40"}]
    node = [{"labels": '{job="dcgm-exporter",Hostname="n1"}', "value": 1}]
    _promtool_test(tmp_path, promtool, [rule], [{
        "interval": "5s", "input_series": inv + counts + missing + beat,
        # the set's last sample at 100 s; the heartbeat's at 105 s, then at 125 s
        "promql_expr_test": [{"expr": rule["expr"], "eval_time": "99s", "exp_samples": node},
                             {"expr": rule["expr"], "eval_time": "107s", "exp_samples": node},
                             {"expr": rule["expr"], "eval_time": "127s", "exp_samples": []}]}])
