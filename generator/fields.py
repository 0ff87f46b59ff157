"""dcgm-exporter's field lists (generator/data/*.csv, copied from NVIDIA/dcgm-exporter ``etc/``).

Each CSV line is ``DCGM FIELD, Prometheus metric type, help message``; lines starting with ``#``
are disabled fields, which are still real field names (users enable them in their own CSV).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

_LINE = re.compile(r"^#?\s*([A-Za-z_][A-Za-z0-9_]*)\s*,\s*(gauge|counter|label)\s*,\s*(.*)$")


@dataclass(frozen=True)
class Field:
    """One CSV entry: ``kind`` is gauge, counter or label; ``enabled`` false for commented lines."""

    name: str
    kind: str
    help: str
    enabled: bool


def read_csv(filename: str) -> dict[str, Field]:
    """Parse one bundled CSV (``default-counters.csv`` ...) into {name: Field}. An enabled line
    wins over a commented one (the default CSV lists PCIE_TX_BYTES commented as a counter, then
    enabled as a gauge); otherwise the first entry wins."""
    text = resources.files("generator").joinpath(f"data/{filename}").read_text("utf-8")
    out: dict[str, Field] = {}
    for raw in text.splitlines():
        match = _LINE.match(raw.strip())
        if not match:
            continue
        name, kind, help_ = match.groups()
        enabled = not raw.lstrip().startswith("#")
        if name not in out or (enabled and not out[name].enabled):
            out[name] = Field(name, kind, help_.strip(), enabled)
    return out


@lru_cache(maxsize=None)
def default_counters() -> dict[str, Field]:
    """The exporter image's default field list (``-f /etc/dcgm-exporter/default-counters.csv``)."""
    return read_csv("default-counters.csv")


@lru_cache(maxsize=None)
def known_fields() -> dict[str, Field]:
    """Every DCGM field name gpumon knows (default and DCP lists, enabled or not)."""
    out = dict(read_csv("dcp-metrics-included.csv"))
    out.update({k: v for k, v in default_counters().items() if k not in out})
    return out


@lru_cache(maxsize=None)
def legacy_fields() -> dict[str, Field]:
    """Lower-case ``dcgm_*`` names of exporter 1.x compatibility mode (``-o``)."""
    return read_csv("1.x-compatibility-metrics.csv")
