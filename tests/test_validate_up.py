"""Where the server has no targets API (Mimir, Cortex: 404), validate reads the job's targets
from ``up``: only the targets not up and their count travel, not a sample per target. Against a
REAL Prometheus (each build of tests/engines.py) scraping the simulator, with the targets API
answered 404 by the client as those servers do."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gpumon.localprom import LocalPrometheus
from gpumon.promapi import PromClient, PromError
from gpumon.simfaults import Fault
from gpumon.simserve import Simulator
from gpumon.simulate import Fleet
from gpumon.spec import parse_spec
from gpumon.validate import validate

pytestmark = pytest.mark.skipif(not shutil.which("prometheus"), reason="prometheus not installed")

SPEC = parse_spec((Path(__file__).parent / "data" / "validate-spec.yaml").read_text(), "validate-spec.yaml")


class NoTargetsApi(PromClient):
    """A client of a server without ``/api/v1/targets`` (as Mimir and Cortex answer it)."""

    up_samples = 0

    def targets(self, keep=None):
        raise PromError("not-found", self.base + "/api/v1/targets", "404 page not found", 404)

    def query(self, expr, time=None, each=None):
        answer = super().query(expr, time, each)
        if expr.startswith("up{"):
            self.up_samples += len(answer.data)
        return answer


def test_a_down_target_is_found_from_up_without_the_targets_api(engine):
    fleet = Fleet(3, 1, [Fault("http500", node="gpu-node-2")], uuid_salt="validate-up/")
    with Simulator(fleet) as sim, LocalPrometheus({"dcgm-exporter": list(sim.targets.values())},
                                                   binary=engine.prometheus) as prom:
        assert prom.wait_for(lambda: len(prom.query('up{job="dcgm-exporter"}')) == 3, 60), prom.logs()
        with NoTargetsApi(prom.url) as client:
            report, _ = validate(SPEC, client, lookback=60.0, progress=False, checks=("targets",))
    # the one target down and the count of all: not the two healthy targets' samples
    assert client.up_samples == 2
    got = {f.check: f for f in report.findings}
    assert set(got) == {"targets-api-unavailable", "target-down"}, [(f.check, f.message) for f in report.findings]
    down = got["target-down"]
    assert down.subject == sim.targets["gpu-node-2"] and down.message.endswith("is 0"), down.message
