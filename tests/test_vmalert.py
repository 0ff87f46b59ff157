"""The same five causes as tests/test_alertmanager.py on the other engine: vmalert evaluating the
rendered rules against VictoriaMetrics (both Debian packages) scraping the simulated fleet. The
firing pages must be exactly one per cause, as on Prometheus (issue 11: both engines)."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import httpx
import pytest
import yaml

from generator.localprom import WebhookReceiver, free_port, stop_process, wait_ready
from generator.render import render
from generator.simulate import Fleet, Simulator, dumps_faults
from generator.spec import parse_spec
from tests.test_alertmanager import CAUSES, FAST

pytestmark = pytest.mark.skipif(not (shutil.which("victoria-metrics") and shutil.which("vmalert")),
                                reason="victoria-metrics / vmalert not installed")


def _start(cmd: list[str], log: Path) -> subprocess.Popen:
    return subprocess.Popen(cmd, stdout=open(log, "wb"), stderr=subprocess.STDOUT, start_new_session=True)


def _stop(proc: subprocess.Popen) -> None:
    stop_process(proc)


def _wait_http(url: str, proc: subprocess.Popen, log: Path, timeout: float = 60) -> None:
    try:
        wait_ready(proc, url, timeout, url, lambda: log.read_text(errors="replace")[-3000:])
    except RuntimeError as exc:
        pytest.fail(str(exc))


def _pages(vmalert_url: str) -> set[tuple]:
    # vmalert 1.79 answers {"alerts": null} while nothing is pending or firing
    data = httpx.get(f"{vmalert_url}/api/v1/alerts", timeout=5).json()["data"]["alerts"] or []
    return {(a["labels"].get("alertname"), a["labels"].get("Hostname")) for a in data
            if a.get("state") == "firing" and a["labels"].get("severity") in ("critical", "warning")}


def test_vmalert_on_victoriametrics_pages_once_per_cause(tmp_path, root):
    text = (root / "tests/data/validate-spec.yaml").read_text()
    for old, new in FAST.items():
        text = text.replace(old, new)
    spec = parse_spec(text, "fast.yaml")
    (tmp_path / "rules.yaml").write_text(render(spec)["rules/gpumon.rules.yaml"])
    faults = tmp_path / "faults.yaml"
    # vmalert needs somewhere to send alerts; a webhook receiver that accepts anything will do
    with Simulator(Fleet(4, 2, fault_file=faults)) as sim, WebhookReceiver() as sink:
        (tmp_path / "scrape.yml").write_text(yaml.safe_dump({"global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
            "scrape_configs": [{"job_name": "dcgm-exporter", "static_configs": [{"targets": list(sim.targets.values())}]}]}))
        vm_port, va_port = free_port(), free_port()
        vm = _start(["victoria-metrics", f"-httpListenAddr=127.0.0.1:{vm_port}", f"-storageDataPath={tmp_path / 'data'}",
                     f"-promscrape.config={tmp_path / 'scrape.yml'}", "-search.latencyOffset=0s", "-retentionPeriod=1d",
                     "-search.disableCache"], tmp_path / "vm.log")
        va = None
        try:
            vm_url = f"http://127.0.0.1:{vm_port}"
            _wait_http(f"{vm_url}/health", vm, tmp_path / "vm.log")
            deadline = time.monotonic() + 60   # VictoriaMetrics scrapes a few times before vmalert starts
            while time.monotonic() < deadline:
                res = httpx.get(f"{vm_url}/api/v1/query", params={"query": 'count(up{job="dcgm-exporter"} == 1)'},
                                timeout=2).json()["data"]["result"]
                if res and res[0]["value"][1] == "4":
                    break
                time.sleep(0.5)
            else:
                pytest.fail("VictoriaMetrics has no up series after 60 s:\n" + (tmp_path / "vm.log").read_text()[-3000:])
            va = _start(["vmalert", f"-rule={tmp_path / 'rules.yaml'}", f"-datasource.url={vm_url}",
                         f"-remoteWrite.url={vm_url}", "-remoteWrite.flushInterval=1s", "-evaluationInterval=1s", f"-notifier.url={sink.url.rstrip('/')}",
                         f"-httpListenAddr=127.0.0.1:{va_port}"], tmp_path / "vmalert.log")
            va_url = f"http://127.0.0.1:{va_port}"
            _wait_http(f"{va_url}/health", va, tmp_path / "vmalert.log")
            time.sleep(8)   # healthy history first
            assert _pages(va_url) == set(), "a healthy fleet paged on vmalert"
            faults.write_text(dumps_faults([f for f, _ in CAUSES.values()]))
            # rule level: 95 C fires both temperature levels (Alertmanager then mutes the warning)
            want = {exp for _, exp in CAUSES.values()} | {("GpuTemperatureHigh", "gpu-node-4")}
            deadline = time.monotonic() + 60
            while _pages(va_url) != want and time.monotonic() < deadline:
                time.sleep(1)
            time.sleep(3)
            assert _pages(va_url) == want, (tmp_path / "vmalert.log").read_text()[-2000:]
        finally:
            if va is not None:
                _stop(va)
            _stop(vm)
