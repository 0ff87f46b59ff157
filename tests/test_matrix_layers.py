"""The vmalert replay's layers (tests/matrix_layers.py): a chained rule runs in a later vmalert run
than the rules it reads, and never sees a rule written after it in the file."""

from __future__ import annotations

import yaml

from gpumon.render import render
from tests import matrix, matrix_layers


def _rule(name: str, expr: str) -> dict:
    key = "alert" if name[:1].isupper() else "record"
    return {key: name, "expr": expr}


def test_a_chained_rule_runs_after_what_it_reads():
    rules = [_rule("a:x:sum", "sum(up)"),
             _rule("b:y:sum", "sum(a:x:sum)"),            # reads the rule above: next layer
             _rule("Down", "b:y:sum == 0"),               # reads the one above: a layer later
             _rule("c:z:max", "max(up)"),                 # reads nothing recorded: first layer
             _rule("d:w:max", 'max_over_time(ALERTS{alertname="Down"}[3m])'),   # ALERTS: after every alert
             _rule("e:v:max", "max(up_not_a:x:sum)")]     # a name that only contains another: not a read
    assert matrix_layers.layer_numbers(rules) == [0, 1, 2, 0, 3, 0]


def test_a_rule_stays_unseen_by_the_rules_above_it():
    """``a`` reads ``c``, written below it: in one replay ``a`` ran before ``c`` wrote anything, so
    ``c`` must not be in an earlier layer than ``a`` (which ``b`` pushed to layer 1)."""
    rules = [_rule("b:x:sum", "sum(up)"), _rule("a:x:sum", "sum(b:x:sum) or c:x:sum"), _rule("c:x:sum", "sum(up)")]
    assert matrix_layers.layer_numbers(rules) == [0, 1, 1]
    # a rule reading itself (its own last result) is no reason for another layer
    assert matrix_layers.layer_numbers([_rule("s:x:max", "max(up) or s:x:max")]) == [0]


def test_the_layers_of_the_rendered_rules_keep_every_rule_and_group_once():
    text = render(matrix.matrix_spec())["rules/gpumon.rules.yaml"]
    original = yaml.safe_load(text)["groups"]
    parts = [yaml.safe_load(t)["groups"] for t in matrix_layers.layers(text)]
    assert 2 <= len(parts) <= 8, len(parts)   # 5 for the bundled rules
    settings = {g["name"]: {k: v for k, v in g.items() if k != "rules"} for g in original}
    for groups in parts:
        for g in groups:
            assert {k: v for k, v in g.items() if k != "rules"} == settings[g["name"]]
    for g in original:
        kept = [r for groups in parts for h in groups if h["name"] == g["name"] for r in h["rules"]]
        assert sorted(map(repr, kept)) == sorted(map(repr, g["rules"]))
    flat = [r for g in original for r in g["rules"]]
    numbers = matrix_layers.layer_numbers(flat)
    reads = matrix_layers._reads(flat)
    for k, rule in enumerate(flat):
        assert all(numbers[i] < numbers[k] for i in reads[k] if i < k), rule
        assert all(numbers[j] <= numbers[k] for j in range(k) if k in reads[j]), rule


def test_fixed_labels_and_alert_names_narrow_what_a_selector_reads():
    """Per-field rules share a name: ``x{dcgm_field="A"}`` reads the writer of field A only, and
    ``ALERTS{alertname="B"}`` only alert B; a regex or negative matcher narrows nothing."""
    rules = [{"record": "x:y:max", "expr": "max(a)", "labels": {"dcgm_field": "A"}},
             {"record": "x:y:max", "expr": 'max(x:y:max{dcgm_field="A"})', "labels": {"dcgm_field": "B"}},
             {"record": "x:y:max", "expr": 'max(x:y:max{dcgm_field="B"})', "labels": {"dcgm_field": "C"}},
             {"alert": "A", "expr": 'x:y:max{dcgm_field="C"} > 1'},
             {"alert": "B", "expr": "up == 0"},
             {"record": "z:y:max", "expr": 'max_over_time(ALERTS{alertname="B"}[3m])'},
             {"record": "w:y:max", "expr": 'x:y:max{dcgm_field!="A"} or x:y:max{dcgm_field=~"A"}'}]
    assert matrix_layers._reads(rules) == [set(), {0}, {1}, {2}, set(), {4}, {0, 1, 2}]
    assert matrix_layers.layer_numbers(rules) == [0, 1, 2, 3, 0, 1, 3]


def test_a_name_matcher_is_refused():
    """``{__name__=~"a:.*"}`` could read any recorded series: no layer is safe for it."""
    import pytest
    with pytest.raises(ValueError, match="__name__"):
        matrix_layers.layer_numbers([_rule("a:x:sum", "sum(up)"), _rule("b:x:sum", 'sum({__name__=~"a:.*"})')])
