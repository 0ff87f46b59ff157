"""The order and reads the lifecycle rules depend on (generator/gpumon/rules/lost.py, fresh.py):
the matrix (tests/test_matrix.py) shows what they page; these hold the structure that makes them
right on a real Prometheus, where groups evaluate concurrently and one rule reads another's
result of the same evaluation."""

from __future__ import annotations

import re

from gpumon.rules import build_groups, names


def _inventory_group(spec):
    return next(g for g in build_groups(spec) if g.name == f"{spec.name}.inventory")


def test_the_heartbeat_is_the_inventory_groups_last_rule(default_spec):
    """A reader running while the group is mid-evaluation then sees the sets no older than the
    heartbeat it compares with (the heartbeat first would drop them for that evaluation)."""
    rules = _inventory_group(default_spec).rules
    assert rules[-1].record == names.EVALUATED
    assert dict(rules[-1].labels) == {names.GROUP_LABEL: f"{default_spec.name}.inventory"}


def test_records_come_after_what_they_read(default_spec):
    order = [r.record for r in _inventory_group(default_spec).rules]
    for first, then in ((names.INVENTORY, names.LEGACY_INVENTORY), (names.LEGACY_INVENTORY, names.KNOWN),
                        (names.TARGET_NODE, names.TARGETS_KNOWN), (names.KNOWN, names.XID_LOST),
                        (names.INVENTORY, names.FIELD_MISSING)):
        assert order.index(first) < order.index(then), (first, then)


def test_alerts_read_the_sparse_inventory_sets_as_of_the_last_evaluation(default_spec):
    """Every read of the missing and unlabelled sets in an alert is the fresh one (a bare read
    would let a series left from before a restart hold the page for the 5 m lookback)."""
    fresh = re.compile(r"\(((?:%s)\{[^}]*\}) unless timestamp\(\1\) < on \(\) group_left \(\) \(max\(timestamp\(%s\{"
                       % ("|".join(re.escape(n) for n in (names.FIELD_MISSING, names.UNLABELLED)),
                          re.escape(names.EVALUATED)))
    reads = 0
    for group in build_groups(default_spec):
        for rule in (r for r in group.rules if r.alert):
            found = fresh.findall(rule.expr.replace("\n", " "))
            for name in (names.FIELD_MISSING, names.UNLABELLED):
                total = rule.expr.count(name + "{")
                reads += bool(total)
                # each fresh read names the set twice (the set, and its timestamps)
                assert total == 2 * sum(sel.startswith(name + "{") for sel in found), (rule.alert, rule.expr)
    # the fleet, node and GPU tiers of every required field, the fleet tier's unlabelled series (it
    # stays quiet while the field is there without a node label), and GpuIdentityLabelMissing
    assert reads == 4 * len(default_spec.required_metrics) + 1
