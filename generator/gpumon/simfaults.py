"""What the simulator is asked to break and to serve: fault kinds and :class:`Fault` values (CLI
flags, fault files), and the source kinds a node can serve (:data:`SOURCE_KINDS`, ``--source``).
:mod:`gpumon.simulate` serves a fleet with them; this module only models and parses them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path

import yaml

from .readers import files as inputfiles

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
    "hostname-rename": "label the node `hostname` instead of `Hostname` (NVIDIA/dcgm-exporter#655)",
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

#: What a node can serve, one target each (names as gpumon's source presets); the two dcgm-exporter
#: kinds are a node's primary (at most one per node), the others fallbacks beside it
SOURCE_KINDS = {
    "dcgm-exporter": "dcgm-exporter 4.x: DCGM_FI_*, label UUID (the default of every node)",
    "dcgm-exporter-1.x": "dcgm-exporter with 1.x names instead (dcgm_gpu_temp, label uuid; use-old-namespace)",
    "nvidia_gpu_exporter": "utkuozdemir/nvidia_gpu_exporter: nvidia_smi_*{uuid} (no GPU- prefix, no node label), "
                           "ratio, bytes, hertz",
    "nvidia-smi-textfile": "node_exporter with gpumon's nvidia-smi textfile: gpumon_nvidia_smi_*{Hostname,UUID,gpu}",
}
PRIMARY_KINDS = ("dcgm-exporter", "dcgm-exporter-1.x")


class SourceError(ValueError):
    """A node's sources cannot be served (unknown kind or node, two primaries)."""


class FaultError(ValueError):
    """A fault definition that cannot be used; the message names the fault and the problem."""


@dataclass(frozen=True)
class Fault:
    """One injected fault. ``node`` is a node name (``gpu-node-1``), ``gpu`` a GPU index; None
    means every node / GPU. ``metric`` None means every metric (metric-scoped kinds only); it is
    the DCGM field name on every source (``DCGM_FI_DEV_GPU_TEMP`` also drops nvidia-smi's
    temperature on a fallback page). ``source`` (a :data:`SOURCE_KINDS` name) narrows the fault
    to that source's target; None means every source of the node."""

    kind: str
    metric: str | None = None
    node: str | None = None
    gpu: int | None = None
    every: int | None = None
    seconds: float = 2.0
    value: str | None = None
    instances: int = 2
    source: str | None = None

    def __post_init__(self):
        if self.kind not in FAULT_KINDS:
            raise FaultError(f"unknown fault kind {self.kind!r}; choose one of {', '.join(FAULT_KINDS)}")
        if self.every is not None and self.every < 1:
            raise FaultError(f"fault {self.kind}: every must be >= 1")
        if self.kind in ("value", "driver-version", "xid") and self.value is None:
            raise FaultError(f"fault {self.kind}: needs value")
        if self.source is not None and self.source not in SOURCE_KINDS:
            raise FaultError(f"fault {self.kind}: unknown source {self.source!r}; choose one of {', '.join(SOURCE_KINDS)}")

    def matches(self, node: str, gpu: int | None = None, metric: str | None = None,
                source: str | None = None) -> bool:
        """True when this fault applies to ``node`` (and ``gpu``/``metric``/``source`` when given)."""
        return ((self.node is None or self.node == node)
                and (gpu is None or self.gpu is None or self.gpu == gpu)
                and (metric is None or self.metric is None or self.metric == metric)
                and (source is None or self.source is None or self.source == source))

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
            for key in ("node", "source"):
                if conv.get(key) is not None:
                    conv[key] = str(conv[key])
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
        text = inputfiles.read_text(Path(path), inputfiles.Limits(follow_symlinks=True))
        inputfiles.check_yaml(text)  # bounded like every YAML input (alias bombs, endless numbers)
        doc = yaml.safe_load(text)
    except inputfiles.Refused as exc:
        raise FaultError(f"{path}:{exc.line}:{exc.column}: not read: {exc}") from None
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


def describe_kinds() -> str:
    """One line per fault kind, for ``--help``."""
    return "\n".join(f"  {k:16} {v}" for k, v in FAULT_KINDS.items())


def describe_sources() -> str:
    """One line per source kind, for ``--help``."""
    return "\n".join(f"  {k:20} {v}" for k, v in SOURCE_KINDS.items())


def parse_sources(args: list[str] | tuple[str, ...], nodes: int) -> dict[str, tuple[str, ...]]:
    """``--source`` values -> the ``sources`` argument of :class:`Fleet`.

    Each value is ``KIND`` (every node) or ``KIND=gpu-node-2,gpu-node-3``. A primary kind
    (dcgm-exporter, dcgm-exporter-1.x) replaces the node's dcgm-exporter; a fallback kind is served
    beside it.

    Raises:
        SourceError: an unknown kind or a malformed value.
    """
    names = [f"gpu-node-{i + 1}" for i in range(nodes)]
    out = {name: ["dcgm-exporter"] for name in names}
    for arg in args:
        kind, sep, where = arg.partition("=")
        kind = kind.strip()
        if kind not in SOURCE_KINDS:
            raise SourceError(f"--source {arg!r}: unknown kind {kind!r}; choose one of {', '.join(SOURCE_KINDS)}")
        chosen = [n.strip() for n in where.split(",") if n.strip()] if sep else names
        if sep and not chosen:
            raise SourceError(f"--source {arg!r}: name the nodes after '=' (gpu-node-1,...) or leave '=' out")
        for name in chosen:
            if name not in out:
                raise SourceError(f"--source {arg!r}: no node {name!r} (nodes are gpu-node-1..gpu-node-{nodes})")
            if kind in PRIMARY_KINDS:
                out[name] = [kind] + [k for k in out[name] if k not in PRIMARY_KINDS]
            elif kind not in out[name]:
                out[name].append(kind)
    return {name: tuple(kinds) for name, kinds in out.items()}


def dumps_faults(faults: list[Fault]) -> str:
    """Faults as the JSON a fault file may contain (for logs and docs)."""
    return json.dumps({"faults": [{k: v for k, v in f.__dict__.items() if v is not None} for f in faults]}, indent=2)
