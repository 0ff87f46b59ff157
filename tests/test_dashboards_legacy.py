"""The dashboards count the GPUs of a node whose exporter serves dcgm-exporter 1.x names
(``dcgm_gpu_temp``, label ``uuid``: its compatibility mode): a real Prometheus scrapes the
simulated fleet, one node of three on 1.x names, and evaluates the rendered rules; the fleet
overview's "GPUs reporting" and "GPUs seen" stats and the GPU detail dashboard's "GPUs reporting"
on that node count its GPUs like any other (the node pages GpuExporterLegacyNames once; its GPUs
are there, on old names: a count that leaves them out reads as GPUs missing)."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import pytest

from gpumon.render import render
from gpumon.simfaults import Fault, dumps_faults
from gpumon.simserve import Simulator
from gpumon.simulate import Fleet
from gpumon.spec import parse_spec

from .calm import troubled
from .test_dashboards import _models, _panels
from .test_dashboards_kubernetes import _scalar
from .test_kubernetes import LabelledPrometheus

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
NODES, GPUS, LEGACY = 3, 2, "gpu-node-2"


def _spec(cluster: bool):
    """tests/data/validate-spec.yaml (1 s scrapes) with the slow groups every 2 s (the GPU counts
    are recorded there), optionally with a ``cluster`` label (the fleet counts then read the
    per-GPU inventory)."""
    text = (ROOT / "tests/data/validate-spec.yaml").read_text()
    text = text.replace("  inventory_lookback: 1h", "  slow_group_interval: 2s\n  gaps_group_interval: 2s\n  inventory_lookback: 1h")
    if cluster:
        text = text.replace("cluster: null ", "cluster: cluster ")
    return parse_spec(text, "legacy.yaml")


def _by_title(dash: dict) -> dict[str, dict]:
    return {p["title"]: p for p in _panels(dash) if "title" in p}


@pytest.fixture(scope="module", params=[False, True], ids=["plain", "cluster"])
def fleet(request, engine):
    """A real Prometheus scraping 3 nodes of 2 GPUs, ``gpu-node-2`` on 1.x names, with the rules
    rendered from :func:`_spec`; (spec, Prometheus)."""
    spec = _spec(request.param)
    with tempfile.TemporaryDirectory(prefix="gpumon-legacy-") as tmp:
        folder = Path(tmp)
        (folder / "rules.yaml").write_text(render(spec)["rules/gpumon.rules.yaml"])
        (folder / "faults.yaml").write_text(dumps_faults([Fault("legacy-names", node=LEGACY)]))
        with Simulator(Fleet(NODES, GPUS, fault_file=folder / "faults.yaml")) as sim:
            addrs = list(sim.targets.values())
            # the cluster label as a target label (an external label is not on the stored series)
            labels = {a: {"cluster": "a"} for a in addrs} if request.param else {}
            with LabelledPrometheus({"dcgm-exporter": addrs}, [folder / "rules.yaml"], labels,
                                    binary=engine.prometheus) as prom:
                yield spec, prom


def test_gpu_counts_include_a_node_on_1x_names(fleet):
    spec, prom = fleet
    models = _models(spec)
    overview = _by_title(models[f"{spec.name}-fleet"])
    detail = _by_title(models[f"{spec.name}-gpu"])
    seen = next(t for t in overview if t.startswith("GPUs seen in"))
    panels = {"fleet: GPUs reporting": overview["GPUs reporting"], f"fleet: {seen}": overview[seen],
              "fleet: GPUs lost": overview["GPUs lost"], "detail: GPUs reporting": detail["GPUs reporting"]}
    want = {"fleet: GPUs reporting": NODES * GPUS, f"fleet: {seen}": NODES * GPUS, "fleet: GPUs lost": 0,
            "detail: GPUs reporting": NODES * GPUS}

    def counts() -> dict:
        return {k: _scalar(prom, p) for k, p in panels.items()}

    # the 1.x node scraped and every count recorded (the slow groups every 2 s); then they hold
    assert prom.wait_for(lambda: len(prom.query("dcgm_gpu_temp")) == GPUS and None not in counts().values(), 60), \
        prom.logs()[-2000:]
    assert prom.wait_for(lambda: counts() == want, 20), counts()
    time.sleep(3)
    held = counts()
    if held != want:  # right only if scrapes really failed or ran late then (the machine was saturated)
        assert troubled(prom, 30), held
        assert prom.wait_for(lambda: counts() == want, 20), counts()
