"""``gpumon diff``: what a change to rules and dashboards does, as Markdown for a PR comment.

Compares meaning, not text: expressions are compared after promql-parser normalises them
(whitespace, ``300s`` vs ``5m``, grouping placement), ``for`` as durations, labels and
annotations as maps; identical rules present in several files (gpumon writes a plain rule file
and a PrometheusRule with the same rules) count once. Dashboards are matched by ``uid`` (else
title), panels by ``id`` (else title), queries by ``refId``, variables by name.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ..durations import format_duration, parse_duration
from ..readers import grafana, promql
from ..readers.model import Inputs

# --------------------------------------------------------------------------- rules


@dataclass(frozen=True)
class RuleView:
    """The semantic content of one rule (what a diff compares)."""

    kind: str
    name: str
    group: str
    expr: str
    for_: float | None
    labels: tuple
    annotations: tuple

    @property
    def severity(self) -> str | None:
        return dict(self.labels).get("severity")

    @property
    def title(self) -> str:
        extra = ",".join(f'{k}="{v}"' for k, v in self.labels if k != "severity")
        sev = f" ({self.severity})" if self.severity else ""
        return f"`{self.name}{{{extra}}}`{sev}" if extra else f"`{self.name}`{sev}"


def _seconds(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return parse_duration(text)
    except ValueError:
        return None


def rule_views(inputs: Inputs) -> list[RuleView]:
    """Distinct rules of ``inputs`` in file order."""
    out: dict[RuleView, None] = {}
    for r in inputs.rules:
        view = RuleView(r.kind, r.name, r.group, promql.normalize(r.expr.text) if r.expr else "",
                        _seconds(r.for_), tuple(sorted(r.labels.items())), tuple(sorted(r.annotations.items())))
        out.setdefault(view, None)
    return list(out)


def _score(a: RuleView, b: RuleView) -> int:
    la = {k: v for k, v in a.labels if k != "severity"}
    lb = {k: v for k, v in b.labels if k != "severity"}
    return (4 * (a.expr == b.expr) + 4 * (la == lb) + (a.severity == b.severity) + (a.group == b.group)
            + (a.for_ == b.for_))


def pair_rules(old: list[RuleView], new: list[RuleView]):
    """Match old and new rules of the same kind and name.

    Returns:
        (added, removed, changed pairs), identical rules left out.
    """
    same = set(old) & set(new)
    old = [r for r in old if r not in same]
    new = [r for r in new if r not in same]
    pairs, removed = [], []
    pool = list(new)
    for o in old:
        candidates = [n for n in pool if (n.kind, n.name) == (o.kind, o.name)]
        if not candidates:
            removed.append(o)
            continue
        best = max(candidates, key=lambda n: _score(o, n))
        pool.remove(best)
        pairs.append((o, best))
    return pool, removed, pairs


def _fmt_for(seconds: float | None) -> str:
    return "none" if seconds is None else format_duration(seconds)


def rule_changes(o: RuleView, n: RuleView) -> list[str]:
    """Markdown bullet lines describing how ``o`` became ``n``."""
    out = []
    if o.expr != n.expr:
        out += ["- expression:", "  ```diff"] + [f"  - {ln}" for ln in o.expr.splitlines()] + \
               [f"  + {ln}" for ln in n.expr.splitlines()] + ["  ```"]
    if o.for_ != n.for_:
        out.append(f"- `for`: {_fmt_for(o.for_)} → {_fmt_for(n.for_)}")
    if o.severity != n.severity:
        out.append(f"- severity: {o.severity or 'none'} → {n.severity or 'none'}")
    lo = {k: v for k, v in o.labels if k != "severity"}
    ln = {k: v for k, v in n.labels if k != "severity"}
    for key in sorted(set(lo) | set(ln)):
        if lo.get(key) != ln.get(key):
            out.append(f"- label `{key}`: {_q(lo.get(key))} → {_q(ln.get(key))}")
    ao, an = dict(o.annotations), dict(n.annotations)
    changed = [k for k in sorted(set(ao) | set(an)) if ao.get(k) != an.get(k)]
    if changed:
        out.append(f"- annotations changed: {', '.join(f'`{k}`' for k in changed)}")
    if o.group != n.group:
        out.append(f"- moved from group `{o.group}` to `{n.group}`")
    return out


def _q(value) -> str:
    return "none" if value is None else f"`{value}`"


# --------------------------------------------------------------------------- dashboards


def _dash_key(doc: dict) -> str:
    return str(doc.get("uid") or doc.get("title") or "")


def _panel_key(panel: dict) -> str:
    return f"id {panel['id']}" if panel.get("id") is not None else f"title {panel.get('title', '')!r}"


def _unit(panel: dict):
    unit = ((panel.get("fieldConfig") or {}).get("defaults") or {}).get("unit")
    if unit is None and isinstance(panel.get("yaxes"), list) and panel["yaxes"]:
        unit = (panel["yaxes"][0] or {}).get("format")
    return unit


def _thresholds(panel: dict) -> str | None:
    th = ((panel.get("fieldConfig") or {}).get("defaults") or {}).get("thresholds")
    if isinstance(th, dict) and isinstance(th.get("steps"), list):
        steps = [f"{'base' if s.get('value') is None else s.get('value')} {s.get('color', '')}".strip()
                 for s in th["steps"] if isinstance(s, dict)]
        mode = th.get("mode", "absolute")
        return f"{mode}: " + ", ".join(steps)
    if panel.get("thresholds") not in (None, "", []):
        return str(panel.get("thresholds"))
    return None


def _grid(panel: dict) -> str | None:
    g = panel.get("gridPos")
    return f"x={g.get('x')} y={g.get('y')} w={g.get('w')} h={g.get('h')}" if isinstance(g, dict) else None


def _targets(panel: dict, variables: dict) -> dict:
    out = {}
    for i, t in enumerate(panel.get("targets") or []):
        if isinstance(t, dict):
            expr = t.get("expr")
            norm = promql.normalize(grafana.substitute(expr, variables)) if isinstance(expr, str) else None
            out[str(t.get("refId", i))] = (expr, norm, t.get("legendFormat"))
    return out


def _all_panels(doc: dict) -> dict:
    out = {}
    for p in doc.get("panels") or []:
        if isinstance(p, dict):
            out[_panel_key(p)] = p
            for inner in p.get("panels") or []:
                if isinstance(inner, dict):
                    out[_panel_key(inner)] = inner
    return out


def _variables(doc: dict) -> dict:
    lst = (doc.get("templating") or {}).get("list") or []
    return {str(v.get("name")): v for v in lst if isinstance(v, dict) and v.get("name")}


_VAR_FIELDS = ("type", "query", "definition", "datasource", "regex", "multi", "includeAll", "allValue", "refresh",
               "hide")


def _panel_name(p: dict) -> str:
    return f"{_panel_key(p)} \"{p.get('title', '')}\""


def dashboard_changes(old: dict, new: dict) -> list[str]:
    """Markdown bullet lines for the changes between two versions of one dashboard."""
    out = []
    if old.get("title") != new.get("title"):
        out.append(f"- title: \"{old.get('title')}\" → \"{new.get('title')}\"")
    vo, vn = _variables(old), _variables(new)
    po, pn = _all_panels(old), _all_panels(new)
    for key in sorted(pn.keys() - po.keys()):
        p = pn[key]
        out.append(f"- panel added: {_panel_name(p)} ({p.get('type')}, {_grid(p)})")
    for key in sorted(po.keys() - pn.keys()):
        p = po[key]
        out.append(f"- panel removed: {_panel_name(p)} ({p.get('type')})")
    for key in sorted(po.keys() & pn.keys(), key=lambda k: (str(k))):
        a, b = po[key], pn[key]
        name = _panel_name(b)
        if a.get("title") != b.get("title"):
            out.append(f"- {_panel_key(b)}: title \"{a.get('title')}\" → \"{b.get('title')}\"")
        if a.get("type") != b.get("type"):
            out.append(f"- {name}: type `{a.get('type')}` → `{b.get('type')}`")
        if _grid(a) != _grid(b):
            out.append(f"- {name}: moved {_grid(a)} → {_grid(b)}")
        if _unit(a) != _unit(b):
            out.append(f"- {name}: unit {_q(_unit(a))} → {_q(_unit(b))}")
        if _thresholds(a) != _thresholds(b):
            out.append(f"- {name}: thresholds {_q(_thresholds(a))} → {_q(_thresholds(b))}")
        if a.get("datasource") != b.get("datasource"):
            out.append(f"- {name}: datasource {_q(_json(a.get('datasource')))} → {_q(_json(b.get('datasource')))}")
        others = _other_changes(a, b, _PANEL_COMPARED)
        if others:
            out.append(f"- {name}: other settings changed: {', '.join(f'`{k}`' for k in others)}")
        ta, tb = _targets(a, vo), _targets(b, vn)
        for ref in sorted(ta.keys() | tb.keys()):
            if ref not in ta:
                out.append(f"- {name}: query {ref} added: `{tb[ref][0]}`")
            elif ref not in tb:
                out.append(f"- {name}: query {ref} removed: `{ta[ref][0]}`")
            else:
                if ta[ref][1] != tb[ref][1]:
                    out += [f"- {name}: query {ref} changed:", "  ```diff", f"  - {ta[ref][0]}", f"  + {tb[ref][0]}",
                            "  ```"]
                if ta[ref][2] != tb[ref][2]:
                    out.append(f"- {name}: query {ref} legend {_q(ta[ref][2])} → {_q(tb[ref][2])}")
    others = _other_changes(old, new, _DASHBOARD_COMPARED)
    if others:
        out.append(f"- dashboard settings changed: {', '.join(f'`{k}`' for k in others)}")
    for key in sorted(vn.keys() - vo.keys()):
        out.append(f"- variable added: `${key}` ({vn[key].get('type')}: {_q(_json(_vquery(vn[key])))})")
    for key in sorted(vo.keys() - vn.keys()):
        out.append(f"- variable removed: `${key}`")
    for key in sorted(vo.keys() & vn.keys()):
        a, b = dict(vo[key], query=_vquery(vo[key])), dict(vn[key], query=_vquery(vn[key]))
        for fld in _VAR_FIELDS:
            if fld == "definition" and a["query"] != b["query"]:
                continue  # Grafana mirrors the query into definition; report it once
            if a.get(fld) != b.get(fld):
                out.append(f"- variable `${key}`: {fld} {_q(_json(a.get(fld)))} → {_q(_json(b.get(fld)))}")
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


def _group_and_object_changes(old: Inputs, new: Inputs, diff: "Diff") -> list[str]:
    """Group evaluation intervals and PrometheusRule metadata labels (the labels the Prometheus
    ruleSelector matches: losing one unloads every rule of the object)."""
    lines = []
    go = {r.group: _seconds(r.group_interval) for r in old.rules}
    gn = {r.group: _seconds(r.group_interval) for r in new.rules}
    for group in sorted(go.keys() & gn.keys()):
        if go[group] != gn[group]:
            lines.append(f"- group `{group}`: evaluation interval {_fmt_interval(go[group])} → "
                         f"{_fmt_interval(gn[group])}")
    oo = {f"{o.namespace}/{o.name}": o.labels for o in old.objects}
    on = {f"{o.namespace}/{o.name}": o.labels for o in new.objects}
    for key in sorted(on.keys() - oo.keys()):
        lines.append(f"- PrometheusRule `{key}` added")
    for key in sorted(oo.keys() - on.keys()):
        lines.append(f"- PrometheusRule `{key}` removed")
    for key in sorted(oo.keys() & on.keys()):
        for label in sorted(oo[key].keys() | on[key].keys()):
            if oo[key].get(label) != on[key].get(label):
                lines.append(f"- PrometheusRule `{key}`: metadata label `{label}`: {_q(oo[key].get(label))} → "
                             f"{_q(on[key].get(label))} (Prometheus selects rule objects by these labels)")
    diff.counts["rule groups / PrometheusRule objects changed"] = len(lines)
    return lines


def _fmt_interval(seconds: float | None) -> str:
    return "global default" if seconds is None else format_duration(seconds)


# --------------------------------------------------------------------------- report


@dataclass
class Diff:
    """Semantic differences; ``sections`` are (heading, markdown lines)."""

    old: str
    new: str
    sections: list = field(default_factory=list)
    counts: dict = field(default_factory=dict)

    @property
    def any(self) -> bool:
        return any(lines for _, lines in self.sections)

    def markdown(self) -> str:
        """The PR comment: a one-line summary, then one section per kind of change."""
        head = f"### gpumon diff: `{self.old}` → `{self.new}`\n\n"
        if not self.any:
            return head + "No semantic differences in rules or dashboards.\n"
        parts = {}
        for what, n in self.counts.items():
            noun, _, verb = what.rpartition(" ")
            if n:
                parts.setdefault(noun, []).append(f"{n} {verb}")
        summary = "; ".join(f"{noun}: {', '.join(items)}" for noun, items in parts.items())
        body = "\n\n".join(f"#### {title}\n\n" + "\n".join(lines) for title, lines in self.sections if lines)
        return head + f"**Summary:** {summary}\n\n" + body + "\n"


def compare(old: Inputs, new: Inputs, old_name: str, new_name: str) -> Diff:
    """Compare two loaded sides (rules and dashboards) semantically."""
    diff = Diff(old_name, new_name)
    ro, rn = rule_views(old), rule_views(new)
    for kind, title in (("alert", "Alerting rules"), ("record", "Recording rules")):
        added, removed, pairs = pair_rules([r for r in ro if r.kind == kind], [r for r in rn if r.kind == kind])
        lines = []
        for r in added:
            where = f"- **added** {r.title} in `{r.group}`" + (f", for {_fmt_for(r.for_)}" if kind == "alert" else "")
            lines += [where,
                      "  ```promql"] + [f"  {ln}" for ln in r.expr.splitlines()] + ["  ```"]
        for r in removed:
            lines.append(f"- **removed** {r.title} from `{r.group}`")
        changed = 0
        for o, n in pairs:
            details = rule_changes(o, n)
            if details:
                changed += 1
                lines.append(f"- **changed** {n.title}")
                lines += [f"  {ln}" for ln in details]
        diff.sections.append((title, lines))
        diff.counts[f"{title.lower()} added"] = len(added)
        diff.counts[f"{title.lower()} removed"] = len(removed)
        diff.counts[f"{title.lower()} changed"] = changed
    diff.sections.append(("Rule groups and PrometheusRule objects", _group_and_object_changes(old, new, diff)))
    do = {_dash_key(d.doc): d.doc for d in old.dashboards}
    dn = {_dash_key(d.doc): d.doc for d in new.dashboards}
    dash_lines: list[str] = []
    changed = 0
    for key in sorted(dn.keys() - do.keys()):
        dash_lines.append(f"- **added** dashboard \"{dn[key].get('title')}\" (uid `{key}`, "
                          f"{len(_all_panels(dn[key]))} panels)")
    for key in sorted(do.keys() - dn.keys()):
        dash_lines.append(f"- **removed** dashboard \"{do[key].get('title')}\" (uid `{key}`)")
    for key in sorted(do.keys() & dn.keys()):
        details = dashboard_changes(do[key], dn[key])
        if details:
            changed += 1
            dash_lines.append(f"- **changed** dashboard \"{dn[key].get('title')}\" (uid `{key}`)")
            dash_lines += [f"  {ln}" for ln in details]
    diff.sections.append(("Dashboards", dash_lines))
    diff.counts["dashboards added"] = len(dn.keys() - do.keys())
    diff.counts["dashboards removed"] = len(do.keys() - dn.keys())
    diff.counts["dashboards changed"] = changed
    return diff
