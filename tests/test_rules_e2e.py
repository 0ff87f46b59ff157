"""End to end: the rendered rules loaded into a real Prometheus scraping 2 nodes x 4 GPUs.

A healthy fleet fires nothing; when one GPU's temperature series disappears, the per-GPU
missing-metric alert fires for exactly that GPU; when that node's target then goes down, only
the exporter-down alert remains (no per-GPU pages for an outage).
"""

from __future__ import annotations

import pytest

from gpumon.localprom import LocalPrometheus
from gpumon.loopback import ExpositionServer
from gpumon.render import render
from gpumon.spec import load_spec
from gpumon.writer import write

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
    seen: list[dict] = []  # what was pending or firing, kept for the message (it may resolve at once)
    assert not prom.wait_for(lambda: seen.extend(alerts(prom)) or seen, 6), f"healthy fleet fired: {seen}"

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
