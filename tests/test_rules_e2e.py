"""End to end: the rendered rules loaded into a real Prometheus scraping 2 nodes x 4 GPUs.

A healthy fleet fires nothing; when one GPU's temperature series disappears, the per-GPU
missing-metric alert fires for exactly that GPU; when that node's target then goes down, only
the exporter-down alert remains (no per-GPU pages for an outage).
"""

from __future__ import annotations

import httpx
import pytest

from gpumon.localprom import LocalPrometheus
from gpumon.loopback import ExpositionServer
from gpumon.render import render
from gpumon.spec import load_spec
from gpumon.writer import write

from .calm import assert_quiet
from .conftest import ROOT
from .dcgm_text import exposition, uuid

FAST = {  # the bundled spec with second-scale intervals, so the test runs in seconds
    "scrape_interval: 15s": "scrape_interval: 1s", "scrape_timeout: 10s": "scrape_timeout: 1s",
    "collect_interval: 30s": "collect_interval: 1s", "  for: 5m\n": "  for: 2s\n", "slow_group_interval: 1m": "slow_group_interval: 2s",
    "gaps_group_interval: 3m": "gaps_group_interval: 2s",
    "inventory_lookback: 1h": "inventory_lookback: 4m", "gap_window: 30m": "gap_window: 1m",
    "flapping_window: 10m": "flapping_window: 30s", "frozen_window: 10m": "frozen_window: 30s",
}


@pytest.fixture(scope="module")
def fleet(tmp_path_factory, engine):
    folder = tmp_path_factory.mktemp("e2e")
    text = (ROOT / "gpumon.yaml").read_text()
    for old, new in FAST.items():
        assert old in text
        text = text.replace(old, new)
    (folder / "gpumon.yaml").write_text(text)
    write(render(load_spec(folder / "gpumon.yaml")), folder / "out")
    state = {"drop": set(), "down": False}

    def node_a():
        return exposition("gpu-node-a", 1, 4)

    def node_b():
        return (500, "error\n") if state["down"] else exposition("gpu-node-b", 2, 4, state["drop"])

    with ExpositionServer(node_a) as a, ExpositionServer(node_b) as b, LocalPrometheus(
            {"dcgm-exporter": [a.address, b.address]}, [folder / "out/rules/gpumon.rules.yaml"],
            binary=engine.prometheus) as prom:
        yield prom, state, b


def alerts(prom, state: str | None = None) -> list[dict]:
    sel = f'ALERTS{{alertstate="{state}"}}' if state else "ALERTS"
    return [r["metric"] for r in prom.query(sel)]


def test_partial_loss_fires_for_exactly_that_gpu_then_target_down_pages_once(fleet):
    prom, state, node_b = fleet
    assert prom.wait_for(lambda: prom.query('job:gpumon_gpu_devices_reporting:count == 8'), 60), prom.logs()
    # Healthy: every rule has evaluated on full data; nothing pending or firing.
    assert prom.wait_for(lambda: prom.query('job_dcgm_field:gpumon_coverage:ratio{dcgm_field="DCGM_FI_DEV_GPU_TEMP"} == 1'), 30)
    assert prom.settle(), "a rule group did not evaluate after the fleet was healthy"
    assert_quiet(prom, lambda: alerts(prom))

    state["drop"] = {("DCGM_FI_DEV_GPU_TEMP", 2)}
    assert prom.wait_for(lambda: alerts(prom, "firing"), 30), "no alert after the GPU lost its temperature"
    prom.wait_for(lambda: False, 3)  # let the other rules evaluate on the new data too
    fired = alerts(prom)
    assert fired == [{
        "__name__": "ALERTS", "alertname": "GpuMetricMissing", "alertstate": "firing", "job": "dcgm-exporter",
        "Hostname": "gpu-node-b", "UUID": uuid(2, 2), "gpu": "2", "dcgm_field": "DCGM_FI_DEV_GPU_TEMP",
        "namespace": "monitoring", "severity": "warning",
    }]

    state["down"] = True
    assert prom.wait_for(lambda: any(a["alertname"] == "GpuExporterDown" and a["alertstate"] == "firing"
                                     for a in alerts(prom)), 30)
    prom.wait_for(lambda: False, 3)
    fired = alerts(prom)
    assert [(a["alertname"], a.get("instance")) for a in fired] == [("GpuExporterDown", node_b.address)], fired
    # the down target's alert names its node, so Alertmanager mutes that node's GPU alerts by it
    assert fired[0]["Hostname"] == "gpu-node-b"


#: the server's per-query sample limit (``--query.max-samples``, which rule evaluations obey too):
#: above every read of the healthy 8-GPU fleet within the test's 2 minutes of history, below the
#: inventory's read of its 8 required fields once one node serves :data:`GROWN` GPUs (on 2.42 and
#: 3.16 alike; at 150 GPUs the inventory still fits: the engine's peak is not all 8 fields' samples)
MAX_SAMPLES = 1000
GROWN = 300


def test_failing_inventory_rule_pages_nothing_and_a_real_loss_still_pages(tmp_path_factory, engine):
    """The inventory rule fails to evaluate while the rest of its group runs (its query exceeds the
    server's sample limit; in the field: a query limit, or the store a Thanos Ruler queries is
    down). Its records stay visible, unchanged, for the lookback and then vanish: the inventory
    looks empty, as when every required field is gone, and GpuMetricAbsent paged for all 8 fields.
    Now nothing pages at any moment of the failure (the ruler's own rule-failure alert names it);
    once the rule evaluates again, a required field really gone from every GPU still pages."""
    folder = tmp_path_factory.mktemp("rule-failure")
    text = (ROOT / "gpumon.yaml").read_text()
    for old, new in FAST.items():
        text = text.replace(old, new)
    (folder / "gpumon.yaml").write_text(text)
    write(render(load_spec(folder / "gpumon.yaml")), folder / "out")
    state = {"gpus": 4, "drop": set()}

    def node_a():
        return exposition("gpu-node-a", 1, 4, state["drop"])

    def node_b():
        return exposition("gpu-node-b", 2, state["gpus"], state["drop"])

    with ExpositionServer(node_a) as a, ExpositionServer(node_b) as b, LocalPrometheus(
            {"dcgm-exporter": [a.address, b.address]}, [folder / "out/rules/gpumon.rules.yaml"], binary=engine.prometheus,
            extra_args=[f"--query.max-samples={MAX_SAMPLES}", "--query.lookback-delta=10s"]) as prom:
        def failing() -> set[str]:
            groups = httpx.get(f"{prom.url}/api/v1/rules", timeout=10).json()["data"]["groups"]
            return {r["name"] for g in groups for r in g["rules"] if r.get("health") == "err"}

        seen: list[dict] = []
        # the empty-inventory branch is armed once the inventory group has run for a minute (fresh.SETTLE)
        assert prom.wait_for(lambda: prom.query('group(rule_group:gpumon_evaluation:timestamp offset 1m)'), 90)
        assert prom.settle() and not failing(), failing()
        assert_quiet(prom, lambda: alerts(prom), observe=3)

        state["gpus"] = GROWN
        assert prom.wait_for(lambda: "job_gpu:gpumon_inventory:group" in failing(), 20), failing()

        def paged() -> list[dict]:
            # on a loaded machine the grown node's page (generated in this process) can miss the 1 s
            # scrape timeout: its exporter alerts are about that scrape, not the rule under test
            return [a for a in alerts(prom)
                    if not (a["alertname"].startswith("GpuExporter") and a.get("Hostname") == "gpu-node-b")]

        # the lookback (10 s) for the records to vanish, the alerts' `for` (2 s), and margin, watched throughout
        assert not prom.wait_for(lambda: seen.extend(paged()) or seen, 20, 0.25), \
            f"fired while the inventory rule fails ({sorted(failing())}): {seen}"
        assert "rule_group:gpumon_evaluation:timestamp" not in failing()

        state["gpus"], state["drop"] = 4, {("DCGM_FI_DEV_SM_CLOCK", g) for g in range(4)}
        assert prom.wait_for(lambda: "job_gpu:gpumon_inventory:group" not in failing(), 20), failing()
        assert prom.wait_for(lambda: alerts(prom, "firing"), 30), "no page for a field gone from every GPU"
        prom.wait_for(lambda: False, 3)
        assert [(a["alertname"], a.get("dcgm_field")) for a in alerts(prom)] == [("GpuMetricAbsent", "DCGM_FI_DEV_SM_CLOCK")]
