"""A dcgm-exporter simulator: N nodes x M GPUs, one plain-HTTP ``/metrics`` port per node (one
scrape target per node, like the exporter's DaemonSet), with fault injection.

The exposition follows dcgm-exporter 4.x byte for byte: ``# HELP``/``# TYPE`` from the fields CSV
(``generator/gpumon/data/default-counters.csv``), series labels in the exporter's order ``gpu, UUID,
pci_bus_id, device, modelName[, GPU_I_PROFILE, GPU_I_ID], Hostname``, then label fields
(``DCGM_FI_DRIVER_VERSION``) and attributes (``err_code``, ``err_msg``) in key order; FP64 fields
printed with 6 decimals (Go ``%f``), integer fields as integers. Source: NVIDIA/dcgm-exporter
``internal/pkg/rendermetrics/render_metrics.go`` at tag 4.5.3-4.8.2.

Faults come from :class:`Fault` values (CLI flags; modelled in :mod:`gpumon.simfaults`) and/or a
YAML/JSON file that is re-read on every scrape, so a running fleet can be broken and repaired without a restart::

    faults:
      - {kind: drop, metric: DCGM_FI_DEV_GPU_UTIL}                        # every GPU
      - {kind: drop, metric: DCGM_FI_DEV_FB_USED, node: gpu-node-2}        # one node
      - {kind: intermittent, metric: DCGM_FI_DEV_POWER_USAGE, node: gpu-node-1, gpu: 0, every: 2}
      - {kind: http500, node: gpu-node-3}

Sources (issue 13): besides dcgm-exporter 4.x a node may serve, each as its own target, the other
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

import csv
import hashlib
import math
import sys
import threading
import time
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from . import sidecar

from .spec import presets as sourcepresets
from .simfaults import (ECC_FIELDS, FAULT_KINDS, PRIMARY_KINDS, SOURCE_KINDS, Fault, FaultError,  # noqa: F401
                        SourceError, _METRIC_KINDS, describe_kinds, describe_sources, dumps_faults, load_faults,
                        parse_sources)  # re-exported: the simulator's inputs, modelled in simfaults
from .localprom import ExpositionServer
# client_golang's float format (nvidia_gpu_exporter, node_exporter pages): Go's strconv 'g', -1
from .ruletests.gotemplate import go_float
from .spec.presets import DCGM_1X_NAMES as LEGACY_NAMES

#: Prometheus job of each kind's targets in serve_forever's scrape config: the presets' defaults
SOURCE_JOBS = {"dcgm-exporter": "dcgm-exporter", "dcgm-exporter-1.x": "dcgm-exporter",
               "nvidia_gpu_exporter": sourcepresets.PRESETS["nvidia_gpu_exporter"].job,
               "nvidia-smi-textfile": sourcepresets.TEXTFILE_JOB}
#: units of the DCGM fields a fallback serves (dcgm-exporter's CSV help texts)
_FIELD_UNITS = {"DCGM_FI_DEV_GPU_TEMP": "celsius", "DCGM_FI_DEV_MEMORY_TEMP": "celsius",
                "DCGM_FI_DEV_POWER_USAGE": "watts", "DCGM_FI_DEV_GPU_UTIL": "percent",
                "DCGM_FI_DEV_MEM_COPY_UTIL": "percent", "DCGM_FI_DEV_FB_USED": "MiB", "DCGM_FI_DEV_FB_FREE": "MiB",
                "DCGM_FI_DEV_SM_CLOCK": "MHz", "DCGM_FI_DEV_MEM_CLOCK": "MHz"}
#: nvidia-smi's unit suffix in a --format=csv header (nvidia_gpu_exporter's HELP texts)
_SMI_UNIT = {"celsius": "", "watts": " [W]", "percent": " [%]", "MiB": " [MiB]", "MHz": " [MHz]"}
#: where the simulated node_exporter reads the textfile (the sidecar's mount)
TEXTFILE_PATH = f"{sidecar.TEXTFILE_MOUNT}/gpumon-nvidia-smi.prom"


#: DCGM fields of type FP64, which dcgm-exporter prints with %f (dcgm_fields.h field types).
FLOAT_FIELDS = frozenset({"DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
                          "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_DRAM_ACTIVE"})
#: DCGM blank codes served by the ``sentinel`` fault: DCGM_INT64_NOT_SUPPORTED
#: (0x7ffffffffffffff0 + 2) and DCGM_FP64_NOT_SUPPORTED (2^47 + 2), from dcgm_structs.h.
SENTINEL_INT, SENTINEL_FLOAT = 9223372036854775794, 140737488355330.0
#: Fields DCGM does not report per MIG instance (the spec marks them ``mig: unsupported``).
MIG_UNSUPPORTED = frozenset({"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_MEM_COPY_UTIL",
                             "DCGM_FI_DEV_ENC_UTIL", "DCGM_FI_DEV_DEC_UTIL"})
#: Only present on vGPU hosts: a bare-metal exporter gets a blank value and skips the series.
_VGPU_ONLY = frozenset({"DCGM_FI_DEV_VGPU_LICENSE_STATUS"})
#: err_msg dcgm-exporter writes for a few XID codes (its xid error message table)
XID_MESSAGES = {"0": "No Error", "13": "Graphics Engine Exception", "31": "GPU memory page fault",
                "48": "Double Bit ECC Error", "79": "GPU has fallen off the bus"}
MODEL = "NVIDIA H100 80GB HBM3"
DRIVER = "570.148.08"
FB_TOTAL_MIB = 81559


@dataclass(frozen=True)
class Counter:
    """A field from the exporter's CSV: name, Prometheus type, help text."""

    name: str
    type: str
    help: str


def counters(csv_name: str = "default-counters.csv") -> list[Counter]:
    """Fields of a dcgm-exporter collectors CSV (``# comments`` and ``label`` rows skipped), in file
    order, which is the order dcgm-exporter writes them in."""
    text = resources.files("gpumon").joinpath(f"data/{csv_name}").read_text("utf-8")
    out = []
    for row in csv.reader(line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")):
        name, typ, help_ = row[0].strip(), row[1].strip(), ",".join(row[2:]).strip()
        if typ != "label":
            out.append(Counter(name, typ, help_))
    return out


def gpu_uuid(node: str, index: int, salt: str = "") -> str:
    """A stable, UUID-shaped GPU id for (node, GPU index); ``salt`` tells fleets with the same node
    names apart (two simulated fleets must not share GPUs, or validate sees duplicate UUIDs)."""
    h = hashlib.sha1(f"{salt}{node}/{index}".encode()).hexdigest()
    return f"GPU-{h[:8]}-{h[8:12]}-4{h[13:16]}-8{h[17:20]}-{h[20:32]}"


def fmt_value(name: str, value: float) -> str:
    """A value as dcgm-exporter prints it: %f for FP64 fields, an integer otherwise; NaN as NaN."""
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if name in FLOAT_FIELDS:
        return f"{value:f}"
    return str(int(value))


@dataclass
class Node:
    """One simulated node: its primary exporter pod (one target) and the fallback sources it
    serves (one target each). ``scrapes`` counts the primary's scrapes, ``source_scrapes`` the
    others' (``intermittent`` and ``every`` faults use them)."""

    name: str
    gpus: int
    scrapes: int = 0
    first_values: dict = field(default_factory=dict)
    sources: tuple[str, ...] = ("dcgm-exporter",)
    source_scrapes: dict = field(default_factory=dict)

    @property
    def primary(self) -> str | None:
        """The node's dcgm-exporter kind (4.x or 1.x names), None when it serves fallbacks only."""
        return next((k for k in self.sources if k in PRIMARY_KINDS), None)


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
        self._textfile_help = _textfile_help()
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

    def _value(self, node: Node, gpu: int, name: str, now: float, faults: list[Fault], instance: int | None,
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
            return 200, self.nvidia_gpu_exporter_page(node, faults, self.clock(), count), delay
        if source == "nvidia-smi-textfile":
            return 200, self.textfile_page(node, faults, self.clock(), count), delay
        return 200, self.exposition(node, faults, self.clock(), legacy=source == "dcgm-exporter-1.x"), delay

    def exposition(self, node: Node, faults: list[Fault], now: float, legacy: bool = False) -> str:
        """The text dcgm-exporter would serve for ``node`` with ``faults`` at time ``now``
        (``legacy``: its 1.x names, as the ``legacy-names`` fault)."""
        legacy = legacy or any(f.kind == "legacy-names" for f in faults)
        host_label = "hostname" if any(f.kind == "hostname-rename" for f in faults) else "Hostname"
        no_prof = any(f.kind == "no-profiling" for f in faults)
        lines: list[str] = []
        extra = []
        if any(f.kind == "ecc-storm" for f in faults):
            extra = [Counter(n, "counter", h) for n, h in zip(ECC_FIELDS, (
                "Total number of single-bit volatile ECC errors.", "Total number of double-bit volatile ECC errors."))]
        for counter in self.counters + extra:
            name = LEGACY_NAMES.get(counter.name) if legacy else counter.name
            if name is None or (no_prof and counter.name.startswith("DCGM_FI_PROF_")):
                continue
            series = []
            for gpu in range(node.gpus):
                driver = next((f.value for f in faults if f.kind == "driver-version" and f.matches(node.name, gpu)), DRIVER)
                mig = next((f for f in faults if f.kind == "mig" and f.matches(node.name, gpu)), None)
                instances: list[int | None] = list(range(1, mig.instances + 1)) if mig else [None]
                if mig and counter.name in MIG_UNSUPPORTED:
                    continue
                for inst in instances:
                    value = self._value(node, gpu, counter.name, now, faults, inst)
                    if value is None:
                        continue
                    labels = [("gpu", str(gpu)), ("uuid" if legacy else "UUID", gpu_uuid(node.name, gpu, self.uuid_salt)),
                              ("pci_bus_id", f"00000000:{0x18 + 0x10 * gpu:02X}:00.0"), ("device", f"nvidia{gpu}"),
                              ("modelName", MODEL)]
                    if inst is not None:
                        labels += [("GPU_I_PROFILE", f"{7 // mig.instances}g.{80 // mig.instances}gb"),
                                   ("GPU_I_ID", str(inst))]
                    labels += [(host_label, node.name), ("DCGM_FI_DRIVER_VERSION", driver)]
                    if counter.name == "DCGM_FI_DEV_XID_ERRORS":
                        xid = next((f for f in faults if f.kind == "xid" and f.matches(node.name, gpu)), None)
                        if xid is not None:
                            value = xid.value
                        code = "0" if xid is None else xid.value
                        labels += [("err_code", code), ("err_msg", XID_MESSAGES.get(code, "Unknown Error"))]
                    inner = ",".join(f'{k}="{v}"' for k, v in labels)
                    series.append(f"{name}{{{inner}}} {value}")
            meta = self.legacy_counters.get(name, counter) if legacy else counter
            lines.append(f"# HELP {name} {meta.help}")
            lines.append(f"# TYPE {name} {meta.type}")
            lines.extend(series)
        return "\n".join(lines) + "\n"

    # ----------------------------------------------------------------- fallback sources
    def _fallback_reading(self, node: Node, gpu: int, metric: str, unit: str, now: float, faults: list[Fault],
                          count: int, source: str) -> float | str | None:
        """``metric``'s reading of ``gpu`` converted to a fallback's ``unit``: a float, None when a
        fault drops it, or ``"[N/A]"`` where nvidia-smi would print no number (a sentinel fault:
        DCGM's blank is nvidia-smi's "[N/A]")."""
        text = self._value(node, gpu, metric, now, faults, None, count, key=source)
        if text is None:
            return None
        if any(f.kind == "sentinel" and f.matches(node.name, gpu, metric) for f in faults):
            return "[N/A]"
        value = float(text)
        op, factor = sourcepresets.conversion(unit, _FIELD_UNITS[metric]) or ("*", 1.0)
        # conversion() maps source -> metric unit; the page needs the inverse
        return value / factor if op == "*" else value * factor

    def _mig_skips(self, node: Node, gpu: int, metric: str, faults: list[Fault]) -> bool:
        # nvidia-smi prints [N/A] for utilization on a MIG-enabled GPU (--help-query-gpu)
        return metric in MIG_UNSUPPORTED and any(f.kind == "mig" and f.matches(node.name, gpu) for f in faults)

    def nvidia_gpu_exporter_page(self, node: Node, faults: list[Fault], now: float, count: int) -> str:
        """What utkuozdemir/nvidia_gpu_exporter serves for ``node``: ``nvidia_smi_<field>{uuid}``
        (the UUID without ``GPU-``, no node label), HELP = the nvidia-smi field with its unit,
        ``nvidia_smi_gpu_info`` and ``nvidia_smi_command_exit_code``; families sorted by name and
        values in Go's format, as client_golang writes them (its internal/integration/testdata)."""
        families: dict[str, tuple[str, list[str]]] = {}
        preset = sourcepresets.PRESETS["nvidia_gpu_exporter"]
        for metric, (series, unit) in preset.series.items():
            field_name = sourcepresets.TEXTFILE_SERIES[metric][2]
            lines = []
            for gpu in range(node.gpus):
                if self._mig_skips(node, gpu, metric, faults):
                    continue
                value = self._fallback_reading(node, gpu, metric, unit, now, faults, count, "nvidia_gpu_exporter")
                if value is None or isinstance(value, str):   # the exporter leaves out what it cannot parse
                    continue
                lines.append(f'{series}{{uuid="{gpu_uuid(node.name, gpu, self.uuid_salt)[4:]}"}} {go_float(value)}')
            families[series] = (f"{field_name}{_SMI_UNIT[_FIELD_UNITS[metric]]}", lines)
        info = []
        for gpu in range(node.gpus):
            driver = next((f.value for f in faults if f.kind == "driver-version" and f.matches(node.name, gpu)), DRIVER)
            info.append(f'nvidia_smi_gpu_info{{driver_version="{driver}",index="{gpu}",name="{MODEL}",'
                        f'pci_bus_id="00000000:{0x18 + 0x10 * gpu:02X}:00.0",'
                        f'uuid="{gpu_uuid(node.name, gpu, self.uuid_salt)[4:]}"}} 1')
        families["nvidia_smi_gpu_info"] = ("A metric with a constant '1' value labeled by gpu uuid, name, "
                                           "driver_version, pci_bus_id, index.", info)
        families["nvidia_smi_command_exit_code"] = ("Exit code of the most recent nvidia-smi run",
                                                    ["nvidia_smi_command_exit_code 0"])
        return _families_text(families)

    def textfile_page(self, node: Node, faults: list[Fault], now: float, count: int) -> str:
        """What node_exporter serves for ``node`` with gpumon's nvidia-smi sidecar running
        (:mod:`gpumon.sidecar`): the script's ``gpumon_nvidia_smi_*`` series and status series,
        re-exposed as node_exporter's client_golang writes them (labels and families sorted, Go
        number format), plus the textfile collector's ``node_textfile_mtime_seconds`` and
        ``node_textfile_scrape_error``. A value nvidia-smi would print as "[N/A]" is left out and
        counted in ``gpumon_nvidia_smi_unavailable_samples``, as the script does."""
        host = node.name.replace("\\", "\\\\").replace('"', '\\"')
        families: dict[str, tuple[str, list[str]]] = {}
        unavailable = []
        for metric, (series, unit, field_name) in sourcepresets.TEXTFILE_SERIES.items():
            lines, missing = [], 0
            for gpu in range(node.gpus):
                value = (None if self._mig_skips(node, gpu, metric, faults) else
                         self._fallback_reading(node, gpu, metric, unit, now, faults, count, "nvidia-smi-textfile"))
                if isinstance(value, str) or (self._mig_skips(node, gpu, metric, faults)):
                    missing += 1
                    continue
                if value is None or math.isnan(value):   # the script writes numbers only
                    continue
                lines.append(f'{series}{{Hostname="{host}",UUID="{gpu_uuid(node.name, gpu, self.uuid_salt)}",'
                             f'gpu="{gpu}"}} {go_float(value)}')
            families[series] = (self._textfile_help.get(series, f"Metric read from {TEXTFILE_PATH}"), lines)
            if missing:
                unavailable.append(f'gpumon_nvidia_smi_unavailable_samples{{Hostname="{host}",field="{field_name}",'
                                   f'reason="not_available"}} {missing}')
        stamp = go_float(float(int(now)))
        for name, value, help_ in (
                ("gpumon_nvidia_smi_up", "1", "1 when the last nvidia-smi query exited 0 within the timeout, else 0."),
                ("gpumon_nvidia_smi_exit_code", "0", "Exit status of the last nvidia-smi query (124 or 143: timed out, "
                 "137: killed after the timeout)."),
                ("gpumon_nvidia_smi_last_run_timestamp_seconds", stamp, "When the last query started (Unix time)."),
                ("gpumon_nvidia_smi_last_success_timestamp_seconds", stamp, "When the last successful query "
                 "started (Unix time; 0: none since the sidecar started)."),
                ("gpumon_nvidia_smi_gpus", str(node.gpus), "GPU rows with a valid UUID and index in the last query."),
                ("gpumon_nvidia_smi_skipped_rows", "0", "Output lines of the last query that were not a GPU row "
                 "(error text, truncated rows).")):
            families[name] = (help_, [f'{name}{{Hostname="{host}"}} {value}'])
        if unavailable:
            families["gpumon_nvidia_smi_unavailable_samples"] = (
                "Samples of the last query left out because nvidia-smi printed no number ([N/A], [Not Supported], "
                "[Unknown Error], ERR!).", unavailable)
        families["node_textfile_mtime_seconds"] = ("Unixtime mtime of textfiles successfully read.",
                                                   [f'node_textfile_mtime_seconds{{file="{TEXTFILE_PATH}"}} {stamp}'])
        families["node_textfile_scrape_error"] = ("1 if there was an error opening or reading a file, 0 otherwise",
                                                  ["node_textfile_scrape_error 0"])
        return _families_text(families)


def _families_text(families: dict[str, tuple[str, list[str]]]) -> str:
    """``# HELP``/``# TYPE`` (gauge) and samples per family, families sorted by name (client_golang's
    gatherer sorts them); a family without samples is left out, as client_golang does."""
    out = []
    for name in sorted(families):
        help_, lines = families[name]
        if lines:
            out += [f"# HELP {name} {help_}", f"# TYPE {name} gauge"] + sorted(lines)
    return "\n".join(out) + "\n"


def _textfile_help() -> dict[str, str]:
    """{series: HELP text} of the sidecar script's describe() table (one source of the texts)."""
    import re

    return {series: text for series, text in re.findall(
        r'^\s+[a-z.]+\) echo "(gpumon_nvidia_smi_[a-z_]+) [a-z]+ ([^"]*)"', sidecar.script_text(), re.M)}


class Simulator:
    """Serve a :class:`Fleet`: one :class:`~gpumon.localprom.ExpositionServer` per node and
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
            print(f"- job_name: {job}\n  static_configs:\n    - targets: [" + ", ".join(f"'{a}'" for a in addrs) + "]",
                  file=out)
        out.flush()
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
