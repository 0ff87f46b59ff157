"""The same five causes as tests/test_alertmanager.py on the other engine: vmalert evaluating the
rendered rules against VictoriaMetrics scraping the simulated fleet, on each build (Debian's 1.79
and the current one, tests/engines.py). The firing pages must be exactly one per cause, as on
Prometheus."""

from __future__ import annotations

import time

from gpumon.localprom import LocalVictoriaMetrics, LocalVmalert, wait_for
from gpumon.loopback import WebhookReceiver
from gpumon.render import render
from gpumon.simfaults import dumps_faults
from gpumon.simserve import Simulator
from gpumon.simulate import Fleet
from gpumon.spec import parse_spec
from tests.test_alertmanager import CAUSES, FAST


def _pages(vmalert: LocalVmalert) -> set[tuple]:
    """(alertname, node) of every firing critical/warning alert."""
    data = vmalert.alerts()
    return {(a["labels"].get("alertname"), a["labels"].get("Hostname")) for a in data
            if a.get("state") == "firing" and a["labels"].get("severity") in ("critical", "warning")}


def test_vmalert_on_victoriametrics_pages_once_per_cause(tmp_path, root, vm_engine):
    text = (root / "tests/data/validate-spec.yaml").read_text()
    for old, new in FAST.items():
        text = text.replace(old, new)
    # FAST sets slow_group_interval 5s: the blank's page comes from gpumon.plausibility, whose alerts
    # on vmalert read the group's records of the evaluation before (written back through
    # VictoriaMetrics), so at 1m the page would take two intervals plus vmalert's start offset
    spec = parse_spec(text, "fast.yaml")
    assert spec.alerts.slow_group_interval == 5
    (tmp_path / "rules.yaml").write_text(render(spec)["rules/gpumon.rules.yaml"])
    faults = tmp_path / "faults.yaml"
    # vmalert needs somewhere to send alerts; a webhook receiver that accepts anything will do
    with Simulator(Fleet(4, 2, fault_file=faults)) as sim, WebhookReceiver() as sink:
        with LocalVictoriaMetrics({"dcgm-exporter": list(sim.targets.values())},
                                  extra_args=["-search.disableCache"], binary=vm_engine.victoria_metrics) as vm:
            # VictoriaMetrics scrapes a few times before vmalert starts
            scraped = vm.wait_for(lambda: [r["value"][1] for r in vm.query('count(up{job="dcgm-exporter"} == 1)')] == ["4"])
            assert scraped, "VictoriaMetrics has no up series after 60 s:\n" + vm.logs()
            # the current vmalert evaluates -rule.evalDelay (30 s) in the past by default, matching
            # VictoriaMetrics' default -search.latencyOffset; LocalVictoriaMetrics sets that to 0
            delay = ["-rule.evalDelay=0s"] if vm_engine.current else []
            with LocalVmalert([tmp_path / "rules.yaml"], vm.url, sink.url, binary=vm_engine.vmalert,
                              extra_args=delay) as va:
                time.sleep(8)   # healthy history first
                assert _pages(va) == set(), "a healthy fleet paged on vmalert"
                faults.write_text(dumps_faults([f for f, _ in CAUSES.values()]))
                # rule level: 95 C fires both temperature levels (Alertmanager then mutes the warning)
                want = {exp for _, exp in CAUSES.values()} | {("GpuTemperatureHigh", "gpu-node-4")}
                wait_for(lambda: _pages(va) == want, 60, 1)
                time.sleep(3)
                assert _pages(va) == want, va.logs()[-2000:]
