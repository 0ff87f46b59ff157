"""What the rendered rules select, where the choice is a cost on a large fleet: a per-field rule
that only needs "which nodes have inventory GPUs" reads the per-node counts, not the per-GPU
inventory once per field; an XID rule reads only the XID series of the codes it is about.
(The generated promtool tests and the fault matrix prove what the rules page; these pin which
series they read to do it.)"""

from __future__ import annotations

import promql_parser
import pytest

from gpumon.readers import promql
from gpumon.rules import build_groups, names, rules_of
from gpumon.rules.values import XID_ALERTS
from gpumon.spec import load_spec

from .conftest import ROOT

SPECS = ["gpumon.yaml", "examples/kubernetes.yaml", "examples/mixed-fleet.yaml", "examples/textfile-sidecar.yaml"]


@pytest.fixture(scope="module", params=SPECS)
def spec_rules(request):
    spec = load_spec(ROOT / request.param)
    return spec, rules_of(build_groups(spec))


def _read(rule) -> list[tuple[str, list]]:
    tree, err = promql.parse(rule.expr)
    assert err is None, f"{rule.name}: {err}"
    return [(promql.metric_name(vs), promql.matchers(vs)) for vs, _ in promql.selectors(tree)]


def _mark(name: str, matchers) -> bool:
    """A read of the inventory rule's mark (rules/fresh.py ``mark``): one series, ``job=""``."""
    labels = {m.name: (m.op, m.value) for m in matchers}
    return (name == names.INVENTORY and labels.get("job") == (promql_parser.MatchOp.Equal, "")
            and labels.get(names.GROUP_LABEL, (None, ""))[1].endswith(".inventory"))


def test_per_field_presence_rules_read_node_counts_not_the_per_gpu_inventory(spec_rules):
    spec, rules = spec_rules
    per_field = [r for r in rules if r.label_map.get(names.FIELD_LABEL)
                 and (r.alert in ("GpuMetricMissing", "GpuNodeMetricMissing", "GpuMetricAbsent")
                      or r.record == names.NODE_FIELD_ABSENT)]
    assert len(per_field) >= len(spec.required_metrics), "the bundled shapes are there"
    for rule in per_field:
        read = {name for name, matchers in _read(rule) if not _mark(name, matchers)}
        assert names.INVENTORY not in read, f"{rule.name} of {rule.label_map[names.FIELD_LABEL]} reads every GPU"
    counted = [r for r in per_field if r.alert in ("GpuMetricMissing", "GpuNodeMetricMissing")
               and not spec.metric(r.label_map[names.FIELD_LABEL]).sources]
    for rule in counted:
        assert {names.NODE_INVENTORY, names.NODE_INVENTORY_NON_MIG} & {n for n, _ in _read(rule)}


def test_node_counts_are_recorded_with_the_inventory_they_count(spec_rules):
    """Same group, right after the inventory: a count is of the same evaluation as the missing sets."""
    spec, _ = spec_rules
    group = next(g for g in build_groups(spec) if g.name == f"{spec.name}.inventory")
    order = [r.record for r in group.rules if r.record]
    assert order.index(names.INVENTORY) < order.index(names.NODE_INVENTORY) < order.index(names.FIELD_MISSING)
    assert order.index(names.NODE_INVENTORY_NON_MIG) < order.index(names.FIELD_MISSING)


def test_xid_rules_read_only_the_codes_they_are_about(spec_rules):
    spec, rules = spec_rules
    xid = [m for m in spec.metrics if m.xid is not None and "err_code" in m.alert_labels]
    if not xid:
        pytest.skip("no XID field with an err_code label in this spec")
    checked = 0
    for rule in (r for r in rules if r.alert in XID_ALERTS.values() or r.record == names.XID_LOST):
        for name, matchers in _read(rule):
            if name in {m.name for m in xid}:
                assert any(m.name == "err_code" for m in matchers), f"{rule.name} reads every {name} series"
                checked += 1
    assert checked >= 6, "the critical, warning and informational alerts and the lost record read XIDs"


def test_every_read_of_a_job_level_record_selects_the_spec_job(spec_rules):
    """Two specs (two GPU pools, two exporter jobs) in one Prometheus: a rule reading a ``job_…``
    record without the spec's job would read the other spec's records as well, record the same
    series from two groups (``out of order sample``) and mix the pools' missing sets."""
    spec, rules = spec_rules
    records = {r.record for r in rules if r.record and r.record.split(":", 1)[0].startswith("job")}
    reads = 0
    for rule in rules:
        for name, matchers in _read(rule):
            if name not in records or _mark(name, matchers):
                continue
            reads += 1
            jobs = [(str(m.op), m.value) for m in matchers if m.name == "job"]
            assert jobs and all(value == spec.exporter.job for _, value in jobs), f"{rule.name} reads {name}: {jobs}"
    assert reads > 50, "the bundled shapes read their records"
