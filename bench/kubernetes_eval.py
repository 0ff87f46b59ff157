"""Evaluation cost of the kubernetes rule group at fleet size, in one real Prometheus.

NODES dcgm-exporter targets (one per node, 8 GPUs, DCGM_FI_DEV_GPU_TEMP only, each target carrying
the namespace/pod labels a ServiceMonitor adds) are served by one HTTP server that answers
``/metrics?node=<i>``; a kube-state-metrics stand-in (tests/ksm_text.py) serves capacity, pod info,
phases, restarts and the DaemonSet for the same nodes. Loaded: the inventory recording rules and
the kubernetes group of examples/kubernetes.yaml, both every 2 s. Prints the mean
``evaluationTime`` of each group (/api/v1/rules) and the GPU counts the rules recorded.
Usage: .venv/bin/python bench/kubernetes_eval.py [NODES] [SECONDS]   (defaults: 250 nodes, 60 s)
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import httpx
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from gpumon.localprom import LocalPrometheus  # noqa: E402
from gpumon.loopback import TEXT_FORMAT, ExpositionServer, free_port  # noqa: E402
from gpumon.rules import inventory, kubernetes, names  # noqa: E402
from gpumon.rules.model import RuleGroup  # noqa: E402
from gpumon.rules.output import group_dict  # noqa: E402
from gpumon.spec import parse_spec  # noqa: E402
from tests.ksm_text import Cluster, Node, Pod  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def node_text(i: int) -> str:
    lines = ["# TYPE DCGM_FI_DEV_GPU_TEMP gauge"]
    for g in range(8):
        lines.append(f'DCGM_FI_DEV_GPU_TEMP{{gpu="{g}",UUID="GPU-{i:06d}-{g}",Hostname="gpu-{i:05d}"}} 41')
    return "\n".join(lines) + "\n"


def serve_nodes() -> tuple[ThreadingHTTPServer, int]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server API
            i = int(parse_qs(urlparse(self.path).query)["node"][0])
            data = node_text(i).encode()
            self.send_response(200)
            self.send_header("Content-Type", TEXT_FORMAT)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    port = free_port()
    httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, port


class BenchPrometheus(LocalPrometheus):
    """One static target per node on the same server, told apart by ``?node=`` and target labels."""

    def __init__(self, nodes: int, node_port: int, ksm: str, rule_file: Path):
        super().__init__({}, [rule_file], scrape_interval="5s", evaluation_interval="2s", scrape_timeout="4s")
        self.nodes, self.node_port, self.ksm = nodes, node_port, ksm

    def _config(self, folder):
        path = super()._config(folder)
        cfg = yaml.safe_load(path.read_text())
        cfg["scrape_configs"] = [
            {"job_name": "nvidia-dcgm-exporter", "static_configs": [
                {"targets": [f"127.0.0.1:{self.node_port}"],
                 "labels": {"__param_node": str(i), "namespace": "gpu-operator",
                            "pod": f"nvidia-dcgm-exporter-{i:05d}"}} for i in range(self.nodes)]},
            {"job_name": "kube-state-metrics", "static_configs": [{"targets": [self.ksm]}]},
        ]
        path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        return path


def main() -> None:
    nodes = int(sys.argv[1]) if len(sys.argv) > 1 else 250
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 60
    # DaemonSet pod names are <daemonset>-<5 chars>; the bench uses 5 digits
    spec = parse_spec((ROOT / "examples/kubernetes.yaml").read_text(), "examples/kubernetes.yaml")
    groups = [RuleGroup("inventory", tuple(inventory.field_present(spec) + inventory.inventory(spec)), 2.0),
              RuleGroup("kubernetes", tuple(kubernetes.rules(spec)), 2.0)]
    ksm = Cluster(nodes=[Node(f"gpu-{i:05d}", 8) for i in range(nodes)],
                  pods=[Pod(f"nvidia-dcgm-exporter-{i:05d}", f"gpu-{i:05d}", f"uid-{i}") for i in range(nodes)],
                  desired=nodes, ready=nodes)
    text = ksm.exposition()
    httpd, port = serve_nodes()
    with tempfile.TemporaryDirectory() as tmp, ExpositionServer(lambda: text) as k:
        rule_file = Path(tmp) / "rules.yaml"
        rule_file.write_text(yaml.safe_dump({"groups": [group_dict(g) for g in groups]}, sort_keys=False))
        with BenchPrometheus(nodes, port, k.address, rule_file) as prom:
            want = nodes * 8
            assert prom.wait_for(lambda: prom.query(f"{names.GPUS_EXPECTED} == {want}")
                                 and prom.query(f"{names.GPU_DEVICES_REPORTING} == {want}"), 120), prom.logs()
            samples: dict[str, list[float]] = {"inventory": [], "kubernetes": []}
            last: dict[str, str] = {}
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                for g in httpx.get(f"{prom.url}/api/v1/rules", timeout=10).json()["data"]["groups"]:
                    if g["lastEvaluation"] != last.get(g["name"]):
                        last[g["name"]] = g["lastEvaluation"]
                        samples[g["name"]].append(g["evaluationTime"])
                time.sleep(1)
            per_rule: dict[str, list[float]] = {}
            for _ in range(10):
                for g in httpx.get(f"{prom.url}/api/v1/rules", timeout=10).json()["data"]["groups"]:
                    if g["name"] == "kubernetes":
                        for r in g["rules"]:
                            per_rule.setdefault(r["name"], []).append(r["evaluationTime"])
                time.sleep(2)
            up = prom.query(f"count({names.NODE_EXPORTER_UP} == 1)")
            print(f"{nodes} nodes x 8 GPUs, {nodes} exporter targets; expected = reporting = {want}; "
                  f"nodes with an exporter target up: {up[0]['value'][1]}")
            for name, values in samples.items():
                print(f"{name:<11} mean {statistics.mean(values) * 1000:7.2f} ms  "
                      f"p90 {sorted(values)[int(len(values) * 0.9)] * 1000:7.2f} ms  ({len(values)} evaluations)")
            print("kubernetes group, slowest rules (mean of 10 reads):")
            for name, values in sorted(per_rule.items(), key=lambda kv: -statistics.mean(kv[1]))[:5]:
                print(f"  {name:<45} {statistics.mean(values) * 1000:7.2f} ms")
    httpd.shutdown()


if __name__ == "__main__":
    main()
