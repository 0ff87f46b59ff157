"""A dcgm-exporter simulator: N nodes x M GPUs, one plain-HTTP ``/metrics`` port per node (one
scrape target per node, like the exporter's DaemonSet), with fault injection.

The exposition follows dcgm-exporter 4.x byte for byte: ``# HELP``/``# TYPE`` from the fields CSV
(``generator/data/default-counters.csv``), series labels in the exporter's order ``gpu, UUID,
pci_bus_id, device, modelName[, GPU_I_PROFILE, GPU_I_ID], Hostname``, then label fields
(``DCGM_FI_DRIVER_VERSION``) and attributes (``err_code``, ``err_msg``) in key order; FP64 fields
printed with 6 decimals (Go ``%f``), integer fields as integers. Source: NVIDIA/dcgm-exporter
``internal/pkg/rendermetrics/render_metrics.go`` at tag 4.5.3-4.8.2.

Faults come from :class:`Fault` values (CLI flags) and/or a YAML/JSON file that is re-read on every
scrape, so a running fleet can be broken and repaired without a restart::

    faults:
      - {kind: drop, metric: DCGM_FI_DEV_GPU_UTIL}                        # every GPU
      - {kind: drop, metric: DCGM_FI_DEV_FB_USED, node: gpu-node-2}        # one node
      - {kind: intermittent, metric: DCGM_FI_DEV_POWER_USAGE, node: gpu-node-1, gpu: 0, every: 2}
      - {kind: http500, node: gpu-node-3}
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import sys
import threading
import time
from dataclasses import dataclass, field, fields
from importlib import resources
from pathlib import Path

import yaml

from .localprom import ExpositionServer
from .sourcepresets import DCGM_1X_NAMES as LEGACY_NAMES

#: Fault kinds. Metric-scoped kinds take ``metric`` (None = every metric); all take ``node`` and
#: ``gpu`` (None = all).
FAULT_KINDS = {
    "drop": "leave the metric out (a field the exporter no longer collects)",
    "intermittent": "leave the metric out on every k-th scrape of the node (`every`, default 2)",
    "empty": "answer 200 with an empty page (with `every`: only on every k-th scrape)",
    "http500": "answer HTTP 500 (with `every`: only on every k-th scrape, a flapping target)",
    "slow": "answer after `seconds` (default 2) seconds, e.g. beyond the scrape timeout (`every` as above)",
    "sentinel": "serve the DCGM blank / not-supported code instead of a reading (dcgm_structs.h)",
    "nan": "serve NaN",
    "zero": "serve 0 (telemetry not really collected)",
    "value": "serve a fixed `value`",
    "frozen": "serve the value of the node's first scrape forever (hung collection)",
    "hostname-rename": "label the node `hostname` instead of `Hostname` (dcgm-exporter PR #655)",
    "legacy-names": "serve 1.x names (dcgm_gpu_temp, label uuid) instead of DCGM_FI_* (use-old-namespace)",
    "mig": "partition the GPU into `instances` MIG instances (default 2)",
    "driver-version": "report driver `value` instead of the fleet's",
    "no-profiling": "leave out every DCGM_FI_PROF_* field (the DCGM profiling module is not loaded, dcgm-exporter#571)",
    "counter-reset": "serve 0 on every k-th scrape (`every`, default 3): a counter that goes down (dcgm-exporter#417)",
    "xid": "report XID `value` (e.g. 79) on DCGM_FI_DEV_XID_ERRORS with its err_code/err_msg labels (NVIDIA/DCGM#227)",
    "ecc-storm": "serve the ECC volatile counters (not in the default CSV) on the node, the correctable one rising "
                 "`value` per second (default 17700) on the matched GPUs (NVIDIA/DCGM#313)",
}
_METRIC_KINDS = {"drop", "intermittent", "sentinel", "nan", "zero", "value", "frozen", "counter-reset", "ecc-storm"}
#: fields the ``ecc-storm`` fault adds to the page (commented out in dcgm-exporter's default CSV)
ECC_FIELDS = ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL")

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


class FaultError(ValueError):
    """A fault definition that cannot be used; the message names the fault and the problem."""


@dataclass(frozen=True)
class Fault:
    """One injected fault. ``node`` is a node name (``gpu-node-1``), ``gpu`` a GPU index; None
    means every node / GPU. ``metric`` None means every metric (metric-scoped kinds only)."""

    kind: str
    metric: str | None = None
    node: str | None = None
    gpu: int | None = None
    every: int | None = None
    seconds: float = 2.0
    value: str | None = None
    instances: int = 2

    def __post_init__(self):
        if self.kind not in FAULT_KINDS:
            raise FaultError(f"unknown fault kind {self.kind!r}; choose one of {', '.join(FAULT_KINDS)}")
        if self.every is not None and self.every < 1:
            raise FaultError(f"fault {self.kind}: every must be >= 1")
        if self.kind in ("value", "driver-version", "xid") and self.value is None:
            raise FaultError(f"fault {self.kind}: needs value")

    def matches(self, node: str, gpu: int | None = None, metric: str | None = None) -> bool:
        """True when this fault applies to ``node`` (and ``gpu``/``metric`` when given)."""
        return ((self.node is None or self.node == node)
                and (gpu is None or self.gpu is None or self.gpu == gpu)
                and (metric is None or self.metric is None or self.metric == metric))

    @classmethod
    def from_dict(cls, data: dict) -> "Fault":
        """Build from a mapping with the dataclass' field names.

        Raises:
            FaultError: unknown key, kind or a value of the wrong type.
        """
        if not isinstance(data, dict):
            raise FaultError(f"a fault must be a mapping, not {data!r}")
        known = {f.name for f in fields(cls)}
        extra = sorted(set(data) - known)
        if extra:
            raise FaultError(f"fault {data!r}: unknown key(s) {', '.join(extra)}; allowed: {', '.join(sorted(known))}")
        try:
            conv = dict(data)
            for key, typ in (("gpu", int), ("every", int), ("instances", int), ("seconds", float)):
                if conv.get(key) is not None:
                    conv[key] = typ(conv[key])
            if conv.get("value") is not None:
                conv["value"] = str(conv["value"])
            if conv.get("node") is not None:
                conv["node"] = str(conv["node"])
            return cls(**conv)
        except (TypeError, ValueError) as exc:
            if isinstance(exc, FaultError):
                raise
            raise FaultError(f"fault {data!r}: {exc}") from None

    @classmethod
    def parse(cls, text: str) -> "Fault":
        """Parse the CLI form ``kind=drop,metric=DCGM_FI_DEV_GPU_UTIL,node=gpu-node-2,gpu=1``."""
        data = {}
        for part in filter(None, (p.strip() for p in text.split(","))):
            key, sep, value = part.partition("=")
            if not sep:
                raise FaultError(f"fault {text!r}: expected key=value, got {part!r}")
            data[key.strip()] = value.strip()
        if "kind" not in data:
            raise FaultError(f"fault {text!r}: kind=... is required")
        return cls.from_dict(data)


def load_faults(path: str | Path) -> list[Fault]:
    """Read faults from a YAML or JSON file: a list, or a mapping with a ``faults`` list.

    Raises:
        FaultError: unreadable file, bad syntax or a bad fault (message names the file).
    """
    try:
        doc = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise FaultError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise FaultError(f"{path}: not YAML/JSON: {exc}") from None
    if doc is None:
        return []
    items = doc.get("faults", []) if isinstance(doc, dict) else doc
    if not isinstance(items, list):
        raise FaultError(f"{path}: expected a list of faults or {{faults: [...]}}")
    try:
        return [Fault.from_dict(item) for item in items]
    except FaultError as exc:
        raise FaultError(f"{path}: {exc}") from None


@dataclass(frozen=True)
class Counter:
    """A field from the exporter's CSV: name, Prometheus type, help text."""

    name: str
    type: str
    help: str


def counters(csv_name: str = "default-counters.csv") -> list[Counter]:
    """Fields of a dcgm-exporter collectors CSV (``# comments`` and ``label`` rows skipped), in file
    order, which is the order dcgm-exporter writes them in."""
    text = resources.files("generator").joinpath(f"data/{csv_name}").read_text("utf-8")
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
    """One simulated node (one exporter pod, one target)."""

    name: str
    gpus: int
    scrapes: int = 0
    first_values: dict = field(default_factory=dict)


class Fleet:
    """N nodes x M GPUs and their faults; :meth:`page` renders one node's exposition.

    Args:
        nodes / gpus: fleet size (nodes named ``gpu-node-1..N``).
        faults: faults always active.
        fault_file: a YAML/JSON file re-read on every scrape (a broken file keeps the last good
            faults and prints the problem on stderr).
        clock: seconds since the epoch (tests pass a fake one).
        uuid_salt: mixed into the GPU UUIDs (see :func:`gpu_uuid`); "" keeps the default UUIDs.
    """

    def __init__(self, nodes: int = 2, gpus: int = 2, faults: list[Fault] = (), fault_file: str | Path | None = None,
                 clock=time.time, uuid_salt: str = ""):
        if nodes < 1 or gpus < 1:
            raise ValueError("need at least one node and one GPU")
        self.nodes = [Node(f"gpu-node-{i + 1}", gpus) for i in range(nodes)]
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

    def _value(self, node: Node, gpu: int, name: str, now: float, faults: list[Fault], instance: int | None) -> str | None:
        """The printed value, or None when a fault drops the series."""
        value: float = self.reading(node, gpu, name, now, instance)
        for f in faults:
            if f.kind not in _METRIC_KINDS or not f.matches(node.name, gpu, name):
                continue
            if f.kind == "drop" or (f.kind == "intermittent" and node.scrapes % (f.every or 2) == 0):
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
                value = node.first_values.setdefault((gpu, instance, name), value)
            elif f.kind == "counter-reset" and node.scrapes % (f.every or 3) == 0:
                value = 0
            elif f.kind == "ecc-storm" and name == ECC_FIELDS[0]:
                value = int(float(f.value or 17700) * (now - self.start))
        return fmt_value(name, value)

    # ----------------------------------------------------------------- exposition
    def page(self, node_name: str) -> tuple[int, str]:
        """One scrape of ``node_name``: (HTTP status, body). Applies node-level faults (slow, 500,
        empty) and counts the scrape (``intermittent`` uses the count)."""
        status, body, delay = self.respond(node_name)
        if delay:
            time.sleep(delay)
        return status, body

    def respond(self, node_name: str) -> tuple[int, str, float]:
        """Like :meth:`page` without sleeping: (HTTP status, body, seconds the answer takes). A
        scraper with a virtual clock (tests/matrix.py) reads the delay instead of waiting."""
        node = self.node(node_name)
        with self._lock:
            node.scrapes += 1
            count = node.scrapes
        # node-level faults with `every` hit only every k-th scrape (a flapping target)
        faults = [f for f in self.faults() if f.matches(node.name)
                  and (f.kind not in ("empty", "http500", "slow") or not f.every or count % f.every == 0)]
        delay = sum(f.seconds for f in faults if f.kind == "slow" and f.gpu is None)
        if any(f.kind == "http500" for f in faults):
            return 500, "An error has occurred while serving metrics:\n\ncollector failed\n", delay
        if any(f.kind == "empty" for f in faults):
            return 200, "", delay
        return 200, self.exposition(node, faults, self.clock()), delay

    def exposition(self, node: Node, faults: list[Fault], now: float) -> str:
        """The text dcgm-exporter would serve for ``node`` with ``faults`` at time ``now``."""
        legacy = any(f.kind == "legacy-names" for f in faults)
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


class Simulator:
    """Serve a :class:`Fleet`: one :class:`~generator.localprom.ExpositionServer` per node.

    Args:
        fleet: the fleet.
        host: address to bind (default loopback only).
        base_port: first port (node i gets base_port + i); 0 picks free ports.
    Use as a context manager; ``targets`` maps node name to ``host:port``.
    """

    def __init__(self, fleet: Fleet, host: str = "127.0.0.1", base_port: int = 0):
        self.fleet = fleet
        self.servers: dict[str, ExpositionServer] = {}
        for i, node in enumerate(fleet.nodes):
            port = base_port + i if base_port else None
            self.servers[node.name] = ExpositionServer(lambda n=node.name: fleet.page(n), port=port, host=host)

    @property
    def targets(self) -> dict[str, str]:
        """{node name: "host:port"}, in node order."""
        return {name: srv.address for name, srv in self.servers.items()}

    def __enter__(self) -> "Simulator":
        for srv in self.servers.values():
            srv.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        for srv in self.servers.values():
            srv.__exit__(*exc)


def describe_kinds() -> str:
    """One line per fault kind, for ``--help``."""
    return "\n".join(f"  {k:16} {v}" for k, v in FAULT_KINDS.items())


def dumps_faults(faults: list[Fault]) -> str:
    """Faults as the JSON a fault file may contain (for logs and docs)."""
    return json.dumps({"faults": [{k: v for k, v in f.__dict__.items() if v is not None} for f in faults]}, indent=2)


def serve_forever(fleet: Fleet, host: str = "127.0.0.1", base_port: int = 9400, out=sys.stdout) -> None:
    """Serve ``fleet`` until interrupted, printing one ``node  http://host:port/metrics`` line per
    target and a ready-to-paste Prometheus ``static_configs`` block.

    Raises:
        OSError: a port is taken (the caller reports it).
    """
    with Simulator(fleet, host=host, base_port=base_port) as sim:
        for node, addr in sim.targets.items():
            print(f"{node}  http://{addr}/metrics", file=out)
        print("# scrape config:\n- job_name: dcgm-exporter\n  static_configs:\n    - targets: ["
              + ", ".join(f"'{a}'" for a in sim.targets.values()) + "]", file=out, flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
