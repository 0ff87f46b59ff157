"""A healthy simulated fleet pages nothing, not even at full load: the bundled spec's rules in a
real Prometheus scraping :mod:`gpumon.simulate` GPUs, one of them pinned at 100 % utilisation
(a busy GPU is a healthy GPU). Nothing may be pending or firing once every rule group has
evaluated on the fleet's data."""

from __future__ import annotations

import hashlib
import math
import time

from gpumon.localprom import LocalPrometheus
from gpumon.render import render
from gpumon.simserve import Simulator
from gpumon.simulate import Fleet
from gpumon.spec import load_spec
from gpumon.writer import write

from .calm import assert_quiet
from .conftest import ROOT
from .test_rules_e2e import FAST


def busy_clock(node: str = "gpu-node-1", gpu: int = 0):
    """A clock at which the simulator's ``node``/``gpu`` reads its peak utilisation (100 %) and stays
    there for the test (its wave has a period of about 6 minutes), advancing with real time."""
    seed = int(hashlib.sha1(f"{node}/{gpu}/DCGM_FI_DEV_GPU_UTIL".encode()).hexdigest()[:8], 16)
    phase = (seed % 1000) / 1000 * 2 * math.pi
    peak = 60 * (math.pi / 2 - phase + 2 * math.pi * 10_000)   # sin(t/60 + phase) = 1
    start = time.time()
    return lambda: peak + (time.time() - start)


def test_a_busy_healthy_fleet_has_no_pending_or_firing_alert(tmp_path, engine):
    text = (ROOT / "gpumon.yaml").read_text()
    for old, new in FAST.items():
        text = text.replace(old, new)
    (tmp_path / "gpumon.yaml").write_text(text)
    write(render(load_spec(tmp_path / "gpumon.yaml")), tmp_path / "out")
    fleet = Fleet(2, 4, clock=busy_clock())
    node = fleet.node("gpu-node-1")
    assert fleet.reading(node, 0, "DCGM_FI_DEV_GPU_UTIL", fleet.clock()) >= 99
    with Simulator(fleet) as sim, LocalPrometheus({"dcgm-exporter": list(sim.targets.values())},
                                                  [tmp_path / "out/rules/gpumon.rules.yaml"],
                                                  binary=engine.prometheus) as prom:
        assert prom.wait_for(lambda: prom.query("job:gpumon_gpu_devices_reporting:count == 8"), 60), prom.logs()
        assert prom.wait_for(lambda: prom.query('max(DCGM_FI_DEV_GPU_UTIL) >= 99'), 10)
        assert prom.settle(), "a rule group did not evaluate on the fleet's data"
        assert_quiet(prom, lambda: [r["metric"] for r in prom.query("ALERTS")])
