"""A Thanos global view on 127.0.0.1, for the tests: clusters of Prometheus HA pairs, a sidecar per
replica, one Thanos Query deduplicating on ``replica``, and a Thanos Ruler evaluating rules
against that Query.

The topology is the one fleets that outgrow one Prometheus run (Thanos docs, "Quick Tutorial"
and "Rule"): every replica of cluster ``c`` has ``external_labels: {cluster: c, replica: i}``;
the sidecar exposes it over the StoreAPI; Query merges and deduplicates; the Ruler's own
results (recording rules, ``ALERTS``) live in its TSDB and reach Query through the Ruler's
StoreAPI, which Query lists as one more endpoint. Every process binds 127.0.0.1, runs with a
temporary folder and is stopped by its PID.
"""

from __future__ import annotations

import subprocess
import tempfile
from contextlib import ExitStack
from pathlib import Path

import httpx

from gpumon.localprom import LocalPrometheus, stop_process, wait_for, wait_ready
from gpumon.loopback import free_port


class Process:
    """One server process with its log; stopped by PID (SIGTERM, then SIGKILL)."""

    def __init__(self, name: str, argv: list[str], folder: Path):
        self.name, self.argv = name, argv
        self.log_path = folder / f"{name}.log"
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)

    def wait_ready(self, url: str, timeout: float = 90) -> None:
        """Poll ``url`` until it answers 200. Raises RuntimeError with the log otherwise."""
        wait_ready(self.proc, url, timeout, self.name, self.logs)

    def logs(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-3000:]
        except OSError:
            return ""

    def stop(self) -> None:
        stop_process(self.proc)
        self.log.close()


class Replica:
    """One Prometheus of an HA pair and its Thanos sidecar."""

    def __init__(self, prom: LocalPrometheus, sidecar: Process, grpc: str):
        self.prom, self.sidecar, self.grpc = prom, sidecar, grpc

    def stop(self) -> None:
        self.sidecar.stop()
        self.prom.stop()


class ThanosTopology:
    """Clusters of HA pairs behind one Thanos Query, with a Thanos Ruler on top.

    Args:
        thanos: the thanos binary; prometheus: the prometheus binary of the pairs.
        clusters: {cluster name: {job: [host:port, ...]}}, scraped by both replicas.
        rule_files: loaded by the Ruler (not by the Prometheus pairs).
        replicas: replicas per cluster (2: an HA pair).
        interval: scrape and rule evaluation interval.
    ``query_url`` is Thanos Query's HTTP API, ``ruler_url`` the Ruler's.
    """

    def __init__(self, thanos: str, prometheus: str, clusters: dict[str, dict[str, list[str]]],
                 rule_files: list[Path] = (), replicas: int = 2, interval: str = "1s"):
        self.thanos, self.prometheus = thanos, prometheus
        self.clusters, self.rule_files, self.replicas, self.interval = clusters, list(rule_files), replicas, interval
        self.stack = ExitStack()
        self.tmp = tempfile.TemporaryDirectory(prefix="gpumon-thanos-")
        self.folder = Path(self.tmp.name)
        self.pairs: dict[str, list[Replica]] = {}

    def _sidecar(self, name: str, prom: LocalPrometheus) -> Replica:
        grpc, http = free_port(), free_port()
        proc = Process(f"sidecar-{name}", [
            self.thanos, "sidecar", f"--prometheus.url={prom.url}",
            f"--tsdb.path={Path(prom.tmp.name) / 'data'}",
            f"--grpc-address=127.0.0.1:{grpc}", f"--http-address=127.0.0.1:{http}"], self.folder)
        self.stack.callback(proc.stop)
        proc.wait_ready(f"http://127.0.0.1:{http}/-/ready")
        return Replica(prom, proc, f"127.0.0.1:{grpc}")

    def start(self) -> "ThanosTopology":
        for cluster, targets in self.clusters.items():
            for i in range(self.replicas):
                prom = LocalPrometheus(targets, scrape_interval=self.interval, evaluation_interval=self.interval,
                                       binary=self.prometheus, external_labels={"cluster": cluster, "replica": str(i)})
                self.stack.enter_context(prom)
                self.pairs.setdefault(cluster, []).append(self._sidecar(f"{cluster}-{i}", prom))
        ruler_grpc, ruler_http, query_grpc, query_http = free_port(), free_port(), free_port(), free_port()
        self.query_url = f"http://127.0.0.1:{query_http}"
        self.ruler_url = f"http://127.0.0.1:{ruler_http}"
        endpoints = [r.grpc for pair in self.pairs.values() for r in pair]
        if self.rule_files:
            endpoints.append(f"127.0.0.1:{ruler_grpc}")
        self.query = Process("query", [
            self.thanos, "query", f"--http-address=127.0.0.1:{query_http}", f"--grpc-address=127.0.0.1:{query_grpc}",
            "--query.replica-label=replica",
            *[f"--endpoint={e}" for e in endpoints]], self.folder)
        self.stack.callback(self.query.stop)
        self.query.wait_ready(f"{self.query_url}/-/ready")
        if self.rule_files:
            rules = []
            for i, src in enumerate(self.rule_files):
                dst = self.folder / f"rules-{i}-{src.name}"
                dst.write_bytes(src.read_bytes())
                rules.append(f"--rule-file={dst}")
            self.ruler = Process("ruler", [
                self.thanos, "rule", f"--data-dir={self.folder / 'ruler'}", f"--eval-interval={self.interval}",
                f"--query={self.query_url}", f"--http-address=127.0.0.1:{ruler_http}",
                f"--grpc-address=127.0.0.1:{ruler_grpc}", '--label=ruler="global"', *rules], self.folder)
            self.stack.callback(self.ruler.stop)
            self.ruler.wait_ready(f"{self.ruler_url}/-/ready")
        return self

    def stop(self) -> None:
        self.stack.close()
        self.tmp.cleanup()

    def __enter__(self) -> "ThanosTopology":
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc) -> None:
        self.stop()

    # ------------------------------------------------------------------ reading
    def query_instant(self, expr: str, **params) -> dict:
        """Instant query on Thanos Query (deduplicated); the whole JSON answer."""
        resp = httpx.get(f"{self.query_url}/api/v1/query", params={"query": expr, "dedup": "true", **params},
                         timeout=30)
        resp.raise_for_status()
        return resp.json()

    def result(self, expr: str) -> list[dict]:
        return self.query_instant(expr)["data"]["result"]

    def alerts(self, state: str | None = "firing") -> list[dict]:
        """The Ruler's alerts (``/api/v1/alerts``): [{labels, state, ...}], optionally one state."""
        resp = httpx.get(f"{self.ruler_url}/api/v1/alerts", timeout=10)
        resp.raise_for_status()
        data = resp.json()["data"]
        # Thanos Ruler 0.42 answers {"Alerts": [...]} where Prometheus answers {"alerts": [...]}
        found = data.get("alerts", data.get("Alerts")) or []
        return [a for a in found if state is None or a.get("state") == state]

    def logs(self) -> str:
        parts = [self.query.logs()]
        if getattr(self, "ruler", None):
            parts.append(self.ruler.logs())
        return "\n--- ruler\n".join(parts)

    def wait_for(self, predicate, timeout: float = 90, step: float = 0.5) -> bool:
        return wait_for(predicate, timeout, step)
