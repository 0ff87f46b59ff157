"""The kubernetes section: spec checks, the rendered rule group, promtool unit tests, and the
rules in a real Prometheus scraping a kube-state-metrics stand-in next to dcgm-exporter targets.
"""

from __future__ import annotations

import shutil
import subprocess
import textwrap

import promql_parser
import pytest
import yaml

from gpumon.localprom import LocalPrometheus
from gpumon.loopback import ExpositionServer
from gpumon.render import render
from gpumon.rules import build_groups, names
from gpumon.spec import SpecError, load_spec, parse_spec
from gpumon.writer import write

from .calm import assert_quiet
from .conftest import DATA, ROOT
from .dcgm_text import ENERGY, VALUES, exposition
from .ksm_text import Cluster, Node, Pod

EXAMPLE = ROOT / "examples/kubernetes.yaml"


def _section(text: str) -> str:
    """The bundled spec with ``text`` (a kubernetes section) added."""
    return (ROOT / "gpumon.yaml").read_text() + "\n" + textwrap.dedent(text)


def _errors(text: str) -> list[str]:
    with pytest.raises(SpecError) as info:
        parse_spec(text, "spec.yaml")
    return [str(p) for p in info.value.problems]


# --------------------------------------------------------------------------- spec


def test_example_spec_models_the_gpu_operator_install():
    k = load_spec(EXAMPLE).kubernetes
    assert k.ksm_job == "kube-state-metrics" and k.expected_source == "capacity"
    assert (k.exporter.namespace, k.exporter.daemonset, k.exporter.container) == (
        "gpu-operator", "nvidia-dcgm-exporter", "nvidia-dcgm-exporter")
    assert k.exporter.pod_regex == "nvidia-dcgm-exporter-[a-z0-9]{5}"
    assert (k.join.kube_label, k.join.exporter_label) == ("node", "Hostname")
    assert load_spec(ROOT / "gpumon.yaml").kubernetes is None


def test_example_is_the_bundled_spec_plus_the_section():
    """examples/kubernetes.yaml must not drift from gpumon.yaml: same settings and metrics, only the
    kubernetes section and the GPU Operator's exporter job added."""
    example = yaml.safe_load(EXAMPLE.read_text())
    bundled = yaml.safe_load((ROOT / "gpumon.yaml").read_text())
    assert example.pop("kubernetes") and "kubernetes" not in bundled
    assert example["exporter"].pop("job") == "nvidia-dcgm-exporter"
    bundled["exporter"].pop("job")
    assert example == bundled


def test_section_errors_are_reported_with_positions():
    errs = _errors(_section("""\
        kubernetes:
          kube_state_metrics: {job: dcgm-exporter}
          capacity: {resource: nvidia_com_gpu, unit_per_gpu: 4}
          static:
            nodes: [{name: a, gpus: 8}, {name: a, gpus: 4, cluster: x}, {name: b, gpus: 4}, {name: b, gpus: 2}]
            patterns: [{match: "dgx-(", gpus: 8}]
        """))
    joined = "\n".join(errs)
    assert "kubernetes.capacity.unit_per_gpu: unknown key 'unit_per_gpu'; did you mean 'units_per_gpu'?" in joined
    errs = _errors(_section("""\
        kubernetes:
          kube_state_metrics: {job: dcgm-exporter}
          static:
            nodes: [{name: a, gpus: 8}, {name: a, gpus: 4, cluster: x}, {name: b, gpus: 4}, {name: b, gpus: 2}]
            patterns: [{match: "dgx-(", gpus: 8}]
        """))
    first = (ROOT / "gpumon.yaml").read_text().count("\n") + 2  # line of `kubernetes:`
    assert errs == [
        f"spec.yaml:{first + 1}:3: kubernetes: kube_state_metrics needs exporter (namespace and daemonset of "
        "dcgm-exporter) for the pod alerts",
        f"spec.yaml:{first + 1}:29: kubernetes.kube_state_metrics.job: 'dcgm-exporter' is the dcgm-exporter job; "
        "kube-state-metrics is scraped by its own job (usually kube-state-metrics)",
        f"spec.yaml:{first + 3}:61: kubernetes.static.nodes[1].cluster: exporter.labels.cluster is not set, so no "
        "series carries a cluster label; remove cluster or set exporter.labels.cluster",
        f"spec.yaml:{first + 3}:92: kubernetes.static.nodes[3].name: duplicate node 'b' (first at static.nodes[2])",
        f"spec.yaml:{first + 4}:24: kubernetes.static.patterns[0].match: 'dgx-(': not a valid RE2 regex "
        "(the syntax Prometheus uses): missing ): dgx-(",
    ]
    assert _errors(_section("kubernetes: {restart_window: 1h}\n")) == [
        f"spec.yaml:{first}:13: kubernetes: set kube_state_metrics (Kubernetes: expected GPUs from node capacity, "
        "exporter pod alerts) or static (bare metal: expected GPUs per node), or remove the section"]


# --------------------------------------------------------------------------- rendered rules


def test_group_only_with_the_section_and_promtool_accepts_it(tmp_path, promtool):
    assert "gpumon.kubernetes" not in [g.name for g in build_groups(load_spec(ROOT / "gpumon.yaml"))]
    spec = load_spec(EXAMPLE)
    assert [g.name for g in build_groups(spec)] == [
        "gpumon.inventory", "gpumon.coverage", "gpumon.exporter", "gpumon.kubernetes", "gpumon.presence",
        "gpumon.values", "gpumon.plausibility", "gpumon.gaps"]
    write(render(spec), tmp_path)
    proc = subprocess.run([promtool, "check", "rules", str(tmp_path / "rules/gpumon.rules.yaml")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    group = next(g for g in build_groups(spec) if g.name == "gpumon.kubernetes")
    for rule in group.rules:
        promql_parser.parse(rule.expr)
    # critical alerts first (an inhibiting alert reaches Alertmanager before the warnings it mutes)
    assert [r.name for r in group.rules if r.alert] == [
        "GpuNodeExporterMissing", "GpuExporterDaemonSetMissing", "GpuNodeGpusMissing", "GpuNodeCapacityMissing",
        "GpuExporterPodRestarting", "GpuExporterOOMKilled", "GpuExporterDaemonSetNotReady", "GpuKubeStateMetricsMissing",
        "GpuDevicePluginUnhealthy"]
    recorded = [r.record for r in group.rules if r.record]
    assert recorded == [names.NODE_GPUS_EXPECTED, names.GPUS_EXPECTED, names.NODE_GPUS_MISSING, names.GPUS_MISSING, names.NODE_EXPORTER_PODS,
                        names.NODE_EXPORTER_UP]
    joined = "\n".join(r.expr for r in group.rules)
    for selector in ('kube_node_status_capacity{job="kube-state-metrics",resource="nvidia_com_gpu",unit="integer"',
                     'up{job="nvidia-dcgm-exporter"}', 'pod=~"nvidia-dcgm-exporter-[a-z0-9]{5}"',
                     'container="nvidia-dcgm-exporter"', 'reason="OOMKilled"'):
        assert selector in joined


def test_cluster_label_and_node_join_flow_into_the_joins():
    text = (EXAMPLE.read_text().replace("cluster: null ", "cluster: cluster ")
            .replace('regex: "(.*)"', 'regex: "(.+)\\\\.example\\\\.com"').replace("node: Hostname ", "node: hostname "))
    spec = parse_spec(text, "x.yaml")
    exprs = {r.name: r.expr for g in build_groups(spec) for r in g.rules if g.name == "gpumon.kubernetes"}
    assert "max by (job, cluster, hostname)" in exprs[names.NODE_GPUS_EXPECTED]
    assert 'node=~"(.+)\\\\.example\\\\.com"' in exprs[names.NODE_GPUS_EXPECTED]
    assert '"hostname", "$1", "node", "(.+)\\\\.example\\\\.com"' in exprs[names.NODE_GPUS_EXPECTED]
    assert "on (cluster, namespace, pod) group_left (node)" in exprs[names.NODE_EXPORTER_UP]
    assert "and on (cluster, namespace, pod, container)" in exprs["GpuExporterOOMKilled"]


# --------------------------------------------------------------------------- promtool unit tests


@pytest.mark.parametrize("spec_text, test_file", [
    ("example", "kubernetes.test.yaml"),
    ("static", "kubernetes-static.test.yaml"),
])
def test_promtool_unit_tests(tmp_path, promtool, spec_text, test_file):
    """tests/data/kubernetes*.test.yaml against the rules rendered from the example spec and from
    the bundled spec with a static expectation (bare metal)."""
    if spec_text == "example":
        spec = load_spec(EXAMPLE)
    else:
        spec = parse_spec(_section("""\
            kubernetes:
              static:
                nodes: [{name: gpu-node-x, gpus: 4}, {name: gpu-node-y, gpus: 2}]
                patterns: [{match: "dgx-.*", gpus: 8}, {match: "dgx-small-.*", gpus: 2}]
                default: 2
            """), "static.yaml")
    write(render(spec), tmp_path)
    shutil.copy(DATA / test_file, tmp_path / test_file)
    proc = subprocess.run([promtool, "test", "rules", test_file], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# --------------------------------------------------------------------------- real Prometheus

FAST = {"scrape_interval: 15s": "scrape_interval: 1s", "scrape_timeout: 10s": "scrape_timeout: 1s",
        "collect_interval: 30s": "collect_interval: 1s", "  for: 5m\n": "  for: 2s\n",
        "inventory_lookback: 1h": "inventory_lookback: 4m", "gap_window: 30m": "gap_window: 1m",
        "flapping_window: 10m": "flapping_window: 30s", "frozen_window: 10m": "frozen_window: 30s",
        "daemonset_for: 15m": "daemonset_for: 2s", "job: nvidia-dcgm-exporter ": "job: dcgm-exporter ",
        "slow_group_interval: 1m": "slow_group_interval: 1s",
        "gaps_group_interval: 3m": "gaps_group_interval: 1s"}

DCGM_METRICS = list(VALUES) + [ENERGY]
NS = "gpu-operator"


class LabelledPrometheus(LocalPrometheus):
    """LocalPrometheus whose targets carry the namespace/pod target labels a ServiceMonitor adds
    (``labels``: {address: {label: value}})."""

    def __init__(self, targets, rule_files, labels: dict[str, dict[str, str]], **kw):
        super().__init__(targets, rule_files, **kw)
        self.labels = labels

    def _config(self, folder):
        path = super()._config(folder)
        cfg = yaml.safe_load(path.read_text())
        for job in cfg["scrape_configs"]:
            addrs = job["static_configs"][0]["targets"]
            job["static_configs"] = [{"targets": [a], "labels": self.labels.get(a, {})} for a in addrs]
        path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        return path


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, engine):
    """Nodes a and b (8 GPUs each, exporter pods scraped) plus a CPU node: healthy. Tests then
    add faults to ``state``."""
    folder = tmp_path_factory.mktemp("k8s")
    text = EXAMPLE.read_text()
    for old, new in FAST.items():
        assert old in text, old
        text = text.replace(old, new)
    (folder / "gpumon.yaml").write_text(text)
    write(render(load_spec(folder / "gpumon.yaml")), folder / "out")
    ksm = Cluster(nodes=[Node("gpu-node-a", 8), Node("gpu-node-b", 8), Node("cpu-node-1", None)],
                  pods=[Pod("nvidia-dcgm-exporter-x7k2p", "gpu-node-a", "6f1c0c2e-0a1b-4c3d-8e9f-000000000001"),
                        Pod("nvidia-dcgm-exporter-q9r4t", "gpu-node-b", "6f1c0c2e-0a1b-4c3d-8e9f-000000000002")],
                  desired=2, ready=2)
    state = {"ksm": ksm, "b_drop": set()}
    with ExpositionServer(lambda: exposition("gpu-node-a", 1, 8)) as a, \
            ExpositionServer(lambda: exposition("gpu-node-b", 2, 8, state["b_drop"])) as b, \
            ExpositionServer(lambda: state["ksm"].exposition()) as k:
        labels = {a.address: {"namespace": NS, "pod": ksm.pods[0].name, "service": "nvidia-dcgm-exporter"},
                  b.address: {"namespace": NS, "pod": ksm.pods[1].name, "service": "nvidia-dcgm-exporter"}}
        with LabelledPrometheus({"dcgm-exporter": [a.address, b.address], "kube-state-metrics": [k.address]},
                                [folder / "out/rules/gpumon.rules.yaml"], labels, binary=engine.prometheus) as prom:
            yield prom, state


def _alerts(prom, state: str | None = None) -> list[dict]:
    sel = f'ALERTS{{alertstate="{state}"}}' if state else "ALERTS"
    return [r["metric"] for r in prom.query(sel)]


def _values(prom, expr: str) -> dict[str, float]:
    return {r["metric"].get("Hostname", r["metric"].get("job")): float(r["value"][1]) for r in prom.query(expr)}


def test_real_prometheus_healthy_cluster_then_faults(cluster):
    prom, state = cluster
    # Healthy: expected == reported on both GPU nodes, the CPU node expects nothing, nothing fires.
    assert prom.wait_for(lambda: _values(prom, names.NODE_GPUS_MISSING) == {"gpu-node-a": 0, "gpu-node-b": 0}, 60), \
        prom.logs()
    assert _values(prom, names.NODE_GPUS_EXPECTED) == {"gpu-node-a": 8, "gpu-node-b": 8}
    assert _values(prom, names.NODE_EXPORTER_UP) == {"gpu-node-a": 1, "gpu-node-b": 1}
    assert _values(prom, names.NODE_EXPORTER_PODS) == {"gpu-node-a": 1, "gpu-node-b": 1}
    assert _values(prom, names.GPUS_EXPECTED) == {"dcgm-exporter": 16}
    assert _values(prom, names.GPU_DEVICES_REPORTING) == {"dcgm-exporter": 16}
    assert prom.settle(), "a rule group did not evaluate after the cluster was healthy"
    assert_quiet(prom, lambda: _alerts(prom), what="healthy cluster")

    # Faults: node b loses GPUs 6 and 7 (8 of capacity, 6 reporting); GPU node c has no exporter pod
    # (the DaemonSet does not select it); node d has a pod nobody scrapes; pod a restarted three
    # times, the last time OOM-killed.
    ksm = state["ksm"]
    ksm.nodes += [Node("gpu-node-c", 8), Node("gpu-node-d", 4)]
    ksm.pods.append(Pod("nvidia-dcgm-exporter-m3n8v", "gpu-node-d", "6f1c0c2e-0a1b-4c3d-8e9f-000000000004"))
    ksm.desired = ksm.ready = 3
    ksm.pods[0].restarts, ksm.pods[0].oom = 3, True
    state["b_drop"] = {(m, g) for m in DCGM_METRICS for g in (6, 7)}

    want = {("GpuNodeGpusMissing", "gpu-node-b", None), ("GpuNodeExporterMissing", "gpu-node-c", None),
            ("GpuNodeExporterMissing", "gpu-node-d", None), ("GpuExporterPodRestarting", None, ksm.pods[0].name),
            ("GpuExporterOOMKilled", None, ksm.pods[0].name)}

    def firing():
        return {(a["alertname"], a.get("Hostname"), a.get("pod")) for a in _alerts(prom, "firing")
                if a["alertname"] != "GpuLost"}

    assert prom.wait_for(lambda: firing() >= want, 45), (firing(), prom.logs())
    prom.wait_for(lambda: False, 3)  # every rule evaluates again on the new data
    fired = _alerts(prom)
    by_name = {}
    for a in fired:
        by_name.setdefault(a["alertname"], []).append(a)
    assert sorted(by_name) == ["GpuExporterOOMKilled", "GpuExporterPodRestarting", "GpuLost",
                               "GpuNodeExporterMissing", "GpuNodeGpusMissing"], fired
    # GpuLost is the core per-GPU alert for the same two GPUs (within inventory_lookback).
    assert sorted(a["gpu"] for a in by_name["GpuLost"]) == ["6", "7"]
    assert by_name["GpuNodeGpusMissing"] == [{
        "__name__": "ALERTS", "alertname": "GpuNodeGpusMissing", "alertstate": "firing", "job": "dcgm-exporter",
        "Hostname": "gpu-node-b", "namespace": "monitoring", "severity": "warning"}]
    assert sorted((a["Hostname"], a["reason"]) for a in by_name["GpuNodeExporterMissing"]) == [
        ("gpu-node-c", "no_exporter_pod"), ("gpu-node-d", "pod_not_scraped")]
    restarting = by_name["GpuExporterPodRestarting"]
    assert [(a["namespace"], a["pod"], a["container"], a["job"]) for a in restarting] == [
        (NS, "nvidia-dcgm-exporter-x7k2p", "nvidia-dcgm-exporter", "kube-state-metrics")]
    assert [(a["pod"], a["reason"]) for a in by_name["GpuExporterOOMKilled"]] == [
        ("nvidia-dcgm-exporter-x7k2p", "OOMKilled")]
    assert _values(prom, names.NODE_GPUS_MISSING) == {"gpu-node-a": 0, "gpu-node-b": 2, "gpu-node-c": 8,
                                                      "gpu-node-d": 4}
    assert _values(prom, names.GPUS_MISSING) == {"dcgm-exporter": 14}
    assert _values(prom, names.NODE_GPU_DEVICES_REPORTING) == {"gpu-node-a": 8, "gpu-node-b": 6}
    value = prom.query('ALERTS_FOR_STATE{alertname="GpuExporterPodRestarting"}')
    assert value, "restart alert state is stored"
    # increase() extrapolates to the end of the window: on a young series round() can read 4 at first
    query = 'round(increase(kube_pod_container_status_restarts_total{pod="nvidia-dcgm-exporter-x7k2p"}[1h]))'
    assert prom.wait_for(lambda: [float(r["value"][1]) for r in prom.query(query)] == [3.0], 30), prom.query(query)


def test_kube_state_metrics_with_static_expectation_and_units_per_gpu(tmp_path, promtool):
    """MIG strategy mixed: pod alerts from kube-state-metrics, expected GPUs from a static list;
    time-slicing: capacity divided by the replicas."""
    text = EXAMPLE.read_text().replace("  restart_window: 1h\n", "  restart_window: 1h\n  static: {default: 8}\n")
    text = text.replace("  capacity:\n    resource: nvidia_com_gpu\n    units_per_gpu: 1\n", "")
    spec = parse_spec(text, "mixed.yaml")
    assert spec.kubernetes.expected_source == "static"
    group = next(g for g in build_groups(spec) if g.name == "gpumon.kubernetes")
    by_name = {r.name: r.expr for r in group.rules}
    assert "kube_node_status_capacity" not in by_name[names.NODE_GPUS_EXPECTED]
    assert "GpuNodeCapacityMissing" not in by_name and "GpuExporterPodRestarting" in by_name
    assert '"pod_not_scraped"' in by_name["GpuNodeExporterMissing"]
    write(render(spec), tmp_path)
    proc = subprocess.run([promtool, "check", "rules", str(tmp_path / "rules/gpumon.rules.yaml")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    sliced = parse_spec(EXAMPLE.read_text().replace("units_per_gpu: 1", "units_per_gpu: 4"), "sliced.yaml")
    group = next(g for g in build_groups(sliced) if g.name == "gpumon.kubernetes")
    expr = next(r.expr for r in group.rules if r.record == names.NODE_GPUS_EXPECTED)
    assert expr.endswith("\n/ 4")
