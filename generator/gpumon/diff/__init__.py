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

from dataclasses import dataclass, field

from ..durations import format_duration, parse_duration
from ..readers import promql
from ..readers.model import Inputs
from . import comment, fields
from .comment import code as _c, fence as _fence, quoted as _q, text as _t
from .exprs import regex_list_changes
from .dashboards import all_panels, dashboard_changes, dashboard_key, dashboard_variables, panel_list
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
        sev = f" ({_t(self.severity)})" if self.severity else ""
        return _c(f"{self.name}{{{extra}}}") + sev if extra else _c(self.name) + sev


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


def rule_changes(o: RuleView, n: RuleView) -> list[str]:
    """Markdown bullet lines describing how ``o`` became ``n``."""
    out = []
    listed = regex_list_changes(o.expr, n.expr) if o.expr != n.expr else None
    if listed:
        out += [f"- expression: {ln}" for ln in listed]
    elif o.expr != n.expr:
        out += ["- expression:"] + _fence([f"- {ln}" for ln in o.expr.splitlines()] +
                                          [f"+ {ln}" for ln in n.expr.splitlines()], "diff", "  ")
    if o.for_ != n.for_:
        out.append(f"- `for`: {_fmt_for(o.for_)} → {_fmt_for(n.for_)}")
    if o.severity != n.severity:
        out.append(f"- severity: {_t(o.severity or 'none')} → {_t(n.severity or 'none')}")
    lo = {k: v for k, v in o.labels if k != "severity"}
    ln = {k: v for k, v in n.labels if k != "severity"}
    for key in sorted(set(lo) | set(ln)):
        if lo.get(key) != ln.get(key):
            out.append(f"- label {_c(key)}: {_q(lo.get(key))} → {_q(ln.get(key))}")
    ao, an = dict(o.annotations), dict(n.annotations)
    changed = [k for k in sorted(set(ao) | set(an)) if ao.get(k) != an.get(k)]
    if changed:
        out.append(f"- annotations changed: {', '.join(_c(k) for k in changed)}")
    if o.group != n.group:
        out.append(f"- moved from group {_c(o.group)} to {_c(n.group)}")
    return out


def _group_and_object_changes(old: Inputs, new: Inputs, diff: "Diff") -> list[str]:
    """Group evaluation intervals and PrometheusRule metadata labels (the labels the Prometheus
    ruleSelector matches: losing one unloads every rule of the object)."""
    lines = []
    go = {r.group: _seconds(r.group_interval) for r in old.rules}
    gn = {r.group: _seconds(r.group_interval) for r in new.rules}
    for group in sorted(go.keys() & gn.keys()):
        if go[group] != gn[group]:
            lines.append(f"- group {_c(group)}: evaluation interval {_fmt_interval(go[group])} → "
                         f"{_fmt_interval(gn[group])}")
    oo = {f"{o.namespace}/{o.name}": o.labels for o in old.objects}
    on = {f"{o.namespace}/{o.name}": o.labels for o in new.objects}
    for key in sorted(on.keys() - oo.keys()):
        lines.append(f"- PrometheusRule {_c(key)} added")
    for key in sorted(oo.keys() - on.keys()):
        lines.append(f"- PrometheusRule {_c(key)} removed")
    for key in sorted(oo.keys() & on.keys()):
        for label in sorted(oo[key].keys() | on[key].keys()):
            if oo[key].get(label) != on[key].get(label):
                lines.append(f"- PrometheusRule {_c(key)}: metadata label {_c(label)}: {_q(oo[key].get(label))} → "
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
        head = f"### gpumon diff: {_c(self.old)} → {_c(self.new)}\n\n"
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
            where = f"- **added** {r.title} in {_c(r.group)}" + (f", for {_fmt_for(r.for_)}" if kind == "alert" else "")
            lines += [where] + _fence(r.expr.splitlines(), "promql", "  ")
        for r in removed:
            lines.append(f"- **removed** {r.title} from {_c(r.group)}")
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
    do = {dashboard_key(d.doc): d.doc for d in old.dashboards}
    dn = {dashboard_key(d.doc): d.doc for d in new.dashboards}
    dash_lines: list[str] = []
    seen: dict = {"listed": listed}
    changed = 0
    for key in sorted(dn.keys() - do.keys()):
        dash_lines.append(f"- **added** dashboard \"{_t(dn[key].get('title'))}\" (uid {_c(key)}, "
                          f"{len(all_panels(dn[key]))} panels)")
    for key in sorted(do.keys() - dn.keys()):
        dash_lines.append(f"- **removed** dashboard \"{_t(do[key].get('title'))}\" (uid {_c(key)})")
    for key in sorted(do.keys() & dn.keys()):
        details = dashboard_changes(do[key], dn[key], seen)
        if details:
            changed += 1
            dash_lines.append(f"- **changed** dashboard \"{_t(dn[key].get('title'))}\" (uid {_c(key)})")
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
            variables = dashboard_variables(d.doc)
            out += [(p, panel_match.metrics(p, variables)) for p in panel_list(d.doc)]
        return out

    before = fields.side_fields(ro, panels_of(old))
    after = fields.side_fields(rn, panels_of(new))
    lines = []
    for verb, names, rules, panels in (("removed", sorted(before - after), gone_rules, seen.get("removed", [])),
                                       ("added", sorted(after - before), new_rules, seen.get("added", []))):
        for f in names:
            mine = [r for r in rules if f in fields.rule_fields(r)]
            shown = [(str(p.get("title", "")), str(dash)) for p, dash, metrics in panels if f in metrics]
            relisted = sum(1 for ln in seen.get("listed", []) if _c(f) in ln)
            lines.append(fields.summary(f, verb, shown, [r for r in mine if r.kind == "alert"],
                                        [r for r in mine if r.kind == "record"], relisted))
    return lines
