"""gpumon validate's kubernetes check against a REAL Prometheus scraping the kube-state-metrics
stand-in (tests/ksm_text.py) next to dcgm-exporter stand-ins, with the rendered rules loaded.

Jobs: ``dcgm-exporter`` (GPU Operator-style targets with namespace/pod target labels, nodes a and
b, 8 GPUs each), ``kube-state-metrics``, and ``dcgm-bare`` (bare-metal nodes dgx-1 and dgx-2 for
the static expectation, another spec with its own rule groups, in the same Prometheus: each
spec's rules read only their own job's records, or both would write the same series and the
later one fail, which validate reports as ``rule-unhealthy``). Healthy first (exit 0), then the
faults: node b reports 6 of 8 GPUs, GPU node c has no exporter pod, node d has a pod nobody
scrapes, pod a restarted three times, pod b was OOM-killed, the DaemonSet has 3 of 4 pods ready;
dgx-2 loses a GPU and the listed dgx-9 never reports.
"""

from __future__ import annotations

import shutil
import time

import pytest

from gpumon.loopback import ExpositionServer
from gpumon.promapi import PromClient
from gpumon.render import render
from gpumon.rules import names
from gpumon.spec import parse_spec
from gpumon.validate import validate
from gpumon.writer import write

from .dcgm_text import exposition, uuid
from .ksm_text import Cluster, Node, Pod
from .test_kubernetes import DCGM_METRICS, EXAMPLE, FAST, NS, LabelledPrometheus

pytestmark = pytest.mark.skipif(not shutil.which("prometheus"), reason="prometheus not installed")

STATIC = """kubernetes:
  static:
    nodes: [{name: dgx-1, gpus: 8}, {name: dgx-9, gpus: 4}]
    patterns: [{match: "dgx-.*", gpus: 4}]

metrics:"""


def _k8s_text() -> str:
    text = EXAMPLE.read_text()
    for old, new in FAST.items():
        text = text.replace(old, new)
    return text


def _static_text() -> str:
    text = _k8s_text().replace("job: dcgm-exporter ", "job: dcgm-bare ").replace("name: gpumon", "name: bare", 1)
    head, rest = text.split("\nkubernetes:", 1)
    return head + "\n" + STATIC + rest.split("\nmetrics:", 1)[1]


@pytest.fixture(scope="module")
def env(tmp_path_factory, engine):
    folder = tmp_path_factory.mktemp("valk8s")
    k8s, static = parse_spec(_k8s_text(), "k8s.yaml"), parse_spec(_static_text(), "bare.yaml")
    write(render(k8s), folder / "k8s")
    write(render(static), folder / "bare")
    ksm = Cluster(nodes=[Node("gpu-node-a", 8), Node("gpu-node-b", 8), Node("cpu-node-1", None)],
                  pods=[Pod("nvidia-dcgm-exporter-x7k2p", "gpu-node-a", "6f1c0c2e-0a1b-4c3d-8e9f-000000000001"),
                        Pod("nvidia-dcgm-exporter-q9r4t", "gpu-node-b", "6f1c0c2e-0a1b-4c3d-8e9f-000000000002")],
                  desired=2, ready=2)
    state = {"ksm": ksm, "b_drop": set(), "dgx2_drop": set()}
    with ExpositionServer(lambda: exposition("gpu-node-a", 1, 8)) as a, \
            ExpositionServer(lambda: exposition("gpu-node-b", 2, 8, state["b_drop"])) as b, \
            ExpositionServer(lambda: state["ksm"].exposition()) as k, \
            ExpositionServer(lambda: exposition("dgx-1", 11, 8)) as d1, \
            ExpositionServer(lambda: exposition("dgx-2", 12, 4, state["dgx2_drop"])) as d2:
        labels = {a.address: {"namespace": NS, "pod": ksm.pods[0].name},
                  b.address: {"namespace": NS, "pod": ksm.pods[1].name}}
        targets = {"dcgm-exporter": [a.address, b.address], "kube-state-metrics": [k.address],
                   "dcgm-bare": [d1.address, d2.address]}
        rules = [folder / "k8s/rules/gpumon.rules.yaml", folder / "bare/rules/bare.rules.yaml"]
        with LabelledPrometheus(targets, rules, labels, binary=engine.prometheus) as prom:
            yield {"prom": prom, "state": state, "k8s": k8s, "static": static}


def _missing(prom, job: str) -> dict[str, float]:
    return {r["metric"]["Hostname"]: float(r["value"][1])
            for r in prom.query(f'{names.NODE_GPUS_MISSING}{{job="{job}"}}')}


def run(env, spec, lookback: float = 60.0, **kw):
    with PromClient(env["prom"].url) as client:
        return validate(spec, client, lookback=lookback, progress=False, **kw)


def by_check(report, check):
    return [f for f in report.findings if f.check == check]


def test_healthy_cluster_passes(env):
    prom = env["prom"]
    ok = prom.wait_for(lambda: _missing(prom, "dcgm-exporter") == {"gpu-node-a": 0, "gpu-node-b": 0}
                       and len(prom.query('count_over_time(up{job="dcgm-exporter"}[1m]) >= 5')) == 2, 60)
    assert ok, prom.logs()
    report, code = run(env, env["k8s"])
    assert code == 0, [f"{f.severity} {f.check} {f.subject}: {f.message}" for f in report.findings
                       if f.severity != "info"]
    assert not [f for f in report.findings if f.case and f.case.startswith("kubernetes/")]
    assert {"kubernetes/expected-gpus", "kubernetes/exporter-pods", "kubernetes/daemonset"} <= set(report.checks)
    env["queries"] = run(env, env["k8s"], checks=("kubernetes",))[0].summary["queries"]


def test_faults(env):
    prom, state = env["prom"], env["state"]
    ksm = state["ksm"]
    ksm.nodes += [Node("gpu-node-c", 8), Node("gpu-node-d", 4)]    # c: the DaemonSet misses it
    ksm.pods.append(Pod("nvidia-dcgm-exporter-m3n8v", "gpu-node-d",  # d: a pod nobody scrapes
                        "6f1c0c2e-0a1b-4c3d-8e9f-000000000004"))
    ksm.desired, ksm.ready = 4, 3
    state["b_drop"] = {(m, g) for m in DCGM_METRICS for g in (6, 7)}   # node b: 6 of 8 GPUs
    state["dgx2_drop"] = {(m, 3) for m in DCGM_METRICS}            # dgx-2: 3 of 4 (pattern)
    dropped = time.monotonic()

    def settled():
        inv = prom.query(f'{names.INVENTORY}{{Hostname="gpu-node-b",gpu="7"}}')
        return (_missing(prom, "dcgm-exporter") == {"gpu-node-a": 0, "gpu-node-b": 2, "gpu-node-c": 8, "gpu-node-d": 4}
                and _missing(prom, "dcgm-bare").get("dgx-2") == 1 and not inv)
    assert prom.wait_for(settled, 60), (_missing(prom, "dcgm-exporter"), prom.logs())
    # the restarts last: their increase() shows in a 1 m window only, which the GPU faults above may outlast
    ksm.pods[0].restarts = 3                                       # pod a restarted three times
    ksm.pods[1].restarts, ksm.pods[1].oom = 1, True                # pod b was OOM-killed once

    def restarted():
        # == 3, not >= 3: increase() over-reads a young series until it settles
        return prom.query('round(increase(kube_pod_container_status_restarts_total[1m])) == 3')
    assert prom.wait_for(restarted, 30), prom.logs()

    # the gone GPUs are named from their samples within the lookback: it reaches back past the drop
    # however long the waits above took on a loaded machine (a 1 m lookback missed them once)
    report, code = run(env, env["k8s"], lookback=max(60.0, time.monotonic() - dropped + 20))
    assert code == 1
    (gm,) = by_check(report, "gpus-missing")
    assert gm.subject == "gpu-node-b" and gm.severity == "error"
    assert "6/8 GPUs reporting" in gm.message and "kube_node_status_capacity nvidia_com_gpu" in gm.message
    assert uuid(2, 6) in gm.message and uuid(2, 7) in gm.message and uuid(2, 5) not in gm.message
    assert dict(gm.labels) == {"job": "dcgm-exporter", "Hostname": "gpu-node-b"}
    nx = {f.subject: f for f in by_check(report, "node-without-exporter")}
    assert sorted(nx) == ["gpu-node-c", "gpu-node-d"]
    assert dict(nx["gpu-node-c"].labels)["reason"] == "no_exporter_pod" and "8 GPUs" in nx["gpu-node-c"].message
    assert dict(nx["gpu-node-d"].labels)["reason"] == "pod_not_scraped" and "ServiceMonitor" in nx["gpu-node-d"].hint
    (rs,) = by_check(report, "exporter-restarts")
    assert rs.subject == f"{NS}/nvidia-dcgm-exporter-x7k2p" and "restarted 3 time(s)" in rs.message
    assert "on node gpu-node-a" in rs.message and rs.severity == "warning"
    (oom,) = by_check(report, "exporter-oom-killed")
    assert oom.subject == f"{NS}/nvidia-dcgm-exporter-q9r4t" and oom.severity == "error"
    (ds,) = by_check(report, "exporter-daemonset-not-ready")
    assert "3 of 4 pods ready, 1 unavailable" in ds.message
    assert not by_check(report, "gpus-above-expected") and not by_check(report, "node-gpu-capacity-missing")
    # the kubernetes check's queries are fixed: the same healthy and broken (4 GPU nodes instead of 2)
    assert run(env, env["k8s"], checks=("kubernetes",))[0].summary["queries"] == env["queries"]

    # bare metal: static expectation (explicit node, pattern), no kube-state-metrics queries
    report, code = run(env, env["static"], checks=("kubernetes",))
    assert code == 1
    assert [(f.subject, "3/4 GPUs reporting" in f.message, uuid(12, 3) in f.message)
            for f in by_check(report, "gpus-missing")] == [("dgx-2", True, True)]
    (nx,) = by_check(report, "node-without-exporter")
    assert nx.subject == "dgx-9" and dict(nx.labels)["reason"] == "no_gpu_series"
    assert not [f for f in report.findings if f.check.startswith(("exporter-", "kube-state"))]


def test_kube_state_metrics_missing_and_rules_not_loaded(env):
    text = _k8s_text().replace("job: kube-state-metrics", "job: kube-state-metricz")
    report, code = run(env, parse_spec(text, "wrong-ksm.yaml"), checks=("kubernetes",))
    assert code == 1
    assert [f.subject for f in by_check(report, "kube-state-metrics-missing")] == ["kube-state-metricz"]
    assert not by_check(report, "exporter-restarts")  # not read from a job that does not exist
    other = parse_spec(_k8s_text().replace("name: gpumon", "name: other", 1), "other.yaml")
    report, code = run(env, other, checks=("kubernetes",))
    (nl,) = by_check(report, "kubernetes-rules-not-loaded")
    assert nl.severity == "inconclusive" and "other.kubernetes" in nl.subject
    assert not by_check(report, "gpus-missing")
