"""Scenarios for the recording rules: MIG-aware node power (4 instances x 100 W of one GPU read
100 W), sentinels kept out of node sums, GPU counts, field coverage, and the energy-derived
power that never goes negative across a counter reset (aitra-ai/aitra-meter#59)."""

from __future__ import annotations

from ..promqltext import matcher
from ..rules import names
from ..rules.model import Rule
from ..spec import Spec
from . import fleet
from .fleet import add_gpu, add_target, gpu_ids, node_ids, steps
from .model import Scenario, selector, test_step
from .values_cases import SENTINEL


def _records(rules: list[Rule]) -> set[str]:
    return {r.record for r in rules if r.record}


def node_power(spec: Spec, rules: list[Rule], step: float) -> list[Scenario]:
    """Per device-wide watts gauge: 4 MIG instances x 100 W read 100 W on their node; a GPU
    reporting a DCGM sentinel adds nothing to its node (only its plausible sibling counts)."""
    out = []
    recs = _records(rules)
    for m in spec.metrics:
        rec = names.node_sum(m.name)
        if rec not in recs:
            continue
        watts = 100.0 if (m.range_min or 0) <= 100 <= (m.range_max or 1e9) else fleet.baseline(m)
        sc = Scenario(f"{rec}: four MIG instances of one GPU reporting {fleet.fmt_value(watts)} W each "
                      f"read {fleet.fmt_value(watts)} W; a sentinel GPU adds nothing", 6, step)
        mig = fleet.mig_instances(1)
        plain_ok, plain_bad = fleet.gpus(1, 2, first_node=2)
        for inst in (mig[0].instance, plain_ok.instance):
            add_target(sc, spec, inst)
        for g in mig + [plain_ok]:
            add_gpu(sc, spec, g, [m], {m.name: sc.const(fleet.as_token(watts))})
        add_gpu(sc, spec, plain_bad, [m], {m.name: sc.const(SENTINEL)})
        sc.expect_expr(3, rec, [(selector(rec, node_ids(spec, fleet.node_name(1))), watts),
                                (selector(rec, node_ids(spec, fleet.node_name(2))), watts)])
        out.append(sc)
    return out


def counts(spec: Spec, step: float) -> list[Scenario]:
    """2 nodes x 2 GPUs, one GPU loses one field at step 2 and another GPU stops reporting."""
    if len(spec.required_metrics) < 2:
        return []                   # losing the only required field would remove the GPU itself
    m = spec.required_metrics[0]
    sc = Scenario("inventory: GPU counts and field coverage after one GPU is lost and one field is missing",
                  8, step)
    gpus = fleet.gpus(2, 2)
    lost_gpu, partial = gpus[3], gpus[0]
    for inst in sorted({g.instance for g in gpus}):
        add_target(sc, spec, inst)
    for g in gpus:
        over = {}
        if g == lost_gpu:
            over = {x.name: fleet.lost_from(fleet.healthy(x, sc.length, step), 2) for x in spec.required_metrics}
        if g == partial:
            over = {m.name: fleet.lost_from(fleet.healthy(m, sc.length, step), 2)}
        add_gpu(sc, spec, g, spec.required_metrics, over)
    job = fleet.fleet_labels(spec)
    at = 4
    sc.expect_expr(at, names.GPU_DEVICES_REPORTING, [(selector(names.GPU_DEVICES_REPORTING, job), 3)])
    sc.expect_expr(at, names.GPU_DEVICES_KNOWN, [(selector(names.GPU_DEVICES_KNOWN, job), 4)])
    sc.expect_expr(at, names.NODE_GPU_DEVICES_REPORTING, [
        (selector(names.NODE_GPU_DEVICES_REPORTING, node_ids(spec, fleet.node_name(1))), 2),
        (selector(names.NODE_GPU_DEVICES_REPORTING, node_ids(spec, fleet.node_name(2))), 1)])
    cov = f'{names.COVERAGE}{{{matcher(names.FIELD_LABEL, m.name)}}}'
    # 1 - missing / inventory (issue 16): written so, so the float matches promtool's exactly
    sc.expect_expr(at, cov, [(selector(names.COVERAGE, {**job, names.FIELD_LABEL: m.name}), 1 - 1 / 3)])
    node1 = node_ids(spec, fleet.node_name(1))
    ncov = f'{names.NODE_COVERAGE}{{{matcher(names.FIELD_LABEL, m.name)},{matcher(spec.exporter.labels.node, fleet.node_name(1))}}}'
    sc.expect_expr(at, ncov, [(selector(names.NODE_COVERAGE, {**node1, names.FIELD_LABEL: m.name}), 0.5)])
    # per-node coverage is recorded only below 1: node 2's GPU reports the field, so it has none
    ncov2 = f'{names.NODE_COVERAGE}{{{matcher(names.FIELD_LABEL, m.name)},{matcher(spec.exporter.labels.node, fleet.node_name(2))}}}'
    sc.expect_expr(at, ncov2, [])
    # issue 11, item 7: one GPU in 4 MIG slices is one physical GPU and 4 MIG instances
    mig = Scenario("inventory: a GPU in 4 MIG slices counts as one physical GPU and 4 MIG instances", 4, step)
    plain, sliced = fleet.gpus(1, 1), fleet.mig_instances(2, 0, 4)
    for inst in sorted({g.instance for g in plain + sliced}):
        add_target(mig, spec, inst)
    for g in plain + sliced:
        add_gpu(mig, spec, g, spec.required_metrics)
    node2 = node_ids(spec, fleet.node_name(2))
    mig.expect_expr(2, names.GPU_DEVICES_REPORTING, [(selector(names.GPU_DEVICES_REPORTING, job), 2)])
    mig.expect_expr(2, names.NODE_GPU_DEVICES_REPORTING, [
        (selector(names.NODE_GPU_DEVICES_REPORTING, node_ids(spec, fleet.node_name(1))), 1),
        (selector(names.NODE_GPU_DEVICES_REPORTING, node2), 1)])
    mig.expect_expr(2, names.MIG_INSTANCES_REPORTING, [(selector(names.MIG_INSTANCES_REPORTING, job), 4)])
    mig.expect_expr(2, names.NODE_MIG_INSTANCES_REPORTING, [(selector(names.NODE_MIG_INSTANCES_REPORTING, node2), 4)])
    return [sc, mig]


def optional_coverage(spec: Spec, step: float) -> list[Scenario]:
    """2 nodes x 2 GPUs report every required field; the first optional field is served by one GPU
    of node 1 only. Node 2 serves it on no GPU: it is recorded once as a node without the field
    (not as two missing GPUs), and coverage still counts its GPUs: 1 of 4 (fleet), 1/2 and 0 (nodes)."""
    m = next(iter(spec.optional_metrics), None)
    if m is None or not spec.required_metrics:
        return []
    sc = Scenario(f"coverage of optional {m.name}: one GPU of node 1 serves it, node 2 serves it on no GPU", 6, step)
    gpus = fleet.gpus(2, 2)
    for inst in sorted({g.instance for g in gpus}):
        add_target(sc, spec, inst)
    for g in gpus:
        add_gpu(sc, spec, g, list(spec.required_metrics) + ([m] if g == gpus[0] else []))
    field = {names.FIELD_LABEL: m.name}
    at, node1, node2 = 4, node_ids(spec, fleet.node_name(1)), node_ids(spec, fleet.node_name(2))
    sc.expect_expr(at, f'{names.FIELD_MISSING}{{{matcher(names.FIELD_LABEL, m.name)}}}',
                   [(selector(names.FIELD_MISSING, {**gpu_ids(spec, gpus[1]), **field}), 1)])
    sc.expect_expr(at, f'{names.NODE_FIELD_ABSENT}{{{matcher(names.FIELD_LABEL, m.name)}}}',
                   [(selector(names.NODE_FIELD_ABSENT, {**node2, **field}), 1)])
    job = fleet.fleet_labels(spec)
    # 1 - (1 missing on node 1 + 2 on node 2) / 4, written so, so the float matches promtool's exactly
    sc.expect_expr(at, f'{names.COVERAGE}{{{matcher(names.FIELD_LABEL, m.name)}}}',
                   [(selector(names.COVERAGE, {**job, **field}), 1 - (1 + 2) / 4)])
    sc.expect_expr(at, f'{names.NODE_COVERAGE}{{{matcher(names.FIELD_LABEL, m.name)}}}',
                   [(selector(names.NODE_COVERAGE, {**node1, **field}), 1 - 1 / 2),
                    (selector(names.NODE_COVERAGE, {**node2, **field}), 0)])
    return [sc]


def energy(spec: Spec, rules: list[Rule], step: float) -> list[Scenario]:
    """aitra-ai/aitra-meter#59, 300 W from the energy counter, a reset at step 6; power recording rules never go
    negative (nor NaN) and read exactly 300 W once the window is past the reset."""
    recs = _records(rules)
    gpu_rec = next((r for r in sorted(recs) if r.startswith(names.energy_watts("job_gpu", ""))), None)
    node_rec = next((r for r in sorted(recs) if r.startswith(names.energy_watts("job_node", ""))), None)
    meter = next((m for m in spec.metrics if m.kind == "counter" and m.unit == "millijoules"), None)
    if not (gpu_rec and node_rec and meter):
        return []
    window = steps(max(300.0, 4 * spec.exporter.sample_interval), step)
    inc = fleet.counter_increment(meter, step)
    reset_at = 6
    length = reset_at + window + 4
    sc = Scenario(f"{meter.name} resets (driver reload): derived power never negative, "
                  f"{fleet.fmt_value(fleet.ENERGY_WATTS)} W after the window", length, step)
    gpu = fleet.gpus(1, 1)[0]
    add_target(sc, spec, gpu.instance)
    samples = [fleet.as_token(i * inc) for i in range(reset_at)] + \
              [fleet.as_token(1000 + i * inc) for i in range(length - reset_at)]
    add_gpu(sc, spec, gpu, [meter], {meter.name: samples})
    gpu_labels = gpu_ids(spec, gpu, meter)
    node_labels = node_ids(spec, gpu.node)
    for at in range(reset_at - 1, reset_at + window + 1):
        # ``>= bool 0`` returns 1 for a value >= 0 and 0 for a negative or NaN one.
        sc.expect_expr(at, f"{gpu_rec} >= bool 0", [(selector("", gpu_labels), 1)])
        sc.expect_expr(at, f"{node_rec} >= bool 0", [(selector("", node_labels), 1)])
    at = reset_at + window + 1
    # rate() extrapolates in floating point (300.00000000000006 for some scrape intervals) and
    # promtool compares samples exactly: within a millionth of a watt is "exactly 300 W"
    watts = fleet.fmt_value(fleet.ENERGY_WATTS)
    sc.expect_expr(at, f"abs({gpu_rec} - {watts}) < bool 1e-6", [(selector("", gpu_labels), 1)])
    sc.expect_expr(at, f"abs({node_rec} - {watts}) < bool 1e-6", [(selector("", node_labels), 1)])
    return [sc]


def scenarios(spec: Spec, rules: list[Rule]) -> list[Scenario]:
    """Every recording-rule scenario for ``spec``, whose built rules are ``rules``."""
    step = test_step(spec)
    return (node_power(spec, rules, step) + counts(spec, step) + optional_coverage(spec, step)
            + energy(spec, rules, step))
