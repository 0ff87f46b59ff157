"""The presence checks once against VictoriaMetrics (Debian package ``victoria-metrics``), which
scrapes the simulator itself (``-promscrape.config``). Started with ``-search.latencyOffset=0s``,
or its newest 30 s of data stay hidden from queries."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from gpumon.localprom import LocalVictoriaMetrics
from gpumon.promapi import PromClient
from gpumon.simfaults import Fault
from gpumon.simpages import gpu_uuid
from gpumon.simserve import Simulator
from gpumon.simulate import Fleet
from gpumon.spec import parse_spec
from gpumon.validate import validate

SPEC_TEXT = (Path(__file__).parent / "data" / "validate-spec.yaml").read_text()

VM = shutil.which("victoria-metrics") or ("/usr/bin/victoria-metrics" if os.path.exists("/usr/bin/victoria-metrics") else None)
pytestmark = pytest.mark.skipif(VM is None, reason="victoria-metrics not installed "
                                "(apt-get install --no-install-recommends victoria-metrics)")


@pytest.fixture(scope="module")
def vm():
    fleet = Fleet(2, 2, [Fault("drop", metric="DCGM_FI_DEV_SM_CLOCK", node="gpu-node-1", gpu=1),
                         Fault("drop", metric="DCGM_FI_DEV_FB_USED", node="gpu-node-2"),
                         # VictoriaMetrics skips NaN samples in queries: this GPU's power looks missing
                         Fault("nan", metric="DCGM_FI_DEV_POWER_USAGE", node="gpu-node-1", gpu=0)])
    with Simulator(fleet) as sim, LocalVictoriaMetrics({"dcgm-exporter": list(sim.targets.values())},
                                                       binary=VM) as server:
        have = server.wait_for(lambda: [r["value"][1] for r in server.query(
            'count(DCGM_FI_DEV_GPU_TEMP{job="dcgm-exporter"})')] == ["4"], 60)
        assert have, "VictoriaMetrics has no data after 60 s:\n" + server.logs()
        time.sleep(3)  # a few more scrapes for the lookback queries
        yield server.url


def test_presence_on_victoriametrics(vm):
    spec = parse_spec(SPEC_TEXT, "<vm>")
    with PromClient(vm) as client:
        report, code = validate(spec, client, lookback=60.0, checks=("presence", "inventory"), progress=False)
    errors = {(f.check, f.subject) for f in report.findings if f.severity == "error"}
    assert errors == {("series-missing", "DCGM_FI_DEV_SM_CLOCK on gpu-node-1"),
                      ("series-missing", "DCGM_FI_DEV_FB_USED on gpu-node-2"),
                      ("series-missing", "DCGM_FI_DEV_POWER_USAGE on gpu-node-1")}, report.findings
    nan = next(f for f in report.findings if f.subject == "DCGM_FI_DEV_POWER_USAGE on gpu-node-1")
    assert "reads NaN looks missing" in nan.hint, nan
    one = next(f for f in report.findings if f.subject == "DCGM_FI_DEV_SM_CLOCK on gpu-node-1")
    assert dict(one.labels)["UUID"] == gpu_uuid("gpu-node-1", 1)
    assert "4 GPUs on 2 nodes" in next(f for f in report.findings if f.check == "gpu-inventory").message
    assert code == 1
