"""The pages the simulator serves, each in its exporter's own format: dcgm-exporter 4.x (and its 1.x
names), utkuozdemir/nvidia_gpu_exporter, and node_exporter re-exposing gpumon's nvidia-smi textfile.

The dcgm-exporter page follows dcgm-exporter 4.x byte for byte: ``# HELP``/``# TYPE`` from the fields
CSV (``generator/gpumon/data/default-counters.csv``), series labels in the exporter's order ``gpu,
UUID, pci_bus_id, device, modelName[, GPU_I_PROFILE, GPU_I_ID], Hostname``, then label fields
(``DCGM_FI_DRIVER_VERSION``) and attributes (``err_code``, ``err_msg``) in key order; FP64 fields
printed with 6 decimals (Go ``%f``), integer fields as integers. Source: NVIDIA/dcgm-exporter
``internal/pkg/rendermetrics/render_metrics.go`` at tag 4.5.3-4.8.2. The other pages are written as
client_golang writes them (families and labels sorted, Go number format).

Page functions take the :class:`gpumon.simulate.Fleet` (``fleet``) whose readings they print: its
``value_text`` applies the value faults, its ``counters`` are the CSV's fields.
"""

from __future__ import annotations

import csv
import functools
import hashlib
import math
import re
from dataclasses import dataclass, field
from importlib import resources

from . import sidecar
from .simfaults import ECC_FIELDS, PRIMARY_KINDS, Fault
from .spec import presets as sourcepresets
from .spec.presets import DCGM_1X_NAMES as LEGACY_NAMES
# client_golang's float format (nvidia_gpu_exporter, node_exporter pages): Go's strconv 'g', -1
from .ruletests.gotemplate import go_float

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
#: err_msg dcgm-exporter writes for a few XID codes (its xid error message table)
XID_MESSAGES = {"0": "No Error", "13": "Graphics Engine Exception", "31": "GPU memory page fault",
                "48": "Double Bit ECC Error", "79": "GPU has fallen off the bus"}
MODEL = "NVIDIA H100 80GB HBM3"
DRIVER = "570.148.08"


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


def dcgm_page(fleet, node: Node, faults: list[Fault], now: float, legacy: bool = False) -> str:
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
    for counter in fleet.counters + extra:
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
                value = fleet.value_text(node, gpu, counter.name, now, faults, inst)
                if value is None:
                    continue
                labels = [("gpu", str(gpu)), ("uuid" if legacy else "UUID", gpu_uuid(node.name, gpu, fleet.uuid_salt)),
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
        meta = fleet.legacy_counters.get(name, counter) if legacy else counter
        lines.append(f"# HELP {name} {meta.help}")
        lines.append(f"# TYPE {name} {meta.type}")
        lines.extend(series)
    return "\n".join(lines) + "\n"


def fallback_reading(fleet, node: Node, gpu: int, metric: str, unit: str, now: float, faults: list[Fault],
                     count: int, source: str) -> float | str | None:
    """``metric``'s reading of ``gpu`` converted to a fallback's ``unit``: a float, None when a
    fault drops it, or ``"[N/A]"`` where nvidia-smi would print no number (a sentinel fault:
    DCGM's blank is nvidia-smi's "[N/A]")."""
    text = fleet.value_text(node, gpu, metric, now, faults, None, count, key=source)
    if text is None:
        return None
    if any(f.kind == "sentinel" and f.matches(node.name, gpu, metric) for f in faults):
        return "[N/A]"
    value = float(text)
    op, factor = sourcepresets.conversion(unit, _FIELD_UNITS[metric]) or ("*", 1.0)
    # conversion() maps source -> metric unit; the page needs the inverse
    return value / factor if op == "*" else value * factor


def mig_skips(node: Node, gpu: int, metric: str, faults: list[Fault]) -> bool:
    """True when nvidia-smi prints no number for ``metric`` of ``gpu`` (a MIG-enabled GPU's utilization)."""
    # nvidia-smi prints [N/A] for utilization on a MIG-enabled GPU (--help-query-gpu)
    return metric in MIG_UNSUPPORTED and any(f.kind == "mig" and f.matches(node.name, gpu) for f in faults)


def nvidia_gpu_exporter_page(fleet, node: Node, faults: list[Fault], now: float, count: int) -> str:
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
            if mig_skips(node, gpu, metric, faults):
                continue
            value = fallback_reading(fleet, node, gpu, metric, unit, now, faults, count, "nvidia_gpu_exporter")
            if value is None or isinstance(value, str):   # the exporter leaves out what it cannot parse
                continue
            lines.append(f'{series}{{uuid="{gpu_uuid(node.name, gpu, fleet.uuid_salt)[4:]}"}} {go_float(value)}')
        families[series] = (f"{field_name}{_SMI_UNIT[_FIELD_UNITS[metric]]}", lines)
    info = []
    for gpu in range(node.gpus):
        driver = next((f.value for f in faults if f.kind == "driver-version" and f.matches(node.name, gpu)), DRIVER)
        info.append(f'nvidia_smi_gpu_info{{driver_version="{driver}",index="{gpu}",name="{MODEL}",'
                    f'pci_bus_id="00000000:{0x18 + 0x10 * gpu:02X}:00.0",'
                    f'uuid="{gpu_uuid(node.name, gpu, fleet.uuid_salt)[4:]}"}} 1')
    families["nvidia_smi_gpu_info"] = ("A metric with a constant '1' value labeled by gpu uuid, name, "
                                       "driver_version, pci_bus_id, index.", info)
    families["nvidia_smi_command_exit_code"] = ("Exit code of the most recent nvidia-smi run",
                                                ["nvidia_smi_command_exit_code 0"])
    return families_text(families)


def textfile_page(fleet, node: Node, faults: list[Fault], now: float, count: int) -> str:
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
            value = (None if mig_skips(node, gpu, metric, faults) else
                     fallback_reading(fleet, node, gpu, metric, unit, now, faults, count, "nvidia-smi-textfile"))
            if isinstance(value, str) or (mig_skips(node, gpu, metric, faults)):
                missing += 1
                continue
            if value is None or math.isnan(value):   # the script writes numbers only
                continue
            lines.append(f'{series}{{Hostname="{host}",UUID="{gpu_uuid(node.name, gpu, fleet.uuid_salt)}",'
                         f'gpu="{gpu}"}} {go_float(value)}')
        families[series] = (textfile_help().get(series, f"Metric read from {TEXTFILE_PATH}"), lines)
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
    return families_text(families)


def families_text(families: dict[str, tuple[str, list[str]]]) -> str:
    """``# HELP``/``# TYPE`` (gauge) and samples per family, families sorted by name (client_golang's
    gatherer sorts them); a family without samples is left out, as client_golang does."""
    out = []
    for name in sorted(families):
        help_, lines = families[name]
        if lines:
            out += [f"# HELP {name} {help_}", f"# TYPE {name} gauge"] + sorted(lines)
    return "\n".join(out) + "\n"


@functools.cache


def textfile_help() -> dict[str, str]:
    """{series: HELP text} of the sidecar script's describe() table (one source of the texts)."""
    return {series: text for series, text in re.findall(
        r'^\s+[a-z.]+\) echo "(gpumon_nvidia_smi_[a-z_]+) [a-z]+ ([^"]*)"', sidecar.script_text(), re.M)}
