"""Grafana dashboards in JSON: files (``panels`` at the top, or under ``dashboard`` as the HTTP API
writes it) and dashboards embedded in ConfigMaps and ``GrafanaDashboard`` objects, read into
:class:`~.model.Dashboard` values with their variables, panels and Prometheus queries. A JSON
dashboard inside a YAML block scalar (``|``) is shifted to the lines of the YAML file."""

from __future__ import annotations

import json
from functools import partial

from ruamel.yaml.comments import CommentedMap

from . import files as inputfiles
from . import grafana
from .model import Dashboard, Inputs, Panel, Query, Variable, unreadable
from .positions import json_locator, loc, pos


def load_json_file(text: str, name: str, inputs: Inputs) -> None:
    try:
        doc = inputfiles.decode_json(text)  # the depth was checked by the caller
    except json.JSONDecodeError as exc:
        inputs.problems.append(unreadable(name, exc.lineno, exc.colno, f"JSON syntax error: {exc.msg}"))
        return
    base = _dashboard_base(doc)
    if base is None:
        return
    _add_dashboard(doc, base, name, json_locator(text, name, 0, 0), inputs)


def _dashboard_base(doc) -> str | None:
    """JSON pointer of the dashboard object inside ``doc`` ("" or "/dashboard"), None if none."""
    if isinstance(doc, dict):
        if isinstance(doc.get("panels"), list) or isinstance(doc.get("rows"), list):
            return ""
        inner = doc.get("dashboard")
        if isinstance(inner, dict) and isinstance(inner.get("panels"), list):
            return "/dashboard"
    return None


def embedded_dashboard(parent: CommentedMap, key, name: str, lines: list[str], inputs: Inputs,
                        pointer: str) -> None:
    text = parent.get(key)
    if not isinstance(text, str) or "{" not in text:
        return
    try:
        doc = inputfiles.loads_json(text)
    except inputfiles.Refused as exc:
        line, col = pos(parent, key)
        inputs.problems.append(unreadable(name, line + 1, col + 1, f"not read: {pointer}: {exc} (line {exc.line} "
                                          "of the value)"))
        return
    except json.JSONDecodeError as exc:
        if str(key).endswith(".json"):
            line, col = pos(parent, key)
            message = f"JSON syntax error in {pointer}: {exc.msg} (line {exc.lineno} of the value)"
            inputs.problems.append(unreadable(name, line + 1, col + 1, message))
        return
    base = _dashboard_base(doc)
    if base is None:
        return
    vline, vcol = parent.lc.value(key)
    head = lines[vline][vcol:] if vline < len(lines) else ""
    if head.startswith("|"):
        content = lines[vline + 1] if vline + 1 < len(lines) else ""
        indent = len(content) - len(content.lstrip(" "))
        locator = json_locator(text, name, vline + 1, indent)
    else:
        key_loc = loc(name, pos(parent, key))
        locator = lambda pointer_: key_loc  # noqa: E731 - no line mapping for quoted scalars
    _add_dashboard(doc, base, name, locator, inputs)


def _add_dashboard(doc: dict, base: str, name: str, locator, inputs: Inputs) -> None:
    body = doc if base == "" else doc["dashboard"]
    dash = Dashboard(file=name, doc=body, base=base, locate=locator)
    variables = {}
    templating = body.get("templating") if isinstance(body.get("templating"), dict) else {}
    var_list = _list(templating.get("list"))
    for var in var_list:
        if isinstance(var, dict) and var.get("name"):
            variables[str(var["name"])] = var
    for i, var in enumerate(var_list):
        if not isinstance(var, dict):
            continue
        pointer = f"/templating/list/{i}"
        raw_query = var.get("query")
        if isinstance(raw_query, dict):
            if raw_query.get("metric") or raw_query.get("label"):
                metric = raw_query.get("metric") or ""
                definition = f"label_values({metric}, {raw_query.get('label', '')})" if metric else \
                    f"label_values({raw_query.get('label', '')})"
            else:
                definition = str(raw_query.get("query", ""))
            qpointer = pointer + "/query"
        else:
            definition = str(raw_query or var.get("definition") or "")
            qpointer = pointer + ("/query" if raw_query else "/definition")
        v = Variable(doc=var, pointer=pointer, name=str(var.get("name", "")), type=str(var.get("type", "")),
                     definition=definition)
        if v.type == "query" and definition:
            expr, label = grafana.split_variable_query(definition)
            v.label = label
            if expr:
                text = grafana.substitute(expr, variables)
                v.query = Query(text=text, source=expr, position=partial(dash.at, qpointer), subject=v.subject,
                                origin="variable", dashboard=dash)
                dash.queries.append(v.query)
            elif not definition.startswith(("label_values(", "label_names(", "metrics(", "query_result(")):
                text = grafana.substitute(definition, variables)
                v.query = Query(text=text, source=definition, position=partial(dash.at, qpointer),
                                subject=v.subject,
                                origin="variable", dashboard=dash)
                dash.queries.append(v.query)
        dash.variables.append(v)
    for panel in _panels(body):
        dash.panels.append(panel)
        for j, target in panel.targets:
            if not isinstance(target.get("expr"), str) or not target["expr"].strip():
                continue
            if not _prometheus(target.get("datasource"), panel.doc.get("datasource")):
                continue
            expr = target["expr"]
            ref = target.get("refId", j)
            query = Query(text=grafana.substitute(expr, variables), source=expr,
                          position=partial(dash.at, f"{panel.pointer}/targets/{j}/expr"),
                          subject=f"{dash.subject} {panel.subject} query {ref}", origin="panel", dashboard=dash)
            dash.queries.append(query)
    inputs.dashboards.append(dash)
    inputs.queries.extend(dash.queries)


def _panels(body: dict) -> list[Panel]:
    out = []
    for i, panel in enumerate(_list(body.get("panels"))):
        if not isinstance(panel, dict):
            continue
        pointer = f"/panels/{i}"
        out.append(Panel(panel, pointer, None))
        for j, inner in enumerate(_list(panel.get("panels"))):
            if isinstance(inner, dict):
                out.append(Panel(inner, f"{pointer}/panels/{j}", pointer))
    for r, row in enumerate(_list(body.get("rows"))):  # schemaVersion < 16 dashboards
        if isinstance(row, dict):
            for j, inner in enumerate(_list(row.get("panels"))):
                if isinstance(inner, dict):
                    out.append(Panel(inner, f"/rows/{r}/panels/{j}", f"/rows/{r}"))
    return out


def _list(value) -> list:
    """``value`` when it is a list, else [] (dashboards edited by hand can hold anything)."""
    return value if isinstance(value, list) else []


def _prometheus(*datasources) -> bool:
    """False when a target's (or else its panel's) datasource is known not to be Prometheus."""
    for ds in datasources:
        if isinstance(ds, dict) and ds.get("type"):
            return ds["type"] in ("prometheus", "datasource") or str(ds.get("uid", "")).startswith("$")
        if ds is not None:
            return True
    return True

