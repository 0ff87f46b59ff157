"""Serve a simulated fleet over HTTP: one :class:`~gpumon.loopback.ExpositionServer` per node and
source kind it serves (one scrape target each, like the exporters' DaemonSets), and
``gpumon simulate``'s foreground loop with its ready-to-paste scrape config."""

from __future__ import annotations

import sys
import threading

from .loopback import ExpositionServer
from .simfaults import PRIMARY_KINDS, SOURCE_KINDS
from .simulate import Fleet
from .spec import presets as sourcepresets

#: Prometheus job of each kind's targets in serve_forever's scrape config: the presets' defaults
SOURCE_JOBS = {"dcgm-exporter": "dcgm-exporter", "dcgm-exporter-1.x": "dcgm-exporter",
               "nvidia_gpu_exporter": sourcepresets.PRESETS["nvidia_gpu_exporter"].job,
               "nvidia-smi-textfile": sourcepresets.TEXTFILE_JOB}


class Simulator:
    """Serve a :class:`Fleet`: one :class:`~gpumon.loopback.ExpositionServer` per node and
    source it serves.

    Args:
        fleet: the fleet.
        host: address to bind (default loopback only).
        base_port: first port (the i-th target gets base_port + i, primaries first in node order,
            then each fallback kind's targets); 0 picks free ports.
    Use as a context manager; ``targets`` maps node name to its primary's ``host:port``,
    ``source_targets`` (node, source kind) to ``host:port`` for every target, ``jobs`` a job name
    (:data:`SOURCE_JOBS`) to its targets.
    """

    def __init__(self, fleet: Fleet, host: str = "127.0.0.1", base_port: int = 0):
        self.fleet = fleet
        self.servers: dict[tuple[str, str], ExpositionServer] = {}
        order = [(n.name, n.primary) for n in fleet.nodes if n.primary]
        order += [(n.name, kind) for kind in SOURCE_KINDS if kind not in PRIMARY_KINDS
                  for n in fleet.nodes if kind in n.sources]
        for i, (name, kind) in enumerate(order):
            port = base_port + i if base_port else None
            self.servers[(name, kind)] = ExpositionServer(lambda n=name, k=kind: fleet.page(n, k), port=port, host=host)

    @property
    def targets(self) -> dict[str, str]:
        """{node name: "host:port" of its dcgm-exporter}, in node order (nodes without one left out)."""
        return {name: srv.address for (name, kind), srv in self.servers.items() if kind in PRIMARY_KINDS}

    @property
    def source_targets(self) -> dict[tuple[str, str], str]:
        """{(node name, source kind): "host:port"} of every target."""
        return {key: srv.address for key, srv in self.servers.items()}

    @property
    def jobs(self) -> dict[str, list[str]]:
        """{Prometheus job: [host:port, ...]}: each kind under its preset's default job."""
        out: dict[str, list[str]] = {}
        for (_name, kind), srv in self.servers.items():
            out.setdefault(SOURCE_JOBS[kind], []).append(srv.address)
        return out

    def __enter__(self) -> "Simulator":
        for srv in self.servers.values():
            srv.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        for srv in self.servers.values():
            srv.__exit__(*exc)


def serve_forever(fleet: Fleet, host: str = "127.0.0.1", base_port: int = 9400, out=sys.stdout) -> None:
    """Serve ``fleet`` until interrupted, printing one ``node  http://host:port/metrics`` line per
    target and a ready-to-paste Prometheus ``static_configs`` block.

    Raises:
        OSError: a port is taken (the caller reports it).
    """
    with Simulator(fleet, host=host, base_port=base_port) as sim:
        mixed = any(kind != "dcgm-exporter" for _node, kind in sim.source_targets)
        for (node, kind), addr in sim.source_targets.items():
            print(f"{node}  http://{addr}/metrics" + (f"  {kind}" if mixed else ""), file=out)
        print("# scrape config:", file=out)
        for job, addrs in sim.jobs.items():
            # without it Prometheus scrapes every minute (its global default), which validate then
            # reports against the spec's 15 s
            print(f"- job_name: {job}\n  scrape_interval: 15s   # your spec's exporter.scrape_interval\n"
                  "  static_configs:\n    - targets: [" + ", ".join(f"'{a}'" for a in addrs) + "]", file=out)
        out.flush()
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
