"""Dashboards too big for one ``kubectl apply`` ConfigMap, split by size into parts.

A dashboard whose ConfigMap (:func:`gpumon.dashboards.output.configmap_doc`, the dashboard as
compact JSON) would take more than :data:`gpumon.applysize.BUDGET` in the last-applied annotation
becomes dashboards titled ``<title> (1 of N)``, ``<title> (2 of N)``, ...: part 1 keeps the uid and
file name (links to it still work), part ``k`` has the uid ``<uid>-k`` (:func:`gpumon.dashboards.base.uid`
of ``<key>-k``) and the file name ``<name>-k``. Every part has the dashboard's variables, links and
annotations; the panels are cut in order, a collapsed row's panels across parts under a copy of the
row titled ``<row> (continued)``. The parts' uids depend only on their number, so they stay stable
while the spec grows within the same number of parts. A dashboard that fits is left as it is.
"""

from __future__ import annotations

import copy
import json
from typing import Callable

from ..applysize import BUDGET, applied_size

#: bytes kept free in each part for its title (`` (k of N)``) and estimates (commas)
_SLACK = 512


def _escaped(text: str) -> int:
    """Bytes ``text`` takes inside a JSON string of the last-applied annotation."""
    return applied_size({"": text}) - applied_size({"": ""})


def _compact(obj) -> str:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def _pieces(panels: list[dict]) -> list[tuple[dict | None, dict]]:
    """``panels`` as (collapsed row or None, panel) in order: a top-level panel alone, a collapsed
    row's panels each with that row (the row itself first, with no panel: ``(row, {})``)."""
    out: list[tuple[dict | None, dict]] = []
    for p in panels:
        if p.get("type") == "row" and p.get("collapsed") and p.get("panels"):
            out.append((p, {}))
            out += [(p, inner) for inner in p["panels"]]
        else:
            out.append((None, p))
    return out


def _assemble(pieces: list[tuple[dict | None, dict]], continued: bool) -> list[dict]:
    """Top-level panels from ``pieces``; ``continued``: the first piece is a collapsed row's panel
    whose row began in an earlier part (a copy of the row titled ``... (continued)`` heads it)."""
    panels: list[dict] = []
    row_of: int | None = None
    for n, (row, panel) in enumerate(pieces):
        if row is None:
            panels.append(copy.deepcopy(panel))
            row_of = None
            continue
        if not panel or (n == 0 and continued):
            head = {k: v for k, v in copy.deepcopy(row).items() if k != "panels"}
            if panel:
                head["title"] = f"{row.get('title', '')} (continued)"
            head["panels"] = []
            panels.append(head)
            row_of = len(panels) - 1
        if panel:
            panels[row_of]["panels"].append(copy.deepcopy(panel))
    # the part starts at the top of the grid; a row's panels sit under it
    top = min((p["gridPos"]["y"] for p in panels if "gridPos" in p), default=0)
    for p in panels:
        if "gridPos" in p:
            p["gridPos"]["y"] -= top
        inner = p.get("panels") if p.get("type") == "row" else None
        if inner and "gridPos" in p:
            first = min(q["gridPos"]["y"] for q in inner if "gridPos" in q)
            for q in inner:
                q["gridPos"]["y"] += p["gridPos"]["y"] + 1 - first
    return panels


def split(dashboard: dict, uid_of: Callable[[int], str], size: Callable[[dict], int],
          budget: int = BUDGET) -> list[dict]:
    """``dashboard`` (a model as JSON) as parts whose ConfigMap ``size`` is at most ``budget``
    (``[dashboard]`` when it fits). ``uid_of(k)``: the uid of part ``k`` (2, 3, ...)."""
    if size(dashboard) <= budget:
        return [dashboard]
    pieces = _pieces(dashboard.get("panels", []))
    bare = {k: v for k, v in dashboard.items() if k != "panels"} | {"panels": []}
    limit = budget - size(bare) - _SLACK
    while True:
        cuts: list[list[tuple[dict | None, dict]]] = [[]]
        used = 0
        for row, panel in pieces:
            cost = _escaped(_compact(panel)) + 1 if panel else _escaped(_compact({**row, "panels": []})) + 1
            if cuts[-1] and used + cost > limit:
                cuts.append([])
                # a row copy heads a part that continues a collapsed row
                used = _escaped(_compact({**row, "panels": []})) + 1 if row is not None and panel else 0
            cuts[-1].append((row, panel))
            used += cost
        parts = []
        for k, cut in enumerate(cuts, start=1):
            continued = k > 1 and cut[0][0] is not None and bool(cut[0][1])
            part = {**bare, "panels": _assemble(cut, continued),
                    "title": f"{dashboard.get('title', '')} ({k} of {len(cuts)})"}
            if k > 1:
                part["uid"] = uid_of(k)
            parts.append(part)
        if all(size(p) <= budget for p in parts) or limit < budget // 4:
            return parts
        limit = int(limit * 0.95)       # an estimate was short: cut smaller, still deterministically
