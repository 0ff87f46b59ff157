"""The matrix through live Alertmanagers (tests/live_alerting.py): each live engine — Prometheus
2.42 and 3.x, vmalert 1.79 and the current vmalert on their VictoriaMetrics — evaluates the
rendered rules on the simulated fleet with six causes at once and sends its real firing alerts to
Alertmanager 0.25 and the current Alertmanager, both with the rendered route and inhibit rules.
Each cause makes exactly one notification group, on every engine and every Alertmanager; no page
ends and starts again; the inhibited warning is held, not lost; the lost GPUs are still known after
the inventory lookback, from the engine's own earlier result."""

from __future__ import annotations

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


def test_no_page_ends_and_starts_again(live):
    """A page notified with two ``startsAt`` ended and fired again: two pages for one cause (the
    short group_interval of the test notifies each start); :data:`live_alerting.OPEN_FLIPS` aside."""
    for d in live.deliveries:
        twice = {(dict(k)["alertname"], dict(k).get("Hostname")): v for k, v in d.starts().items() if len(v) > 1}
        assert set(twice) <= set(live_alerting.OPEN_FLIPS), (d.am.id, twice)


def test_every_cause_still_pages_at_the_end(live):
    """Every cause is still active at the end, past every window of the rules (a lost GPU stays
    paged past the inventory lookback; bus-off stays one XID page past the XID record's window)."""
    for d in live.deliveries:
        active = {(a["labels"]["alertname"], a["labels"].get("Hostname")) for a in d.alerts
                  if a["status"]["state"] == "active"}
        # GpuExporterDown of gpu-node-3 lost its node name (OPEN_GROUPS): the one without it stands in
        want = {c.group for c in live_alerting.CAUSES} - {("GpuExporterDown", "gpu-node-3")} | {("GpuExporterDown", None)}
        assert want <= active, (d.am.id, sorted(active, key=str))


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
