"""validate counts GPUs as physical devices (distinct UUID), not as series label sets, against a
REAL Prometheus (each build of tests/engines.py) scraping the simulator:

* MIG instances of one GPU are one GPU (the inventory, the fleet-wide ``series-missing`` and the
  ``optional-absent`` counts);
* an exporter pod replaced by one at a new address, whose series carry the new pod's host name,
  reports the same UUIDs: one GPU, no ``duplicate-gpu`` while both targets' samples are in the
  3-scrape window, and no ``node-lost`` for the old name once they are not;
* one GPU scraped by two targets at the same time is still one GPU in the inventory, and a
  ``duplicate-gpu`` finding of its own.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from gpumon.localprom import LocalPrometheus
from gpumon.loopback import ExpositionServer
from gpumon.promapi import PromClient
from gpumon.simfaults import Fault
from gpumon.simserve import Simulator
from gpumon.simulate import Fleet
from gpumon.spec import parse_spec
from gpumon.validate import validate

pytestmark = pytest.mark.skipif(not shutil.which("prometheus"), reason="prometheus not installed")

SPEC = parse_spec((Path(__file__).parent / "data" / "validate-spec.yaml").read_text(), "validate-spec.yaml")
#: a field every GPU and MIG instance reports (``mig: instance``), dropped fleet-wide
FB_USED = "DCGM_FI_DEV_FB_USED"


def _validate(prom: LocalPrometheus, **kw):
    with PromClient(prom.url) as client:
        report, _ = validate(SPEC, client, lookback=kw.pop("lookback", 60.0), progress=False, **kw)
    return report


def _one(report, check: str):
    found = [f for f in report.findings if f.check == check]
    assert len(found) == 1, (check, [(f.check, f.message) for f in report.findings])
    return found[0]


def _renamed(fleet: Fleet, node: str, host: str) -> ExpositionServer:
    """``node``'s exporter as a pod whose series carry its own host name ``host``."""
    def body():
        status, text = fleet.page(node)
        return status, text.replace(f'Hostname="{node}"', f'Hostname="{host}"')
    return ExpositionServer(body)


def _wait_scraped(prom: LocalPrometheus, count: int, job: str = "dcgm-exporter") -> None:
    assert prom.wait_for(lambda: len(prom.query(f'count_over_time(up{{job="{job}"}}[1m]) >= 5')) == count, 90), \
        prom.logs()


def test_mig_instances_count_once(engine):
    """2 nodes x 2 GPUs, one GPU in 3 MIG instances: 4 GPUs everywhere validate counts them."""
    fleet = Fleet(2, 2, [Fault("mig", node="gpu-node-2", gpu=1, instances=3), Fault("drop", metric=FB_USED)],
                  uuid_salt="devices-mig/")
    with Simulator(fleet) as sim, LocalPrometheus({"dcgm-exporter": list(sim.targets.values())},
                                                   binary=engine.prometheus) as prom:
        _wait_scraped(prom, 2)
        report = _validate(prom, checks=("presence", "optional", "inventory", "duplicates"))
    inventory = _one(report, "gpu-inventory")
    assert inventory.message.startswith("4 GPUs on 2 nodes:"), inventory.message
    assert "gpu-node-2: 2 x" in inventory.message
    missing = [f for f in report.findings if f.check == "series-missing" and FB_USED in f.subject]
    assert len(missing) == 1 and f"{FB_USED} is absent on all 4 GPUs of 2 healthy target(s)" in missing[0].message, \
        [f.message for f in missing]
    # the listing still names every MIG instance (3 of gpu-node-2's GPU 1)
    assert missing[0].message.count("MIG") == 3
    optional = [f for f in report.findings if f.check == "optional-absent"]
    assert optional and all("none of the 4 GPUs" in f.message for f in optional), [f.message for f in optional]
    assert not [f for f in report.findings if f.check == "duplicate-gpu"]


def test_a_replaced_exporter_pod_is_the_same_gpus(engine):
    """gpu-node-1's exporter pod is replaced: new address, series labelled with the new pod's host
    name. Right after (both pods' samples within the 3-scrape window) and once the old samples
    are out of it, validate sees 4 GPUs, no duplicate and nothing lost."""
    fleet = Fleet(2, 2, uuid_salt="devices-restart/")
    with Simulator(fleet) as sim, _renamed(fleet, "gpu-node-1", "dcgm-exporter-7d4x9") as old, \
            _renamed(fleet, "gpu-node-1", "dcgm-exporter-k2m8q") as new:
        # validate's "now" window is 3 scrapes: 10 s scrapes give it 30 s, so a loaded machine still
        # runs the first validate while the old pod's last sample is inside it (5 s scrapes left
        # 7-10 s, which a busy CI worker overran)
        with LocalPrometheus({"dcgm-exporter": [old.address, sim.targets["gpu-node-2"]]}, scrape_interval="10s",
                             binary=engine.prometheus) as prom:
            assert prom.wait_for(lambda: len(prom.query('count_over_time(up{job="dcgm-exporter"}[1m]) >= 2')) == 2,
                                 90), prom.logs()
            prom.retarget({"dcgm-exporter": [new.address, sim.targets["gpu-node-2"]]})
            assert prom.wait_for(lambda: prom.query(f'up{{instance="{new.address}"}} == 1')
                                 and not prom.query(f'up{{instance="{old.address}"}}'), 30), prom.logs()
            overlap = f'last_over_time(DCGM_FI_DEV_GPU_TEMP{{instance="{old.address}"}}[29s])'
            assert prom.query(overlap), "the old pod's samples left the window before validate ran"
            during = _validate(prom, checks=("presence", "inventory", "duplicates"))
            assert prom.query(overlap), "the old pod's samples left the window while validate ran"
            # the window passes: the old pod's host name is seen in the lookback, not now
            assert prom.wait_for(lambda: not prom.query(overlap.replace("[29s]", "[31s]")), 45)
            after = _validate(prom, checks=("presence", "inventory", "duplicates"))
    for report in (during, after):
        assert not [f for f in report.findings if f.check in ("duplicate-gpu", "node-lost", "gpu-lost")], \
            [(f.check, f.message) for f in report.findings]
        assert _one(report, "gpu-inventory").message.startswith("4 GPUs on "), _one(report, "gpu-inventory").message
    assert "dcgm-exporter-k2m8q: 2 x" in _one(after, "gpu-inventory").message


def test_one_gpu_scraped_by_two_targets_at_once(engine):
    """Two targets serve gpu-node-1's GPUs at the same time (a second scrape config): one GPU in
    the inventory, and a duplicate-gpu finding of its own naming both targets."""
    fleet = Fleet(2, 2, uuid_salt="devices-double/")
    with Simulator(fleet) as sim, _renamed(fleet, "gpu-node-1", "gpu-node-1") as twin:
        targets = [sim.targets["gpu-node-1"], twin.address, sim.targets["gpu-node-2"]]
        with LocalPrometheus({"dcgm-exporter": targets}, binary=engine.prometheus) as prom:
            _wait_scraped(prom, 3)
            time.sleep(1)
            report = _validate(prom, checks=("presence", "inventory", "duplicates"))
    assert _one(report, "gpu-inventory").message.startswith("4 GPUs on 2 nodes:")
    dup = _one(report, "duplicate-gpu")
    assert "2 GPU(s) of node gpu-node-1 are reported by 2 targets" in dup.message
    assert sim.targets["gpu-node-1"] in dup.message and twin.address in dup.message


def test_a_node_on_1x_names_is_in_the_inventory_and_the_coverage_matrix(engine):
    """gpu-node-2 serves dcgm-exporter 1.x names (``dcgm_gpu_temp``, label ``uuid``): its GPUs are
    counted (4 GPUs on 2 nodes, not 2 on 1), with their model and driver, and each has one row of
    the coverage matrix under its UUID."""
    fleet = Fleet(2, 2, [Fault("legacy-names", node="gpu-node-2")], uuid_salt="devices-legacy/")
    with Simulator(fleet) as sim, LocalPrometheus({"dcgm-exporter": list(sim.targets.values())},
                                                   binary=engine.prometheus) as prom:
        _wait_scraped(prom, 2)
        report = _validate(prom, checks=("presence", "inventory"), matrix=True)
    inventory = _one(report, "gpu-inventory")
    assert inventory.message.startswith("4 GPUs on 2 nodes:"), inventory.message
    assert "gpu-node-2: 2 x NVIDIA" in inventory.message, inventory.message
    rows = [r for r in report.coverage["rows"] if r["node"] == "gpu-node-2"]
    assert sorted(r["gpu"] for r in rows) == ["0", "1"] and all(r["uuid"].startswith("GPU-") for r in rows), rows


def test_a_gone_gpu_whose_series_named_no_node_is_not_a_lost_node(engine):
    """A GPU whose series carried no node label (a relabelling dropped it) and that is gone now
    names no node that could be lost: no ``node-lost`` for node "" (while it lasted, it was
    identity-label-missing's); a labelled GPU gone from a node still reporting is ``gpu-lost``."""
    fleet = Fleet(1, 2, uuid_salt="devices-nameless/")
    state = {"extra": True}

    def body():
        status, text = fleet.page("gpu-node-1")
        if not state["extra"]:
            return status, "\n".join(l for l in text.splitlines() if 'gpu="1"' not in l) + "\n"
        nameless = [l.replace('Hostname="gpu-node-1",', "").replace('UUID="', 'UUID="nameless-')
                    for l in text.splitlines() if 'gpu="0"' in l and not l.startswith("#")]
        return status, text + "\n".join(nameless) + "\n"
    with ExpositionServer(body) as target, \
            LocalPrometheus({"dcgm-exporter": [target.address]}, scrape_interval="2s", binary=engine.prometheus) as prom:
        assert prom.wait_for(lambda: prom.query('DCGM_FI_DEV_GPU_TEMP{UUID=~"nameless-.*"}'), 60), prom.logs()
        state["extra"] = False
        assert prom.wait_for(lambda: not prom.query('last_over_time(DCGM_FI_DEV_GPU_TEMP{UUID=~"nameless-.*"}[7s])'),
                             60), prom.logs()
        report = _validate(prom, checks=("presence", "inventory"))
    assert not [f for f in report.findings if f.check == "node-lost"], [(f.check, f.message) for f in report.findings]
    lost = _one(report, "gpu-lost")
    assert lost.subject == "gpu-node-1" and "gpu 1" in lost.message, lost.message
