#!/usr/bin/env python3
"""Regenerate ``generator/gpumon/data/dcgm_fields.json``, gpumon's catalogue of DCGM fields.

Sources (public, Apache-2.0), read from local copies so the run is offline and repeatable:

- NVIDIA/DCGM ``dcgmlib/dcgm_fields.h`` (field names and ids, the doc comment above each) and
  ``dcgmlib/src/dcgm_fields.cpp`` (value type and unit per field), at each release tag in
  ``DCGM_TAGS``, read with ``git show TAG:PATH`` from a clone given by ``--dcgm-git``;
- NVIDIA/dcgm-exporter ``etc/default-counters.csv`` and ``etc/dcp-metrics-included.csv`` at the
  release tags copied under ``--exporter-ref`` (``history/<list>.v<TAG>.csv``), for the
  Prometheus type, help text and which exporter releases list a field (enabled or commented).

Usage::

    python scripts/field_catalogue.py --dcgm-git PATH/TO/DCGM/.git \
        --exporter-ref PATH/TO/dcgm-exporter-copies > generator/gpumon/data/dcgm_fields.json

The output is deterministic (sorted keys, no timestamps): running it twice on the same sources
gives the same bytes.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

#: DCGM releases read; each is the DCGM version of a dcgm-exporter release series below
DCGM_TAGS = ("v2.4.7", "v3.3.9", "v4.0.0", "v4.5.3", "v4.6.0")
#: dcgm-exporter release tags whose field lists are copied under history/
EXPORTER_TAGS = ("2.4.7-2.6.11", "3.3.9-3.6.1", "4.0.0-4.0.1", "4.5.3-4.8.2")
#: the commit of each of those tags (NVIDIA/dcgm-exporter), recorded in the catalogue
EXPORTER_COMMITS = {"2.4.7-2.6.11": "18a06ef6460a6cad0d79fec429420210175eafc5",
                    "3.3.9-3.6.1": "b97b7633e3f39f7a537bd77561cc0ec0c2dca3f5",
                    "4.0.0-4.0.1": "5f9250c211a011dd46028bde83e1c4a625c46402",
                    "4.5.3-4.8.2": "691c92762eb551313c825f6efe4ceeee20982801"}
EXPORTER_LISTS = ("default-counters", "dcp-metrics-included")

_DEFINE_ID = re.compile(r"^#define\s+(DCGM_FI_\w+)\s+(\d+)\b", re.M)
_DEFINE_ALIAS = re.compile(r"^#define\s+(DCGM_FI_\w+)\s+(DCGM_FI_\w+)\s*(?://.*)?$", re.M)
#: markers of ranges and limits, not fields
_NOT_FIELD = re.compile(r"_(FIRST|LAST|MAX)_|_START$|_END$|^DCGM_FI_MAX_FIELDS$|^DCGM_FI_UNKNOWN$|_FIELD_UNKNOWN$")
_POPULATE = re.compile(
    r"DcgmFieldsPopulateOneFieldWithFormatting\(\s*(DCGM_FI_\w+)\s*,\s*DCGM_FT_(\w+)\s*,\s*\d+\s*,\s*\"[^\"]*\"\s*,"
    r"\s*\w+\s*,\s*[^,]+,\s*\"[^\"]*\"\s*,\s*(?:\"([^\"]*)\"|(?:\(char \*\))?getTextForEnum\((\w+)\))\s*,"
    r"\s*DCGM_FE_(\w+)")
#: the unit enum's text in dcgm_fields.cpp (getTextForEnum)
_UNIT_CASE = re.compile(r"case\s+(DCGM_FIELD_UNIT_\w+)\s*:\s*return\s+\"([^\"]*)\"")
_CSV_LINE = re.compile(r"^#?\s*(DCGM_\w+)\s*,\s*(gauge|counter|label)\s*,\s*(.*)$")
_TYPES = {"DOUBLE": "double", "INT64": "int64", "STRING": "string", "TIMESTAMP": "timestamp", "BINARY": "binary"}


def git_show(git_dir: str, tag: str, path: str) -> str:
    """``git show TAG:PATH`` in ``git_dir`` (a bare or normal clone of NVIDIA/DCGM)."""
    return subprocess.run(["git", "--git-dir", git_dir, "show", f"{tag}:{path}"], check=True,
                          capture_output=True, text=True).stdout


def header_fields(text: str) -> dict[str, tuple[int, str]]:
    """{field name: (id, first sentence of its doc comment)} from ``dcgm_fields.h``; deprecated
    names that alias a renamed field (``#define OLD NEW``) get the new field's id."""
    out: dict[str, tuple[int, str]] = {}
    for match in _DEFINE_ID.finditer(text):
        name, value = match.group(1), int(match.group(2))
        if not _NOT_FIELD.search(name):
            out[name] = (value, _doc_before(text, match.start()))
    for match in _DEFINE_ALIAS.finditer(text):
        old, new = match.groups()
        if new in out and not _NOT_FIELD.search(old):
            out.setdefault(old, out[new])
    return out


def _doc_before(text: str, pos: int) -> str:
    """First sentence of the comment (``/** ... */`` or ``/* ... */``) right above ``pos``, or ''
    when none is, or the one there trails the line of an earlier ``#define``. (The header writes
    many doc comments with one star: looking back for the last ``/**`` then ran across several
    defines and gave a field an earlier field's text, ``#define`` lines and all.)"""
    head = text[:pos].rstrip()
    if not head.endswith("*/"):
        return ""
    start = head.rfind("/*")
    if head[head.rfind("\n", 0, start) + 1:start].strip():
        return ""
    # every line's leading stars go (` *  * GPM support for the device` is one field's comment)
    body = " ".join(line.strip().lstrip("*/ ").strip() for line in head[start + 2:-2].splitlines())
    body = " ".join(body.split())
    return body.split(". ")[0].rstrip(".")[:200]


def cpp_meta(text: str) -> dict[str, tuple[str, str, str]]:
    """{field name: (value type, unit, entity group)} from ``dcgm_fields.cpp``."""
    text = re.sub(r"/\*.*?\*/|//[^\n]*", " ", text, flags=re.S)   # comments sit between arguments
    units = {enum: unit.strip() for enum, unit in _UNIT_CASE.findall(text)}
    return {m.group(1): (_TYPES.get(m.group(2), m.group(2).lower()),
                         m.group(3) if m.group(3) is not None else units.get(m.group(4), ""), m.group(5).lower())
            for m in _POPULATE.finditer(text)}


def exporter_lists(ref: Path) -> dict[str, dict]:
    """{field: {"prometheus_type", "help", "exporter": {tag: [list names]}}} from the copies of
    dcgm-exporter's CSVs; a later release's type and help win (an enabled line over a commented one)."""
    out: dict[str, dict] = {}
    for tag in EXPORTER_TAGS:
        for listname in EXPORTER_LISTS:
            path = ref / "history" / f"{listname}.v{tag}.csv"
            seen: dict[str, bool] = {}
            for raw in path.read_text("utf-8").splitlines():
                match = _CSV_LINE.match(raw.strip())
                if not match:
                    continue
                name, kind, help_ = match.groups()
                enabled = not raw.lstrip().startswith("#")
                entry = out.setdefault(name, {"exporter": {}})
                if name not in seen or (enabled and not seen[name]):
                    entry["prometheus_type"], entry["help"] = kind, help_.strip()
                seen[name] = seen.get(name, False) or enabled
                lists = entry["exporter"].setdefault(tag, [])
                if listname not in lists:
                    lists.append(listname)
    return out


def build(git_dir: str, ref: Path) -> dict:
    """The catalogue document (see the module docstring)."""
    fields: dict[str, dict] = {}
    for tag in DCGM_TAGS:
        ids = header_fields(git_show(git_dir, tag, "dcgmlib/dcgm_fields.h"))
        meta = cpp_meta(git_show(git_dir, tag, "dcgmlib/src/dcgm_fields.cpp"))
        for name, (fid, doc) in ids.items():
            entry = fields.setdefault(name, {"dcgm": []})
            entry["id"], entry["description"] = fid, doc or entry.get("description", "")
            entry["dcgm"].append(tag.lstrip("v"))
            if name in meta:
                entry["type"], entry["unit"], entry["entity"] = meta[name]
    # renamed fields: the old name carries the new name's type and unit
    by_id = {}
    for name, entry in fields.items():
        if "type" in entry:
            by_id.setdefault(entry["id"], entry)
    for entry in fields.values():
        if "type" not in entry and entry["id"] in by_id:
            src = by_id[entry["id"]]
            entry["type"], entry["unit"], entry["entity"] = src["type"], src["unit"], src["entity"]
    for name, exp in exporter_lists(ref).items():
        entry = fields.setdefault(name, {"dcgm": []})
        entry.update(exp)
    for entry in fields.values():
        for key, default in (("id", None), ("type", None), ("unit", ""), ("entity", None), ("description", ""),
                             ("prometheus_type", None), ("help", ""), ("exporter", {})):
            entry.setdefault(key, default)
    return {
        "about": "DCGM fields: id, value type, unit and entity from NVIDIA/DCGM dcgmlib/dcgm_fields.h and "
                 "dcgmlib/src/dcgm_fields.cpp; Prometheus type, help and listing per release from NVIDIA/dcgm-exporter "
                 "etc/default-counters.csv and etc/dcp-metrics-included.csv. Both Apache-2.0. "
                 "Regenerate with scripts/field_catalogue.py.",
        "sources": {
            "dcgm": {"repository": "https://github.com/NVIDIA/DCGM", "tags": list(DCGM_TAGS),
                     "commits": {tag: _rev(git_dir, tag) for tag in DCGM_TAGS}},
            "dcgm_exporter": {"repository": "https://github.com/NVIDIA/dcgm-exporter", "tags": list(EXPORTER_TAGS),
                              "commits": EXPORTER_COMMITS, "lists": list(EXPORTER_LISTS)},
        },
        "fields": dict(sorted(fields.items())),
    }


def _rev(git_dir: str, tag: str) -> str:
    return subprocess.run(["git", "--git-dir", git_dir, "rev-list", "-n", "1", tag], check=True,
                          capture_output=True, text=True).stdout.strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dcgm-git", required=True, help="git dir of a NVIDIA/DCGM clone with its release tags")
    parser.add_argument("--exporter-ref", required=True, type=Path,
                        help="folder with history/<list>.v<TAG>.csv copies of dcgm-exporter's field lists")
    args = parser.parse_args(argv)
    sys.stdout.write(dumps(build(args.dcgm_git, args.exporter_ref)))
    return 0


def dumps(doc: dict) -> str:
    """JSON with one field per line, so a regenerated catalogue diffs field by field."""
    head = {k: v for k, v in doc.items() if k != "fields"}
    lines = [json.dumps(head, sort_keys=True, indent=1)[:-2] + ",", ' "fields": {']
    items = [f"  {json.dumps(name)}: {json.dumps(entry, sort_keys=True)}" for name, entry in doc["fields"].items()]
    return "\n".join(lines + [",\n".join(items), " }", "}"]) + "\n"


if __name__ == "__main__":
    sys.exit(main())
