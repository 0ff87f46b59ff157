"""The presence checks once against VictoriaMetrics (Debian package ``victoria-metrics``), which
scrapes the simulator itself (``-promscrape.config``). Started with ``-search.latencyOffset=0s``,
or its newest 30 s of data stay hidden from queries."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import httpx
import pytest
import yaml

from generator.localprom import free_port, stop_process
from generator.promapi import PromClient
from generator.simulate import Fault, Fleet, Simulator, gpu_uuid
from generator.spec import parse_spec
from generator.validate import validate

SPEC_TEXT = (Path(__file__).parent / "data" / "validate-spec.yaml").read_text()

VM = shutil.which("victoria-metrics") or ("/usr/bin/victoria-metrics" if os.path.exists("/usr/bin/victoria-metrics") else None)
pytestmark = pytest.mark.skipif(VM is None, reason="victoria-metrics not installed "
                                "(apt-get install --no-install-recommends victoria-metrics)")


@pytest.fixture(scope="module")
def vm(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("vm")
    fleet = Fleet(2, 2, [Fault("drop", metric="DCGM_FI_DEV_SM_CLOCK", node="gpu-node-1", gpu=1),
                         Fault("drop", metric="DCGM_FI_DEV_FB_USED", node="gpu-node-2")])
    with Simulator(fleet) as sim:
        cfg = tmp / "scrape.yml"
        cfg.write_text(yaml.safe_dump({"global": {"scrape_interval": "1s"}, "scrape_configs": [
            {"job_name": "dcgm-exporter", "static_configs": [{"targets": list(sim.targets.values())}]}]}))
        port = free_port()
        log = open(tmp / "vm.log", "wb")
        proc = subprocess.Popen([VM, f"-httpListenAddr=127.0.0.1:{port}", f"-storageDataPath={tmp / 'data'}",
                                 f"-promscrape.config={cfg}", "-search.latencyOffset=0s", "-retentionPeriod=1d"],
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                assert proc.poll() is None, (tmp / "vm.log").read_text()[-3000:]
                try:
                    r = httpx.get(f"{url}/api/v1/query", params={"query": 'count(DCGM_FI_DEV_GPU_TEMP{job="dcgm-exporter"})'},
                                  timeout=2)
                    res = r.json()["data"]["result"]
                    if res and res[0]["value"][1] == "4":
                        break
                except (httpx.HTTPError, ValueError, KeyError):
                    pass
                time.sleep(0.5)
            else:
                pytest.fail("VictoriaMetrics has no data after 60 s:\n" + (tmp / "vm.log").read_text()[-3000:])
            time.sleep(3)  # a few more scrapes for the lookback queries
            yield url
        finally:
            stop_process(proc)
            log.close()


def test_presence_on_victoriametrics(vm):
    spec = parse_spec(SPEC_TEXT, "<vm>")
    with PromClient(vm) as client:
        report, code = validate(spec, client, lookback=60.0, checks=("presence", "inventory"), progress=False)
    errors = {(f.check, f.subject) for f in report.findings if f.severity == "error"}
    assert errors == {("series-missing", "DCGM_FI_DEV_SM_CLOCK on gpu-node-1"),
                      ("series-missing", "DCGM_FI_DEV_FB_USED on gpu-node-2")}, report.findings
    one = next(f for f in report.findings if f.subject == "DCGM_FI_DEV_SM_CLOCK on gpu-node-1")
    assert dict(one.labels)["UUID"] == gpu_uuid("gpu-node-1", 1)
    assert "4 GPUs on 2 nodes" in next(f for f in report.findings if f.check == "gpu-inventory").message
    assert code == 1
