"""What changed in one Grafana dashboard: panels matched by identity (:mod:`.panels`), then their
title, type, queries, units, thresholds, layout and the dashboard's variables, as Markdown list
lines for :func:`gpumon.diff.compare`.
"""

from __future__ import annotations

import json

from ..readers import grafana, promql
from . import panels as panel_match
from .comment import code as _c, fence as _fence, quoted as _q, text as _t
from .exprs import regex_list_changes


def dashboard_key(doc: dict) -> str:
    """What matches a dashboard across versions: its ``uid``, else its title."""
    return str(doc.get("uid") or doc.get("title") or "")


def _panel_key(panel: dict) -> str:
    return f"id {panel['id']}" if panel.get("id") is not None else f"title {panel.get('title', '')!r}"


def _defaults(panel: dict) -> dict:
    """``fieldConfig.defaults``, or {} when either is missing or not an object."""
    config = panel.get("fieldConfig")
    defaults = config.get("defaults") if isinstance(config, dict) else None
    return defaults if isinstance(defaults, dict) else {}


def _unit(panel: dict):
    unit = _defaults(panel).get("unit")
    if unit is None and isinstance(panel.get("yaxes"), list) and panel["yaxes"] and isinstance(panel["yaxes"][0], dict):
        unit = panel["yaxes"][0].get("format")
    return unit


def _thresholds(panel: dict) -> str | None:
    th = _defaults(panel).get("thresholds")
    if isinstance(th, dict) and isinstance(th.get("steps"), list):
        steps = [f"{'base' if s.get('value') is None else s.get('value')} {s.get('color', '')}".strip()
                 for s in th["steps"] if isinstance(s, dict)]
        mode = th.get("mode", "absolute")
        return f"{mode}: " + ", ".join(steps)
    if panel.get("thresholds") not in (None, "", []):
        return str(panel.get("thresholds"))
    return None


def _seq(value) -> list:
    """``value`` when it is a list, else [] (hand-edited dashboards can hold anything anywhere)."""
    return value if isinstance(value, list) else []


def _mapping(value) -> dict:
    """``value`` when it is an object, else {}."""
    return value if isinstance(value, dict) else {}


def _grid(panel: dict) -> str | None:
    g = panel.get("gridPos")
    return _t(f"x={g.get('x')} y={g.get('y')} w={g.get('w')} h={g.get('h')}") if isinstance(g, dict) else None


def _targets(panel: dict, variables: dict) -> dict:
    out = {}
    for i, t in enumerate(_seq(panel.get("targets"))):
        if isinstance(t, dict):
            expr = t.get("expr")
            # an expr that is not a string (a number, an object) is compared and shown as its JSON
            norm = promql.normalize(grafana.substitute(expr, variables)) if isinstance(expr, str) else _json(expr)
            out[str(t.get("refId", i))] = (expr if isinstance(expr, str) else _json(expr), norm, t.get("legendFormat"))
    return out


def all_panels(doc: dict) -> dict:
    """{panel key: panel} of every panel, those inside collapsed rows too."""
    out = {}
    for p in _seq(doc.get("panels")):
        if isinstance(p, dict):
            out[_panel_key(p)] = p
            for inner in _seq(p.get("panels")):
                if isinstance(inner, dict):
                    out[_panel_key(inner)] = inner
    return out


def dashboard_variables(doc: dict) -> dict:
    """{name: variable} of the dashboard's template variables."""
    templating = doc.get("templating")
    lst = _seq(templating.get("list")) if isinstance(templating, dict) else []
    return {str(v.get("name")): v for v in lst if isinstance(v, dict) and v.get("name")}


_VAR_FIELDS = ("type", "query", "definition", "datasource", "regex", "multi", "includeAll", "allValue", "refresh",
               "hide")


def _panel_name(p: dict) -> str:
    return f"\"{_t(p.get('title', ''))}\" (id {_t(p.get('id'))})"


def panel_list(doc: dict) -> list[dict]:
    """Every panel (:func:`all_panels`) as a list."""
    return list(all_panels(doc).values())


def dashboard_changes(old: dict, new: dict, seen: dict | None = None) -> list[str]:
    """Markdown bullet lines for the changes between two versions of one dashboard. ``seen``
    (optional) collects ``{"removed": [panel], "added": [panel], "listed": [line]}``."""
    out = []
    if old.get("title") != new.get("title"):
        out.append(f"- title: \"{_t(old.get('title'))}\" → \"{_t(new.get('title'))}\"")
    vo, vn = dashboard_variables(old), dashboard_variables(new)
    pairs, removed, added = panel_match.pair(panel_list(old), panel_list(new), vo, vn)
    for p in added:
        out.append(f"- panel added: {_panel_name(p)} ({_t(p.get('type'))}, {_grid(p)})")
    for p in removed:
        out.append(f"- panel removed: {_panel_name(p)} ({_t(p.get('type'))})")
    if seen is not None:
        seen.setdefault("removed", []).extend((p, old.get("title"), panel_match.metrics(p, vo)) for p in removed)
        seen.setdefault("added", []).extend((p, new.get("title"), panel_match.metrics(p, vn)) for p in added)
    reflowed, renumbered = 0, 0
    for a, b in pairs:
        name = _panel_name(b)
        if a.get("title") != b.get("title"):
            out.append(f"- {name}: title \"{_t(a.get('title'))}\" → \"{_t(b.get('title'))}\"")
        if a.get("type") != b.get("type"):
            out.append(f"- {name}: type {_c(a.get('type'))} → {_c(b.get('type'))}")
        if a.get("id") != b.get("id"):
            renumbered += 1
        if _grid(a) != _grid(b):
            ga, gb = _mapping(a.get("gridPos")), _mapping(b.get("gridPos"))
            if all(ga.get(k) == gb.get(k) for k in ("w", "h")) and (added or removed):
                reflowed += 1  # same size, new place: the grid reflowed around panels that came or went
            else:
                out.append(f"- {name}: moved {_grid(a)} → {_grid(b)}")
        if _unit(a) != _unit(b):
            out.append(f"- {name}: unit {_q(_unit(a))} → {_q(_unit(b))}")
        if _thresholds(a) != _thresholds(b):
            out.append(f"- {name}: thresholds {_q(_thresholds(a))} → {_q(_thresholds(b))}")
        if a.get("datasource") != b.get("datasource"):
            out.append(f"- {name}: datasource {_q(_json(a.get('datasource')))} → {_q(_json(b.get('datasource')))}")
        others = _other_changes(a, b, _PANEL_COMPARED)
        if others:
            out.append(f"- {name}: other settings changed: {', '.join(_c(k) for k in others)}")
        ta, tb = _targets(a, vo), _targets(b, vn)
        for ref in sorted(ta.keys() | tb.keys()):
            if ref not in ta:
                out.append(f"- {name}: query {_t(ref)} added: {_q(tb[ref][0])}")
            elif ref not in tb:
                out.append(f"- {name}: query {_t(ref)} removed: {_q(ta[ref][0])}")
            else:
                listed = regex_list_changes(ta[ref][0], tb[ref][0]) if ta[ref][1] != tb[ref][1] and \
                    isinstance(ta[ref][0], str) and isinstance(tb[ref][0], str) else None
                if listed:
                    out += [f"- {name}: query {_t(ref)}: {ln}" for ln in listed]
                    if seen is not None:
                        seen.setdefault("listed", []).extend(listed)
                elif ta[ref][1] != tb[ref][1]:
                    out += [f"- {name}: query {_t(ref)} changed:"] + _fence([f"- {ta[ref][0]}", f"+ {tb[ref][0]}"],
                                                                               "diff", "  ")
                if ta[ref][2] != tb[ref][2]:
                    out.append(f"- {name}: query {_t(ref)} legend {_q(ta[ref][2])} → {_q(tb[ref][2])}")
    if reflowed:
        out.append(f"- {reflowed} panel(s) moved, same size (the grid reflowed around added or removed panels)")
    if renumbered:
        out.append(f"- {renumbered} panel id(s) changed (links with `viewPanel=` to them change)")
    others = _other_changes(old, new, _DASHBOARD_COMPARED)
    if others:
        out.append(f"- dashboard settings changed: {', '.join(_c(k) for k in others)}")
    for key in sorted(vn.keys() - vo.keys()):
        out.append(f"- variable added: {_c('$' + key)} ({_t(vn[key].get('type'))}: {_q(_json(_vquery(vn[key])))})")
    for key in sorted(vo.keys() - vn.keys()):
        out.append(f"- variable removed: {_c('$' + key)}")
    for key in sorted(vo.keys() & vn.keys()):
        a, b = dict(vo[key], query=_vquery(vo[key])), dict(vn[key], query=_vquery(vn[key]))
        for fld in _VAR_FIELDS:
            if fld == "definition" and a["query"] != b["query"]:
                continue  # Grafana mirrors the query into definition; report it once
            if a.get(fld) != b.get(fld):
                out.append(f"- variable {_c('$' + key)}: {fld} {_q(_json(a.get(fld)))} → {_q(_json(b.get(fld)))}")
    return out


#: Panel keys reported on their own above, or bookkeeping Grafana rewrites on every save.
_PANEL_COMPARED = {"title", "type", "gridPos", "datasource", "targets", "panels", "id", "pluginVersion",
                   "fieldConfig.defaults.unit", "fieldConfig.defaults.thresholds", "yaxes", "thresholds"}
_DASHBOARD_COMPARED = {"title", "panels", "templating", "version", "id", "iteration", "uid", "rows"}


def _flat_keys(doc: dict) -> dict:
    """Top-level keys, with ``fieldConfig.defaults`` split one level deeper (unit, links ...)."""
    out = {}
    for key, value in doc.items():
        if key == "fieldConfig" and isinstance(value, dict):
            for sub, subval in value.items():
                if sub == "defaults" and isinstance(subval, dict):
                    out.update({f"fieldConfig.defaults.{k}": v for k, v in subval.items()})
                else:
                    out[f"fieldConfig.{sub}"] = subval
        else:
            out[key] = value
    return out


def _other_changes(a: dict, b: dict, compared: set) -> list[str]:
    """Keys (besides ``compared``) whose values differ between two panels or dashboards."""
    fa, fb = _flat_keys(a), _flat_keys(b)
    return sorted(k for k in fa.keys() | fb.keys() if k not in compared and fa.get(k) != fb.get(k))


def _vquery(var: dict):
    q = var.get("query")
    return q.get("query") if isinstance(q, dict) and "query" in q else q


def _json(value):
    if value is None:
        return None
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)
