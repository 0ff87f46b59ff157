"""A dcgm-exporter simulator: N nodes x M GPUs, one plain-HTTP ``/metrics`` port per node (one
scrape target per node, like the exporter's DaemonSet), with fault injection.

:class:`Fleet` holds the nodes, their readings and faults and answers one scrape at a time; the
pages are written in each exporter's format by :mod:`gpumon.simpages`, and served over HTTP by
:mod:`gpumon.simserve`.

Faults come from :class:`Fault` values (CLI flags; modelled in :mod:`gpumon.simfaults`) and/or a
YAML/JSON file that is re-read on every scrape, so a running fleet can be broken and repaired without a restart::

    faults:
      - {kind: drop, metric: DCGM_FI_DEV_GPU_UTIL}                        # every GPU
      - {kind: drop, metric: DCGM_FI_DEV_FB_USED, node: gpu-node-2}        # one node
      - {kind: intermittent, metric: DCGM_FI_DEV_POWER_USAGE, node: gpu-node-1, gpu: 0, every: 2}
      - {kind: http500, node: gpu-node-3}

Sources: besides dcgm-exporter 4.x a node may serve, each as its own target, the other
exporters gpumon's source presets read (:data:`SOURCE_KINDS`, named after the presets in
:mod:`gpumon.spec.presets`): dcgm-exporter's 1.x names instead of 4.x, an
utkuozdemir/nvidia_gpu_exporter page and a node_exporter page carrying gpumon's nvidia-smi textfile
(:mod:`gpumon.sidecar`). Every source serves the same underlying readings in its own names,
labels and units, so the normalized series must read one value per GPU whichever serves it.
Faults apply to every source of their node unless they name one (``source: dcgm-exporter``): the
field guide's case is ``{kind: drop, metric: DCGM_FI_DEV_GPU_TEMP, node: gpu-node-2, source:
dcgm-exporter}`` on a node that also serves ``nvidia-smi-textfile``.
"""

from __future__ import annotations

import hashlib
import math
import sys
import threading
import time
from pathlib import Path

from . import simpages
from .simfaults import (ECC_FIELDS, PRIMARY_KINDS, SOURCE_KINDS, Fault, FaultError, SourceError, _METRIC_KINDS,
                        load_faults)
from .simpages import FLOAT_FIELDS, SENTINEL_FLOAT, SENTINEL_INT, Counter, Node, counters, fmt_value

#: Only present on vGPU hosts: a bare-metal exporter gets a blank value and skips the series.
_VGPU_ONLY = frozenset({"DCGM_FI_DEV_VGPU_LICENSE_STATUS"})
FB_TOTAL_MIB = 81559


class Fleet:
    """N nodes x M GPUs and their faults; :meth:`page` renders one node's exposition.

    Args:
        nodes / gpus: fleet size (nodes named ``gpu-node-1..N``).
        faults: faults always active.
        fault_file: a YAML/JSON file re-read on every scrape (a broken file keeps the last good
            faults and prints the problem on stderr).
        clock: seconds since the epoch (tests pass a fake one).
        uuid_salt: mixed into the GPU UUIDs (see :func:`gpu_uuid`); "" keeps the default UUIDs.
        sources: {node name: the :data:`SOURCE_KINDS` it serves}; a node not listed serves
            ``("dcgm-exporter",)``. At most one of :data:`PRIMARY_KINDS` per node.
    Raises:
        SourceError: an unknown node or source kind, or two primaries on one node.
    """

    def __init__(self, nodes: int = 2, gpus: int = 2, faults: list[Fault] = (), fault_file: str | Path | None = None,
                 clock=time.time, uuid_salt: str = "", sources: dict[str, tuple[str, ...] | list[str]] | None = None):
        if nodes < 1 or gpus < 1:
            raise ValueError("need at least one node and one GPU")
        self.nodes = [Node(f"gpu-node-{i + 1}", gpus) for i in range(nodes)]
        names = {n.name for n in self.nodes}
        for node_name, kinds in (sources or {}).items():
            if node_name not in names:
                raise SourceError(f"sources: no node {node_name!r} (nodes are gpu-node-1..gpu-node-{nodes})")
            kinds = tuple(dict.fromkeys(kinds))
            unknown = [k for k in kinds if k not in SOURCE_KINDS]
            if unknown or not kinds:
                raise SourceError(f"sources of {node_name}: unknown kind {(unknown or [''])[0]!r}; "
                                  f"choose from {', '.join(SOURCE_KINDS)}")
            if sum(k in PRIMARY_KINDS for k in kinds) > 1:
                raise SourceError(f"sources of {node_name}: serve one of {', '.join(PRIMARY_KINDS)}, not both")
            self.node(node_name).sources = kinds
        self.static_faults = list(faults)
        self.fault_file = Path(fault_file) if fault_file else None
        self._file_faults: list[Fault] = []
        self.clock = clock
        self.uuid_salt = uuid_salt
        self.start = clock()
        self.counters = [c for c in counters() if c.name not in _VGPU_ONLY]
        # 1.x mode writes the 1.x CSV's help texts and types (first entry wins: the CSV lists
        # the PCIe byte fields twice)
        self.legacy_counters: dict[str, Counter] = {}
        for c in counters("1.x-compatibility-metrics.csv"):
            self.legacy_counters.setdefault(c.name, c)
        self._lock = threading.Lock()

    def faults(self) -> list[Fault]:
        """Active faults: static ones plus the fault file as it is now."""
        if self.fault_file is not None:
            try:
                self._file_faults = load_faults(self.fault_file) if self.fault_file.exists() else []
            except FaultError as exc:
                print(f"gpumon simulate: keeping previous faults: {exc}", file=sys.stderr)
        return self.static_faults + self._file_faults

    def node(self, name: str) -> Node:
        return next(n for n in self.nodes if n.name == name)

    # ----------------------------------------------------------------- values
    def reading(self, node: Node, gpu: int, name: str, now: float, instance: int | None = None) -> float:
        """A plausible, slowly varying reading of field ``name`` (units as in the CSV help)."""
        seed = int(hashlib.sha1(f"{node.name}/{gpu}/{name}".encode()).hexdigest()[:8], 16)
        phase = (seed % 1000) / 1000 * 2 * math.pi
        wave = 0.5 + 0.5 * math.sin(now / 60 + phase)  # 0..1, period about 6 minutes
        elapsed = now - self.start
        power = 120 + 450 * wave
        share = 1 if instance is None else 1 / 2
        table = {
            "DCGM_FI_DEV_SM_CLOCK": 1410 + int(570 * wave), "DCGM_FI_DEV_MEM_CLOCK": 2619,
            "DCGM_FI_DEV_MEMORY_TEMP": 38 + int(20 * wave), "DCGM_FI_DEV_GPU_TEMP": 34 + int(40 * wave),
            "DCGM_FI_DEV_POWER_USAGE": round(power, 3),
            # mJ since boot: a base plus the average draw (about 345 W) times the time since start
            "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": 10_000_000_000 + seed % 10**9 + int(345_000 * elapsed),
            "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": 0, "DCGM_FI_DEV_GPU_UTIL": int(100 * wave),
            "DCGM_FI_DEV_MEM_COPY_UTIL": int(60 * wave), "DCGM_FI_DEV_ENC_UTIL": 0, "DCGM_FI_DEV_DEC_UTIL": 0,
            "DCGM_FI_DEV_XID_ERRORS": 0,
            "DCGM_FI_DEV_FB_USED": int(FB_TOTAL_MIB * share * 0.9 * wave),
            "DCGM_FI_DEV_FB_FREE": int(FB_TOTAL_MIB * share * (1 - 0.9 * wave)) - 531,
            "DCGM_FI_DEV_FB_RESERVED": 531, "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": int(1e6 * wave),
            "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": 0, "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": 0,
            "DCGM_FI_DEV_ROW_REMAP_FAILURE": 0,
            "DCGM_FI_PROF_GR_ENGINE_ACTIVE": round(wave * 0.98, 6), "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": round(wave * 0.6, 6),
            "DCGM_FI_PROF_DRAM_ACTIVE": round(wave * 0.7, 6),
            "DCGM_FI_PROF_PCIE_TX_BYTES": int(2e8 * wave), "DCGM_FI_PROF_PCIE_RX_BYTES": int(1.8e8 * wave),
        }
        return table.get(name, 0)

    def value_text(self, node: Node, gpu: int, name: str, now: float, faults: list[Fault], instance: int | None,
               count: int | None = None, key: str = "") -> str | None:
        """The printed value, or None when a fault drops the series. ``count`` is the scrape
        count of the page (default: the primary's); ``key`` keeps a fallback's frozen values apart."""
        value: float = self.reading(node, gpu, name, now, instance)
        count = node.scrapes if count is None else count
        for f in faults:
            if f.kind not in _METRIC_KINDS or not f.matches(node.name, gpu, name):
                continue
            if f.kind == "drop" or (f.kind == "intermittent" and count % (f.every or 2) == 0):
                return None
            if f.kind == "sentinel":
                return fmt_value(name, SENTINEL_FLOAT if name in FLOAT_FIELDS else SENTINEL_INT)
            if f.kind == "nan":
                return "NaN"
            if f.kind == "zero":
                value = 0
            elif f.kind == "value":
                return f.value
            elif f.kind == "frozen":
                value = node.first_values.setdefault((gpu, instance, name) + ((key,) if key else ()), value)
            elif f.kind == "counter-reset" and count % (f.every or 3) == 0:
                value = 0
            elif f.kind == "ecc-storm" and name == ECC_FIELDS[0]:
                value = int(float(f.value or 17700) * (now - self.start))
        return fmt_value(name, value)

    # ----------------------------------------------------------------- exposition
    def page(self, node_name: str, source: str | None = None) -> tuple[int, str]:
        """One scrape of ``node_name``'s ``source`` target (None: its primary): (HTTP status,
        body). Applies node-level faults (slow, 500, empty) and counts the scrape (``intermittent``
        uses the count)."""
        status, body, delay = self.respond(node_name, source)
        if delay:
            time.sleep(delay)
        return status, body

    def respond(self, node_name: str, source: str | None = None) -> tuple[int, str, float]:
        """Like :meth:`page` without sleeping: (HTTP status, body, seconds the answer takes). A
        scraper with a virtual clock (tests/matrix.py) reads the delay instead of waiting.

        Raises:
            SourceError: the node does not serve ``source``.
        """
        node = self.node(node_name)
        source = source or node.primary
        if source not in node.sources:
            raise SourceError(f"{node_name} does not serve {source!r} (it serves {', '.join(node.sources)})")
        with self._lock:
            if source in PRIMARY_KINDS:
                node.scrapes += 1
                count = node.scrapes
            else:
                count = node.source_scrapes[source] = node.source_scrapes.get(source, 0) + 1
        # node-level faults with `every` hit only every k-th scrape (a flapping target)
        faults = [f for f in self.faults() if f.matches(node.name, source=source)
                  and (f.kind not in ("empty", "http500", "slow") or not f.every or count % f.every == 0)]
        delay = sum(f.seconds for f in faults if f.kind == "slow" and f.gpu is None)
        if any(f.kind == "http500" for f in faults):
            return 500, "An error has occurred while serving metrics:\n\ncollector failed\n", delay
        if any(f.kind == "empty" for f in faults):
            return 200, "", delay
        if source == "nvidia_gpu_exporter":
            return 200, simpages.nvidia_gpu_exporter_page(self, node, faults, self.clock(), count), delay
        if source == "nvidia-smi-textfile":
            return 200, simpages.textfile_page(self, node, faults, self.clock(), count), delay
        return 200, simpages.dcgm_page(self, node, faults, self.clock(), legacy=source == "dcgm-exporter-1.x"), delay
