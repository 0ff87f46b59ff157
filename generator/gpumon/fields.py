"""DCGM fields gpumon knows: the field catalogue and dcgm-exporter's field lists.

- ``generator/gpumon/data/dcgm_fields.json``: every DCGM field of NVIDIA/DCGM's ``dcgm_fields.h`` at the
  release tags it names (id, value type, unit, entity) with the dcgm-exporter releases whose
  ``default-counters.csv``/``dcp-metrics-included.csv`` list it (Prometheus type, help). Generated
  by ``scripts/field_catalogue.py``; its ``sources`` key names the repositories, tags and commits.
- ``generator/gpumon/data/*.csv``: dcgm-exporter's current lists, copied verbatim (``etc/``): the image's
  default list (what the simulator serves) and the 1.x compatibility names.

Each CSV line is ``DCGM FIELD, Prometheus metric type, help message``; lines starting with ``#``
are disabled fields, which are still real field names (users enable them in their own CSV).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

_LINE = re.compile(r"^#?\s*([A-Za-z_][A-Za-z0-9_]*)\s*,\s*(gauge|counter|label)\s*,\s*(.*)$")


@dataclass(frozen=True)
class Field:
    """One known field. ``kind`` is the exporter's Prometheus type (gauge, counter, label; '' when
    no dcgm-exporter release lists the field); ``enabled`` false for commented CSV lines.
    Catalogue fields also carry DCGM's ``field_id``, value ``type`` (int64, double, string ...),
    ``unit`` as DCGM prints it ('C', 'W', '' when none), and the releases that have them:
    ``dcgm`` (DCGM versions) and ``exporter`` (dcgm-exporter tags)."""

    name: str
    kind: str
    help: str
    enabled: bool = True
    field_id: int | None = None
    type: str | None = None
    unit: str = ""
    dcgm: tuple[str, ...] = ()
    exporter: tuple[str, ...] = ()


def read_csv(filename: str) -> dict[str, Field]:
    """Parse one bundled CSV (``default-counters.csv`` ...) into {name: Field}. An enabled line
    wins over a commented one (the default CSV lists PCIE_TX_BYTES commented as a counter, then
    enabled as a gauge); otherwise the first entry wins."""
    text = resources.files("gpumon").joinpath(f"data/{filename}").read_text("utf-8")
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
def catalogue_document() -> dict:
    """The catalogue as shipped: ``{"about", "sources", "fields": {name: {...}}}``."""
    return json.loads(resources.files("gpumon").joinpath("data/dcgm_fields.json").read_text("utf-8"))


@lru_cache(maxsize=None)
def catalogue() -> dict[str, Field]:
    """Every catalogued DCGM field by name (DCGM names, deprecated aliases, dcgm-exporter's own
    ``DCGM_EXP_*``), about 1,100."""
    return {name: Field(name, e.get("prometheus_type") or "", e.get("help") or e.get("description", ""),
                        True, e.get("id"), e.get("type"), e.get("unit", ""), tuple(e.get("dcgm", ())),
                        tuple(e.get("exporter", {})))
            for name, e in catalogue_document()["fields"].items()}


@lru_cache(maxsize=None)
def default_counters() -> dict[str, Field]:
    """The exporter image's default field list (``-f /etc/dcgm-exporter/default-counters.csv``)."""
    return read_csv("default-counters.csv")


@lru_cache(maxsize=None)
def known_fields() -> dict[str, Field]:
    """Every DCGM field name gpumon knows: the catalogue (see :func:`catalogue`)."""
    return catalogue()


def describe(name: str) -> str:
    """One line on where a catalogued field comes from, for messages: id, type, unit, releases."""
    f = catalogue().get(name)
    if f is None:
        return f"{name} is not in gpumon's DCGM field catalogue"
    parts = [f"field id {f.field_id}" if f.field_id is not None else "a dcgm-exporter field"]
    parts += [f"type {f.type}"] if f.type else []
    parts += [f"unit {f.unit}"] if f.unit else []
    parts += [f"DCGM {', '.join(f.dcgm)}"] if f.dcgm else []
    parts += [f"dcgm-exporter {', '.join(f.exporter)}"] if f.exporter else ["in no dcgm-exporter field list"]
    return f"{name}: " + "; ".join(parts)


#: a unit note in a field's help: ``" (in C)"`` anywhere, ``" in Watts"`` at the end
_UNIT_NOTE = re.compile(r"\s*\(in [^)]*\)|\s+in (?:Watts|W|C|Celsius|MHz|MiB|MB|KiB|KB|bytes|mJ|J|ms|us|seconds)$")
#: the longest default title (:func:`title`) taken from a field's help; a longer help reads as a
#: sentence, not a name, and the derived name is used instead
TITLE_MAX = 48


def title(name: str, fallback: str) -> str:
    """A short human name for field ``name``, for a spec metric without a ``title``: its help from
    dcgm-exporter's field lists (or DCGM's description), without the unit note and the full stop
    (``"GPU temperature (in C)."`` -> ``"GPU temperature"``, ``"... of the device in Watts"`` ->
    ``"... of the device"``); ``fallback`` when the field has no help, or a help longer than
    :data:`TITLE_MAX` characters, over several lines or with a parenthesis left open (a description
    cut short: ``"Auto-boost for the device (1 = enabled"``)."""
    f = catalogue().get(name)
    text = _UNIT_NOTE.sub("", (f.help if f else "").strip().rstrip(".")).strip()
    if not text or len(text) > TITLE_MAX or "\n" in text or text.count("(") != text.count(")"):
        return fallback
    return text[0].upper() + text[1:]


@lru_cache(maxsize=None)
def legacy_fields() -> dict[str, Field]:
    """Lower-case ``dcgm_*`` names of exporter 1.x compatibility mode (``-o``)."""
    return read_csv("1.x-compatibility-metrics.csv")
