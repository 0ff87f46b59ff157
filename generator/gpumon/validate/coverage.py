"""The coverage matrix of a validate run: one row per GPU (grouped by cluster and node), one column
per spec'd field, one state per cell, each failing cell naming the finding that reports it.

Cell states:

* ``present`` -- reported now;
* ``missing`` -- a required field the GPU does not report now (the ``series-missing`` finding);
* ``intermittent`` -- present now but missing from some scrapes (``ratio``: share that carried it);
* ``implausible`` -- present with a NaN, sentinel, frozen or out-of-range value;
* ``fallback`` -- served only under its 1.x name (``legacy-metric-names``), or by one of the
  metric's ``sources`` (``fallback-serving``, issue 13);
* ``absent`` -- an optional or sparse field the GPU does not report (allowed by the spec);
* ``n/a`` -- a field DCGM does not report per MIG instance (``mig: unsupported``);
* ``down`` / ``lost`` -- the GPU's target is down, or the GPU reports nothing now.

Built from the shared inventory fact and the findings of the other checks, so it says exactly
what the findings say (a test counts one finding behind every missing cell).
"""

from __future__ import annotations

import re

from ..findings import Finding

_IMPLAUSIBLE = ("value-nan", "value-sentinel", "value-out-of-range", "value-frozen", "value-negative")


def _key(f: Finding) -> str:
    return f"{f.check}: {f.subject}"


def _field(f: Finding) -> str:
    return dict(f.labels).get("dcgm_field") or f.subject.split(" on ")[0]


def matrix(ctx, findings: list[Finding]) -> dict:
    """``{"fields": [...], "required": [...], "rows": [{"cluster", "node", "gpu", "uuid", "mig",
    "cells": {field: {"state", "finding"?, "ratio"?}}}], "counts": {state: n}, "dark_targets": [...]}``;
    dark targets are down and had no GPU seen in the lookback (so no row can show them)."""
    inv = ctx.inventory
    metrics = list(ctx.spec.tracked_metrics)
    by_field: dict[str, list[Finding]] = {}
    for f in findings:
        by_field.setdefault(_field(f), []).append(f)
    reporting = inv.reporting | {k for v in inv.legacy.values() for k in v}
    served = {m.name: ctx.sources.fallback(m.name) for m in metrics if m.sources}
    rows = []
    # by (cluster, node, index, MIG instance): key positions 5, 1, 3, 4
    for key in sorted(inv.sites, key=lambda k: (k[5], k[1], _num(k[3]), k[4])):
        gpu = inv.gpu(key)
        down = ctx.target_down(inv.instance(key))
        cells = {}
        for m in metrics:
            cells[m.name] = _cell(m, key, gpu, inv, by_field.get(m.name, []), down, key in reporting)
            if m.sources and cells[m.name]["state"] in ("missing", "absent", "lost") and not down \
                    and (gpu.cluster, gpu.uuid) in served[m.name]:
                f = next((f for f in by_field.get(m.name, []) if f.check == "fallback-serving"
                          and f.subject == f"{m.name} on {gpu.where or '?'}"), None)
                cells[m.name] = {"state": "fallback", **({"finding": _key(f)} if f else {})}
        rows.append({"cluster": gpu.cluster, "node": gpu.node, "gpu": gpu.index, "uuid": gpu.uuid, "mig": gpu.mig,
                     "cells": cells})
    counts: dict[str, int] = {}
    for row in rows:
        for cell in row["cells"].values():
            counts[cell["state"]] = counts.get(cell["state"], 0) + 1
    seen_on = {site.instance for site in inv.sites.values()}
    dark = sorted(i for i in ctx.targets.down if i not in seen_on)  # down since before the lookback
    return {"fields": [m.name for m in metrics], "required": [m.name for m in metrics if m.required],
            "rows": rows, "counts": counts, "dark_targets": dark}


def _num(text: str) -> int:
    return int(text) if text.isdigit() else -1


def _cell(m, key, gpu, inv, found: list[Finding], down: bool, reporting: bool) -> dict:
    if down:
        return {"state": "down"}
    if not reporting:
        return {"state": "lost"}
    if m.mig == "unsupported" and gpu.mig:
        return {"state": "n/a"}
    if key in inv.now.get(m.name, set()):
        for f in found:
            if f.check in _IMPLAUSIBLE and _names(f, gpu):
                return {"state": "implausible", "finding": _key(f)}
        for f in found:
            if f.check == "series-intermittent" and _names(f, gpu):
                ratio = re.search(re.escape(gpu.uuid) + r"[^)]*\) (\d+)%", f.message)
                cell = {"state": "intermittent", "finding": _key(f)}
                if ratio:
                    cell["ratio"] = int(ratio.group(1)) / 100
                return cell
        return {"state": "present"}
    if key in inv.legacy.get(m.name, {}):
        f = next((f for f in found if f.check == "legacy-metric-names"), None)
        return {"state": "fallback", **({"finding": _key(f)} if f else {})}
    if not m.required:
        return {"state": "absent"}
    for f in found:
        if f.check == "series-missing" and (f.subject == m.name or f.subject == f"{m.name} on {gpu.where or '?'}"):
            return {"state": "missing", "finding": _key(f)}
        if f.check == "field-unsupported-on-mig" and gpu.mig:
            return {"state": "n/a", "finding": _key(f)}
    return {"state": "missing"}


def _names(f: Finding, gpu) -> bool:
    """The finding is about this GPU (its UUID label, or the UUID in its message)."""
    labels = dict(f.labels)
    uuid = labels.get("UUID") or labels.get("uuid")
    if uuid:
        return uuid == gpu.uuid
    return bool(gpu.uuid) and gpu.uuid in f.message
