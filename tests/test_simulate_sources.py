"""``gpumon simulate`` serving every source kind (issue 13) to a REAL Prometheus (each engine: 2.42
and 3.x) with the rendered rules: a mixed fleet where each node is one case.

* gpu-node-1: dcgm-exporter 4.x, healthy;
* gpu-node-2: dcgm-exporter without the temperature (the field guide's case, a ``drop`` fault on
  its dcgm-exporter only) plus node_exporter with gpumon's nvidia-smi textfile, GPU 1 hot;
* gpu-node-3: dcgm-exporter 1.x names only (dcgm_gpu_temp, label uuid);
* gpu-node-4: dcgm-exporter without the temperature plus utkuozdemir/nvidia_gpu_exporter (no node
  label: its targets' ``instance`` is 127.0.0.1:port, as a pod address is in Kubernetes; the node
  comes from the GPU's dcgm-exporter series).

Checked: every GPU has exactly one normalized temperature, from the source expected for its node
and under its node's name; the threshold fires from the textfile for the hot GPU; one fallback
warning per node and field and no presence alert (one cause, one page).
"""

from __future__ import annotations

import shutil

import pytest

from gpumon.localprom import LocalPrometheus
from gpumon.rules import build_groups
from gpumon.rules.output import files as rule_files
from gpumon.simfaults import Fault
from gpumon.simpages import gpu_uuid
from gpumon.simserve import Simulator
from gpumon.simulate import Fleet
from gpumon.spec import parse_spec

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not shutil.which("prometheus"), reason="prometheus not installed")]

SPEC = """\
version: 1
exporter: {job: dcgm-exporter, scrape_interval: 1s, scrape_timeout: 1s, collect_interval: 1s}
alerts: {for: 2s}
metrics:
  - name: DCGM_FI_DEV_GPU_TEMP
    kind: gauge
    unit: celsius
    presence: required
    range: [5, 110]
    thresholds: [{alert: GpuTemperatureHigh, severity: warning, op: ">", value: 83, for: 2s}]
    sources: [dcgm-exporter-1.x, nvidia-smi-textfile, nvidia_gpu_exporter]
  - name: DCGM_FI_DEV_POWER_USAGE
    kind: gauge
    unit: watts
    presence: required
    range: [1, 2000]
    sources: [dcgm-exporter-1.x, nvidia-smi-textfile, nvidia_gpu_exporter]
"""
TEMP = "DCGM_FI_DEV_GPU_TEMP"
SOURCES = {"gpu-node-2": ("dcgm-exporter", "nvidia-smi-textfile"), "gpu-node-3": ("dcgm-exporter-1.x",),
           "gpu-node-4": ("dcgm-exporter", "nvidia_gpu_exporter")}
FAULTS = [Fault("drop", metric=TEMP, node="gpu-node-2", source="dcgm-exporter"),
          Fault("drop", metric=TEMP, node="gpu-node-4", source="dcgm-exporter"),
          Fault("value", metric=TEMP, node="gpu-node-2", gpu=1, value="95", source="nvidia-smi-textfile")]
EXPECTED_SOURCE = {"gpu-node-1": "dcgm-exporter", "gpu-node-2": "nvidia-smi-textfile",
                   "gpu-node-3": "dcgm-exporter-1.x", "gpu-node-4": "nvidia_gpu_exporter"}


@pytest.fixture(scope="module")
def prom(tmp_path_factory, engine):
    spec = parse_spec(SPEC, "<simulate-sources>")
    rules = tmp_path_factory.mktemp("simsources") / "gpumon.rules.yaml"
    rules.write_text(rule_files(spec, build_groups(spec))["rules/gpumon.rules.yaml"])
    with Simulator(Fleet(4, 2, FAULTS, sources=SOURCES)) as sim:
        with LocalPrometheus(sim.jobs, rule_files=[rules], binary=engine.prometheus) as p:
            ok = p.wait_for(lambda: len(p.query(f'job_gpu:dcgm_field_value:normalized{{dcgm_field="{TEMP}"}}')) == 8
                            and p.query('ALERTS{alertname="GpuTemperatureHigh",alertstate="firing"}')
                            and len(p.query('ALERTS{alertname="GpuMetricFallbackServing",alertstate="firing"}')) >= 4,
                            60)
            assert ok, p.logs()
            yield p


def test_every_gpu_keeps_one_temperature_from_its_nodes_source(prom):
    norm = prom.query(f'job_gpu:dcgm_field_value:normalized{{dcgm_field="{TEMP}"}}')
    got = sorted((s["metric"]["UUID"], s["metric"]["Hostname"], s["metric"]["gpu"], s["metric"]["source"]) for s in norm)
    want = sorted((gpu_uuid(node, gpu), node, str(gpu), source) for node, source in EXPECTED_SOURCE.items()
                  for gpu in (0, 1))
    assert got == want
    hot = [s for s in norm if s["metric"]["UUID"] == gpu_uuid("gpu-node-2", 1)]
    assert hot[0]["value"][1] == "95" and hot[0]["metric"]["Hostname"] == "gpu-node-2"


def test_threshold_fires_from_the_textfile(prom):
    firing = prom.query('ALERTS{alertname="GpuTemperatureHigh",alertstate="firing"}')
    assert [(a["metric"]["Hostname"], a["metric"]["UUID"], a["metric"]["gpu"]) for a in firing] == \
        [("gpu-node-2", gpu_uuid("gpu-node-2", 1), "1")]


def test_one_fallback_warning_per_node_and_field(prom):
    firing = prom.query('ALERTS{alertname="GpuMetricFallbackServing",alertstate="firing"}')
    got = sorted((a["metric"]["dcgm_field"], a["metric"]["Hostname"], a["metric"]["source"]) for a in firing)
    assert got == sorted([(TEMP, "gpu-node-2", "nvidia-smi-textfile"), (TEMP, "gpu-node-3", "dcgm-exporter-1.x"),
                          (TEMP, "gpu-node-4", "nvidia_gpu_exporter"),
                          ("DCGM_FI_DEV_POWER_USAGE", "gpu-node-3", "dcgm-exporter-1.x")])
    # the fallback-served nodes are not paged as missing too (before the node came from the
    # GPU's primary series, gpu-node-4 was: its readings said Hostname="127.0.0.1")
    assert not prom.query('ALERTS{alertname=~"GpuMetricMissing|GpuNodeMetricMissing|GpuMetricAbsent"}')


def test_power_read_once_per_gpu_from_the_primary_where_it_has_one(prom):
    norm = prom.query('job_gpu:dcgm_field_value:normalized{dcgm_field="DCGM_FI_DEV_POWER_USAGE"}')
    got = sorted((s["metric"]["UUID"], s["metric"]["source"]) for s in norm)
    assert got == sorted((gpu_uuid(node, gpu), "dcgm-exporter-1.x" if node == "gpu-node-3" else "dcgm-exporter")
                         for node in EXPECTED_SOURCE for gpu in (0, 1))
