"""``gpumon diff``: what a change to rules and dashboards does, as Markdown for a PR comment.

Compares meaning, not text: expressions are compared after promql-parser normalises them
(whitespace, ``300s`` vs ``5m``, grouping placement), ``for`` as durations, labels and
annotations as maps; identical rules present in several files (gpumon writes a plain rule file
and a PrometheusRule with the same rules) count once. Rules are matched by name and labels (an
alert per field is one rule per ``dcgm_field``), dashboards by ``uid`` (else title), panels by
identity -- title, else what they read, else id (:mod:`.panels`) -- queries by ``refId``,
variables by name. The comment leads with the change per DCGM field (:mod:`.fields`) and fits
GitHub's comment limit (:mod:`.comment`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from ..durations import format_duration, parse_duration
from ..readers import grafana, promql
from ..readers.model import Inputs
from . import comment, fields
from . import panels as panel_match

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
        same_labels = [n for n in candidates if _identity(n) == _identity(o)]
        # one rule per field (dcgm_field label): never pair a removed field's rule with another's
        if same_labels or "dcgm_field" in dict(o.labels):
            candidates = same_labels
        if not candidates:
            removed.append(o)
            continue
        best = max(candidates, key=lambda n: _score(o, n))
        pool.remove(best)
        pairs.append((o, best))
    return pool, removed, pairs


def _identity(r: RuleView) -> tuple:
    """A rule's identity: kind, name and labels other than severity."""
    return (r.kind, r.name, tuple((k, v) for k, v in r.labels if k != "severity"))


def _fmt_for(seconds: float | None) -> str:
    return "none" if seconds is None else format_duration(seconds)


_REGEX_MATCHER = re.compile(r'(\w+)(=~|!~)"((?:[^"\\]|\\.)*)"')


def regex_list_changes(old: str, new: str) -> list[str] | None:
    """When two expressions differ only in the alternatives of ``label=~"a|b|c"`` matchers (a
    field list losing one field), one line per matcher naming what left and what joined; else None."""
    if _REGEX_MATCHER.sub(r'\1\2"§"', old) != _REGEX_MATCHER.sub(r'\1\2"§"', new):
        return None
    out = []
    for a, b in zip(_REGEX_MATCHER.finditer(old), _REGEX_MATCHER.finditer(new)):
        if a.group(3) == b.group(3):
            continue
        if "(" in a.group(3) + b.group(3):
            return None  # not a flat list of alternatives
        xa, xb = a.group(3).split("|"), b.group(3).split("|")
        gone = [x for x in xa if x not in xb]
        came = [x for x in xb if x not in xa]
        what = "; ".join(p for p in (f"removed {', '.join(f'`{x}`' for x in gone)}" if gone else "",
                                     f"added {', '.join(f'`{x}`' for x in came)}" if came else "") if p)
        line = f"`{a.group(1)}{a.group(2)}` list: {what or 'reordered'}"
        if line not in out:
            out.append(line)
    return out or None


def rule_changes(o: RuleView, n: RuleView) -> list[str]:
    """Markdown bullet lines describing how ``o`` became ``n``."""
    out = []
    listed = regex_list_changes(o.expr, n.expr) if o.expr != n.expr else None
    if listed:
        out += [f"- expression: {ln}" for ln in listed]
    elif o.expr != n.expr:
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


def _grid(panel: dict) -> str | None:
    g = panel.get("gridPos")
    return f"x={g.get('x')} y={g.get('y')} w={g.get('w')} h={g.get('h')}" if isinstance(g, dict) else None


def _targets(panel: dict, variables: dict) -> dict:
    out = {}
    for i, t in enumerate(_seq(panel.get("targets"))):
        if isinstance(t, dict):
            expr = t.get("expr")
            norm = promql.normalize(grafana.substitute(expr, variables)) if isinstance(expr, str) else None
            out[str(t.get("refId", i))] = (expr, norm, t.get("legendFormat"))
    return out


def _all_panels(doc: dict) -> dict:
    out = {}
    for p in _seq(doc.get("panels")):
        if isinstance(p, dict):
            out[_panel_key(p)] = p
            for inner in _seq(p.get("panels")):
                if isinstance(inner, dict):
                    out[_panel_key(inner)] = inner
    return out


def _variables(doc: dict) -> dict:
    templating = doc.get("templating")
    lst = _seq(templating.get("list")) if isinstance(templating, dict) else []
    return {str(v.get("name")): v for v in lst if isinstance(v, dict) and v.get("name")}


_VAR_FIELDS = ("type", "query", "definition", "datasource", "regex", "multi", "includeAll", "allValue", "refresh",
               "hide")


def _panel_name(p: dict) -> str:
    return f"\"{p.get('title', '')}\" (id {p.get('id')})"


def _panel_list(doc: dict) -> list[dict]:
    return list(_all_panels(doc).values())


def dashboard_changes(old: dict, new: dict, seen: dict | None = None) -> list[str]:
    """Markdown bullet lines for the changes between two versions of one dashboard. ``seen``
    (optional) collects ``{"removed": [panel], "added": [panel], "listed": [line]}``."""
    out = []
    if old.get("title") != new.get("title"):
        out.append(f"- title: \"{old.get('title')}\" → \"{new.get('title')}\"")
    vo, vn = _variables(old), _variables(new)
    pairs, removed, added = panel_match.pair(_panel_list(old), _panel_list(new), vo, vn)
    for p in added:
        out.append(f"- panel added: {_panel_name(p)} ({p.get('type')}, {_grid(p)})")
    for p in removed:
        out.append(f"- panel removed: {_panel_name(p)} ({p.get('type')})")
    if seen is not None:
        seen.setdefault("removed", []).extend((p, old.get("title"), panel_match.metrics(p, vo)) for p in removed)
        seen.setdefault("added", []).extend((p, new.get("title"), panel_match.metrics(p, vn)) for p in added)
    reflowed, renumbered = 0, 0
    for a, b in pairs:
        name = _panel_name(b)
        if a.get("title") != b.get("title"):
            out.append(f"- {name}: title \"{a.get('title')}\" → \"{b.get('title')}\"")
        if a.get("type") != b.get("type"):
            out.append(f"- {name}: type `{a.get('type')}` → `{b.get('type')}`")
        if a.get("id") != b.get("id"):
            renumbered += 1
        if _grid(a) != _grid(b):
            ga, gb = a.get("gridPos") or {}, b.get("gridPos") or {}
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
            out.append(f"- {name}: other settings changed: {', '.join(f'`{k}`' for k in others)}")
        ta, tb = _targets(a, vo), _targets(b, vn)
        for ref in sorted(ta.keys() | tb.keys()):
            if ref not in ta:
                out.append(f"- {name}: query {ref} added: `{tb[ref][0]}`")
            elif ref not in tb:
                out.append(f"- {name}: query {ref} removed: `{ta[ref][0]}`")
            else:
                listed = regex_list_changes(ta[ref][0], tb[ref][0]) if ta[ref][1] != tb[ref][1] else None
                if listed:
                    out += [f"- {name}: query {ref}: {ln}" for ln in listed]
                    if seen is not None:
                        seen.setdefault("listed", []).extend(listed)
                elif ta[ref][1] != tb[ref][1]:
                    out += [f"- {name}: query {ref} changed:", "  ```diff", f"  - {ta[ref][0]}", f"  + {tb[ref][0]}",
                            "  ```"]
                if ta[ref][2] != tb[ref][2]:
                    out.append(f"- {name}: query {ref} legend {_q(ta[ref][2])} → {_q(tb[ref][2])}")
    if reflowed:
        out.append(f"- {reflowed} panel(s) moved, same size (the grid reflowed around added or removed panels)")
    if renumbered:
        out.append(f"- {renumbered} panel id(s) changed (links with `viewPanel=` to them change)")
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
    fields: list = field(default_factory=list)

    @property
    def any(self) -> bool:
        return any(lines for _, lines in self.sections)

    def markdown(self, limit: int = comment.GITHUB_LIMIT) -> str:
        """The PR comment: a one-line summary, the change per DCGM field, then one collapsed
        section per kind of change; at most ``limit`` characters (GitHub's comment limit)."""
        head = f"### gpumon diff: `{self.old}` → `{self.new}`\n\n"
        if not self.any:
            return head + "No semantic differences in rules or dashboards.\n"
        parts = {}
        for what, n in self.counts.items():
            noun, _, verb = what.rpartition(" ")
            if n:
                parts.setdefault(noun, []).append(f"{n} {verb}")
        summary = "; ".join(f"{noun}: {', '.join(items)}" for noun, items in parts.items())
        head += f"**Summary:** {summary}\n"
        if self.fields:
            head += "\n**By field:**\n\n" + "\n".join(self.fields) + "\n"
        return comment.render(head, self.sections, limit)


def compare(old: Inputs, new: Inputs, old_name: str, new_name: str) -> Diff:
    """Compare two loaded sides (rules and dashboards) semantically."""
    diff = Diff(old_name, new_name)
    ro, rn = rule_views(old), rule_views(new)
    gone_rules, new_rules, listed = [], [], []
    for kind, title in (("alert", "Alerting rules"), ("record", "Recording rules")):
        added, removed, pairs = pair_rules([r for r in ro if r.kind == kind], [r for r in rn if r.kind == kind])
        gone_rules += removed
        new_rules += added
        listed += [ln for o, n in pairs if o.expr != n.expr for ln in (regex_list_changes(o.expr, n.expr) or [])]
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
    seen: dict = {"listed": listed}
    changed = 0
    for key in sorted(dn.keys() - do.keys()):
        dash_lines.append(f"- **added** dashboard \"{dn[key].get('title')}\" (uid `{key}`, "
                          f"{len(_all_panels(dn[key]))} panels)")
    for key in sorted(do.keys() - dn.keys()):
        dash_lines.append(f"- **removed** dashboard \"{do[key].get('title')}\" (uid `{key}`)")
    for key in sorted(do.keys() & dn.keys()):
        details = dashboard_changes(do[key], dn[key], seen)
        if details:
            changed += 1
            dash_lines.append(f"- **changed** dashboard \"{dn[key].get('title')}\" (uid `{key}`)")
            dash_lines += [f"  {ln}" for ln in details]
    diff.sections.append(("Dashboards", dash_lines))
    diff.counts["dashboards added"] = len(dn.keys() - do.keys())
    diff.counts["dashboards removed"] = len(do.keys() - dn.keys())
    diff.counts["dashboards changed"] = changed
    diff.fields = _by_field(old, new, ro, rn, gone_rules, new_rules, seen)
    return diff


def _by_field(old: Inputs, new: Inputs, ro, rn, gone_rules, new_rules, seen: dict) -> list[str]:
    """One line per DCGM field that appears or disappears, naming its panels and rules."""
    def panels_of(inputs):
        out = []
        for d in inputs.dashboards:
            variables = _variables(d.doc)
            out += [(p, panel_match.metrics(p, variables)) for p in _panel_list(d.doc)]
        return out

    before = fields.side_fields(ro, panels_of(old))
    after = fields.side_fields(rn, panels_of(new))
    lines = []
    for verb, names, rules, panels in (("removed", sorted(before - after), gone_rules, seen.get("removed", [])),
                                       ("added", sorted(after - before), new_rules, seen.get("added", []))):
        for f in names:
            mine = [r for r in rules if f in fields.rule_fields(r)]
            shown = [(str(p.get("title", "")), str(dash)) for p, dash, metrics in panels if f in metrics]
            relisted = sum(1 for ln in seen.get("listed", []) if f"`{f}`" in ln)
            lines.append(fields.summary(f, verb, shown, [r for r in mine if r.kind == "alert"],
                                        [r for r in mine if r.kind == "record"], relisted))
    return lines
