"""Rule groups too big for one ``kubectl apply`` object, split by size into parts.

A group whose PrometheusRule form (:func:`gpumon.rules.model.group_dict`) takes more than the group
budget in the last-applied annotation (:mod:`gpumon.applysize`) becomes the groups ``<group>``,
``<group>-2``, ... each under it; the plain rule file and the PrometheusRule objects carry the same
parts, so every engine evaluates the same groups. A group under the budget is left as it is.

Prometheus evaluates the rules of one group in order, each reading what the earlier ones recorded
in the same evaluation; groups run independently. So a part reads what an earlier part records as
of that part's last evaluation, at most one evaluation interval late. What the groups rely on to be
read in the same evaluation stays together:

- the rules about one DCGM field (label ``dcgm_field``) that read each other's records by that
  field (the value group's implausible records and their three alerts; coverage's absent and
  missing sets and the field's coverage) form one unit, placed where its last rule was;
- everything else keeps its order, and parts are cut between units in that order, so a record is
  never read before the part that writes it (rules shared by many fields, such as the inventory
  and the per-node counts, come first and land in the first part);
- a group that ends with a heartbeat (:func:`gpumon.rules.fresh.heartbeat`) gets one per part,
  and the freshness guard of the rules that read the group's sets reads every part's heartbeat
  (:func:`gpumon.rules.fresh.retarget`).

The split is deterministic: parts are filled greedily in that order.
"""

from __future__ import annotations

import re

from ..applysize import LAST_APPLIED, applied_size
from . import fresh, names
from .model import Rule, RuleGroup, group_dict, rule_dict

_MATCHER = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!=|!~|=)\s*"((?:[^"\\]|\\.)*)"')


def part_name(group: str, index: int) -> str:
    """The name of part ``index`` (0-based) of ``group``: the group's own name, then ``-2``, ``-3``..."""
    return group if index == 0 else f"{group}-{index + 1}"


def _rule_bytes(rule: Rule) -> int:
    return applied_size(rule_dict(rule)) - len(LAST_APPLIED)


_SELECTOR = re.compile(r"(?<![\w:])([a-zA-Z_:][a-zA-Z0-9_:]*)(?![\w:])(\{[^}]*\})?")


def _matches(matchers: list[tuple[str, str, str]], labels: dict[str, str]) -> bool:
    """Whether a selector's ``matchers`` can select a series with a rule's static ``labels`` (a
    matcher on a label the rule does not set may match whatever the series carries; a regular
    expression Python cannot read may match too)."""
    for label, op, value in matchers:
        if label not in labels:
            continue
        if "~" in op:
            try:
                hit = re.fullmatch(value.replace("\\\\", "\\"), labels[label]) is not None
            except re.error:
                continue
        else:
            hit = labels[label] == value
        if hit != (op in ("=", "=~")):
            return False
    return True


def reads(rules: list[Rule]) -> list[set[int]]:
    """For each rule of ``rules``, the indices of the recording rules among them whose series its
    expression may select (by name, and by the matchers on the labels the recording rule sets)."""
    by_name: dict[str, list[int]] = {}
    by_field: dict[tuple[str, str | None], list[int]] = {}
    for i, r in enumerate(rules):
        if r.record:
            by_name.setdefault(r.record, []).append(i)
            by_field.setdefault((r.record, r.label_map.get(names.FIELD_LABEL)), []).append(i)
    out: list[set[int]] = []
    for k, rule in enumerate(rules):
        found: set[int] = set()
        for name, braces in _SELECTOR.findall(rule.expr):
            if name not in by_name:
                continue
            matchers = _MATCHER.findall(braces)
            field = [v for label, op, v in matchers if label == names.FIELD_LABEL and op == "="]
            candidates = (by_field.get((name, field[0]), []) + by_field.get((name, None), [])) if field \
                else by_name[name]
            found.update(i for i in candidates if i != k and _matches(matchers, rules[i].label_map))
        out.append(found)
    return out


def _field_reads(rules: list[Rule], read: list[set[int]]) -> list[tuple[int, int]]:
    """(record, reader) index pairs of one field: the reader carries the record's ``dcgm_field`` and
    selects it by an equality matcher on that label."""
    out = []
    for k, rule in enumerate(rules):
        field = rule.label_map.get(names.FIELD_LABEL)
        if field is None:
            continue
        own = f'{names.FIELD_LABEL}="{field}"'
        for i in read[k]:
            if i < k and rules[i].label_map.get(names.FIELD_LABEL) == field and own in rule.expr:
                out.append((i, k))
    return out


def units(rules: list[Rule]) -> list[list[int]]:
    """Indices of ``rules`` in the order they stay, as units never cut apart: the rules of one
    field that read each other's records by that field are one unit at the place of the last of
    them (a rule is moved there only when no rule in between reads it or is read by it; else it
    stays in place, a unit of its own); every other rule a unit of its own, in place."""
    read = reads(rules)
    readers: list[set[int]] = [set() for _ in rules]
    for k, found in enumerate(read):
        for i in found:
            readers[i].add(k)
    parent = list(range(len(rules)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, k in _field_reads(rules, read):
        parent[root(i)] = root(k)
    members: dict[int, list[int]] = {}
    for i in range(len(rules)):
        members.setdefault(root(i), []).append(i)
    placed: dict[int, list[int]] = {}       # index of a unit's last rule -> the unit
    for unit in members.values():
        last = unit[-1]
        moved = [last]
        for i in reversed(unit[:-1]):
            between = (readers[i] | read[i]) - set(moved)
            if any(i < k <= last for k in between):
                placed[i] = [i]             # stays where it is, a unit of its own
            else:
                moved.append(i)
        placed[last] = sorted(moved)
    return [placed[i] for i in sorted(placed)]


def split_group(group: RuleGroup, budget: int) -> list[RuleGroup]:
    """``group`` as parts each at most ``budget`` bytes when applied (``group`` alone when it fits;
    a unit bigger than the budget alone is a part of its own, still too big)."""
    if applied_size(group_dict(group)) <= budget:
        return [group]
    rules = list(group.rules)
    beat = bool(rules) and rules[-1] == fresh.heartbeat(group.name)
    if beat:
        rules = rules[:-1]
    sizes = [_rule_bytes(r) for r in rules]

    def overhead(index: int) -> int:
        extra = (fresh.heartbeat(part_name(group.name, index)),) if beat else ()
        return applied_size(group_dict(RuleGroup(part_name(group.name, index), extra, group.interval))) + 1

    parts: list[list[int]] = [[]]
    used = overhead(0)
    for unit in units(rules):
        cost = sum(sizes[i] + 1 for i in unit)
        if parts[-1] and used + cost > budget:
            parts.append([])
            used = overhead(len(parts) - 1)
        parts[-1].extend(unit)
        used += cost
    out = []
    for index, part in enumerate(parts):
        name = part_name(group.name, index)
        tail = (fresh.heartbeat(name),) if beat else ()
        out.append(RuleGroup(name, tuple(rules[i] for i in part) + tail, group.interval))
    return out


def split_groups(groups: list[RuleGroup], budget: int) -> list[RuleGroup]:
    """Every group of ``groups`` that is over ``budget`` split into parts (:func:`split_group`), in
    place; the freshness guards reading a split group's heartbeat read its parts' heartbeats."""
    out: list[RuleGroup] = []
    renamed: dict[str, list[str]] = {}
    for group in groups:
        parts = split_group(group, budget)
        if len(parts) > 1 and group.rules and group.rules[-1] == fresh.heartbeat(group.name):
            renamed[group.name] = [p.name for p in parts]
        out += parts
    if not renamed:
        return out
    return [RuleGroup(g.name, tuple(fresh.retarget(r, renamed) for r in g.rules), g.interval) for g in out]


def late_reads(groups: list[RuleGroup]) -> list[tuple[str, str, str]]:
    """(reading group, rule name, record) for each rule that reads a record an earlier part of its
    own group writes (heartbeats aside): read as of that part's last evaluation, up to one interval
    late."""
    out = []
    families: dict[str, list[RuleGroup]] = {}
    for g in groups:
        families.setdefault(re.sub(r"-\d+$", "", g.name), []).append(g)
    for parts in families.values():
        rules = [r for p in parts for r in p.rules]
        where = [p.name for p in parts for _ in p.rules]
        first = {}
        for n, name in enumerate(where):
            first.setdefault(name, n)
        for k, found in enumerate(reads(rules)):
            for i in sorted(found):
                if rules[i].record != names.EVALUATED and first[where[i]] < first[where[k]] and i < k:
                    out.append((where[k], rules[k].name, rules[i].record or ""))
    return sorted(set(out))
