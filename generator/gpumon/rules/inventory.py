"""Recording rules everything else shares: which field each GPU reports now, the GPU inventory,
coverage, and MIG-aware node aggregates.

One selection of the required fields makes the inventory; one ``unless`` per field records the
inventory GPUs missing it (sparse: nothing on a healthy fleet), which feeds the presence alerts,
coverage and the dashboards' missing tables (issue 16: recording a dense "present" series per
GPU and field held more series than the raw fields).
"""

from __future__ import annotations

import re

from ..promqltext import matcher
from ..spec.presets import PRIMARY
from ..spec import Spec
from . import fresh, names
from .common import record
from .lost import physical_ids, reporting_sets
from .model import Rule
from .promql import by, dur, fields_sel, fleet_ids, gpu_ids, job_sel, named, node_ids, valid_values


def _inventory(spec: Spec, m) -> str:
    """The inventory, without MIG instances for fields DCGM does not report per instance."""
    if m.mig == "unsupported":
        return f'{names.INVENTORY}{{{matcher(spec.exporter.labels.mig_instance, "")}}}'
    return names.INVENTORY


def inventory(spec: Spec) -> list[Rule]:
    """The GPU inventory: 1 per GPU reporting a required field now, from one selection of every
    required field (of the series that name their node and GPU: :func:`.promql.named`). Built from
    required fields only, so a GPU exporting only optional fields does not count as healthy. With fallback sources, a GPU only a fallback serves counts too (its
    normalized series). The workload labels (pod, namespace, exported_*) are dropped so their
    churn does not split a GPU. Plus :func:`.fresh.mark`: one series without ``job`` that says
    the rule succeeded."""
    ids = gpu_ids(spec)
    expr = f"group by ({by(ids)}) ({fields_sel(spec, spec.required_metrics)})"
    sourced = "|".join(m.name for m in spec.required_metrics if m.sources)
    if sourced:
        # a GPU served only by fallback sources (a node wholly on 1.x names) is in the inventory
        # too, once (``or on`` its UUID), so the presence tiers see what its sources cannot serve
        # (issue 13); one with any primary field keeps the primary's labels
        lab = spec.exporter.labels
        device = by(("job",) + ((lab.cluster,) if lab.cluster else ()) + (lab.gpu,))
        served = (f'{names.NORMALIZED}{{{matcher("job", spec.exporter.job)},{matcher(names.FIELD_LABEL, sourced, "=~")},'
                  f'{matcher(names.SOURCE_LABEL, PRIMARY, "!=")}}}')
        expr = f"{expr}\nor on ({device})\ngroup by ({by(ids)}) ({served})"
    # the union in parentheses: `unless` binds tighter than `or`
    expr = named(spec, "(\n  " + expr.replace("\n", "\n  ") + "\n)" if sourced else expr)
    # its mark: an empty inventory is "no GPU reports", not "the rule failed" (fresh.succeeded)
    inner = expr.replace("\n", "\n  ")
    expr = f"(\n  {inner}\n)\nor\n{fresh.mark(fresh.inventory_group(spec))}"
    return [record(names.INVENTORY, expr)]


def node_count(m) -> str:
    """The per-node inventory count a field is measured against (:func:`node_counts`): without MIG
    instances for fields DCGM does not report per instance (as :func:`_inventory`)."""
    return names.NODE_INVENTORY_NON_MIG if m.mig == "unsupported" else names.NODE_INVENTORY


def node_counts(spec: Spec) -> list[Rule]:
    """The inventory series per node, all and not in MIG mode (coverage's denominators), recorded
    in the inventory's own group right after it, so they are the inventory of the same evaluation.
    Per-field rules that only ask "which nodes have inventory GPUs" or "how many" read these (one
    series per node) instead of the inventory (one per GPU): at 8 GPUs a node, an eighth of the
    series, once per field and evaluation."""
    lab = spec.exporter.labels
    nodes = by(node_ids(spec))
    return [record(names.NODE_INVENTORY, f"count by ({nodes}) ({names.INVENTORY})"),
            record(names.NODE_INVENTORY_NON_MIG, f'count by ({nodes}) ({names.INVENTORY}{{{matcher(lab.mig_instance, "")}}})')]


def _absent_on(m) -> str:
    """:data:`names.NODE_FIELD_ABSENT` of one field."""
    return f'{names.NODE_FIELD_ABSENT}{{{matcher(names.FIELD_LABEL, m.name)}}}'


def field_absent(spec: Spec, metrics) -> list[Rule]:
    """One recording rule per (optional) field of ``metrics``: 1 per node with inventory GPUs of
    which none reports it now (label ``dcgm_field``). An optional field a whole fleet never serves
    (``DCGM_FI_PROF_*`` where profiling is unsupported, vGPU fields on bare metal) would otherwise
    put every GPU of the fleet in its missing set, as dense as the "present" series issue 16
    removed (5,000 of 8,405 recorded series at 1,000 GPUs); a node here counts all its GPUs
    missing in coverage from the node counts instead."""
    nodes = by(node_ids(spec))
    return [record(names.NODE_FIELD_ABSENT, f"group by ({nodes}) ({node_count(m)})\nunless on ({nodes})\n"
                                            f"group by ({nodes}) ({job_sel(spec, m.name)})", {names.FIELD_LABEL: m.name})
            for m in metrics]


def field_missing(spec: Spec, metrics) -> list[Rule]:
    """One recording rule per field of ``metrics``: 1 per inventory GPU that does not report it
    now (label ``dcgm_field``; MIG instances left out for fields DCGM does not report per
    instance). Sparse: a healthy fleet records nothing, where one dense "present" series per GPU
    and field doubled the TSDB (issue 16: 184k series at 8,000 GPUs). Presence alerts, coverage
    and the dashboards' "missing now" tables read these; "has the field" is the inventory
    ``unless`` this set. An optional field's set leaves out the nodes of
    :data:`names.NODE_FIELD_ABSENT` (recorded just before, in the same group: see
    :func:`field_absent`)."""
    ids, nodes = by(gpu_ids(spec)), by(node_ids(spec))

    def expr(m) -> str:
        out = f"{_inventory(spec, m)}\nunless on ({ids})\n{job_sel(spec, m.name)}"
        return out if m.required else f"{out}\nunless on ({nodes})\n{_absent_on(m)}"
    return [record(names.FIELD_MISSING, expr(m), {names.FIELD_LABEL: m.name}) for m in metrics]


def unlabelled(spec: Spec) -> list[Rule]:
    """1 per exporter target and tracked field (``dcgm_field``) whose series of the field lack the
    node or the GPU label (``Hostname`` renamed ``hostname`` after exporter 4.8.2; ``uuid`` in 1.x
    compatibility mode); no series when every one has both. GpuIdentityLabelMissing and the health
    dashboard read it.

    One rule for every field, the one place the rules select metric names by regex: the index
    answers ``label=""`` without reading samples, but by merging the postings of every value of
    the label (every node, every UUID) once per selector. A selector per field made that merge
    29 times an evaluation for the bundled spec; one selector over the fields' names makes it once
    (at 8,000 GPUs, 0.65 s against 0.21 s an evaluation on Prometheus 2.42, 0.32 s against 0.15 s
    on 3.16). The names are the spec's, each matched whole (an alternation of escaped literals
    the index looks up one by one). Runs in the coverage group, every
    ``alerts.slow_group_interval``."""
    lab = spec.exporter.labels
    keep = by(("job",) + ((lab.cluster,) if lab.cluster else ()) + ("instance", "__name__"))
    fields = matcher("__name__", "|".join(re.escape(m.name) for m in spec.tracked_metrics), "=~")
    job = matcher("job", spec.exporter.job)
    lacking = " or ".join(f"{{{fields},{job},{matcher(label, '')}}}" for label in (lab.node, lab.gpu))
    return [record(names.UNLABELLED, f'label_replace(group by ({keep}) ({lacking}), '
                                     f'"{names.FIELD_LABEL}", "$1", "__name__", "(.+)")')]


def target_node(spec: Spec) -> list[Rule]:
    """Which node each exporter target serves, from its required GPU series (one selection): the
    exporter alerts (from ``up`` and ``scrape_*``, which carry no node label) join it, so
    Alertmanager can match a down target with its node's GPU alerts."""
    lab = spec.exporter.labels
    keep = by(("job",) + ((lab.cluster,) if lab.cluster else ()) + ("instance", lab.node))
    src = fields_sel(spec, spec.required_metrics, matcher(lab.node, "", "!="))
    return [record(names.TARGET_NODE, f"group by ({keep}) ({src})")]


def counts(spec: Spec) -> list[Rule]:
    """Physical GPUs (distinct UUIDs) reporting now per job and node, physical GPUs seen within
    the inventory lookback, and MIG instances reporting now per job and node. The inventory has
    one series per MIG instance: counted as is, one GPU in 4 MIG slices read 4 GPUs (issue 11,
    item 7), so physical GPUs and MIG instances are counted apart and named so. The physical GPUs
    include those of nodes on dcgm-exporter 1.x names (:func:`.lost.reporting_sets`), which the
    inventory of current names leaves out."""
    lab = spec.exporter.labels
    nodes = by(node_ids(spec))
    lookback = dur(spec.alerts.inventory_lookback)
    fleet = by(fleet_ids(spec))
    device = f"{nodes}, {lab.gpu}"
    mig = f'{names.INVENTORY}{{{lab.mig_instance}!=""}}'
    sets = reporting_sets(spec)
    now = " or ".join(sets)
    seen = " or ".join(f"max_over_time({s}[{lookback}])" for s in sets)
    return [
        record(names.NODE_GPU_DEVICES_REPORTING, f"count by ({nodes}) (group by ({device}) ({now}))"),
        record(names.GPU_DEVICES_REPORTING, f"sum by ({fleet}) ({names.NODE_GPU_DEVICES_REPORTING})"),
        # by UUID alone: a GPU seen under two node names or indexes in the lookback (the exporter
        # pod's name as node label, a renumbering after a reboot) is one GPU
        record(names.GPU_DEVICES_KNOWN, f"count by ({fleet}) (group by ({by(physical_ids(spec))}) ({seen}))"),
        record(names.NODE_MIG_INSTANCES_REPORTING, f"count by ({nodes}) ({mig})"),
        record(names.MIG_INSTANCES_REPORTING, f"sum by ({fleet}) ({names.NODE_MIG_INSTANCES_REPORTING})"),
    ]


def coverage(spec: Spec) -> list[Rule]:
    """Share of inventory GPUs reporting each field, fleet-wide (every field) and per node (only
    where below 1), as 1 - missing / inventory from the sparse :data:`names.FIELD_MISSING` and the
    per-node inventory counts, so no rule reads a series per GPU and field (issue 16).

    Fields DCGM does not report per MIG instance (``mig: unsupported``) are measured against the
    GPUs not in MIG mode only; otherwise a MIG fleet would show them at a permanent 50 %."""
    sets = [([m for m in spec.tracked_metrics if m.mig != "unsupported"], names.NODE_INVENTORY),
            ([m for m in spec.tracked_metrics if m.mig == "unsupported"], names.NODE_INVENTORY_NON_MIG)]
    fleet, nodes = by(fleet_ids(spec)), by(node_ids(spec))
    out = []
    for m, count in ((m, count) for fields, count in sets for m in fields):
        # fleet-wide: one rule per field (a series for every field, 1 where no GPU misses it)
        missing = f'count by ({fleet}) ({names.FIELD_MISSING}{{{matcher(names.FIELD_LABEL, m.name)}}})'
        if not m.required:
            # an optional field's GPUs missing on nodes where none serves it: the node's inventory count
            missing = (f"sum by ({fleet}) (\n    count by ({nodes}) ({names.FIELD_MISSING}{{{matcher(names.FIELD_LABEL, m.name)}}})"
                       f"\n    or\n    {count} and on ({nodes}) {_absent_on(m)}\n  )")
        total = f"sum by ({fleet}) ({count})"
        out.append(record(names.COVERAGE, f"1 - (\n  {missing}\n  / on ({fleet}) group_left ()\n"
                                          f"  {total}\n  or\n  {total} * 0\n)", {names.FIELD_LABEL: m.name}))
    parts = []
    for fields, count in sets:
        if fields:
            missing = f'{names.FIELD_MISSING}{{{matcher(names.FIELD_LABEL, "|".join(m.name for m in fields), "=~")}}}'
            parts.append(f"  1 - count by ({nodes}, {names.FIELD_LABEL}) ({missing})\n"
                         f"  / on ({nodes}) group_left ()\n  {count}")
    optional = "|".join(m.name for m in spec.optional_metrics)
    if optional:
        # nodes where no GPU serves an optional field: coverage 0 (their GPUs are not in the missing set)
        parts.append(f'  {names.NODE_FIELD_ABSENT}{{{matcher(names.FIELD_LABEL, optional, "=~")}}} * 0')
    # per node only where below 1; one rule (the parts have disjoint (node, dcgm_field) pairs)
    out.append(record(names.NODE_COVERAGE, "(\n" + "\n)\nor\n(\n".join(parts) + "\n)"))
    return out


def aggregates(spec: Spec) -> list[Rule]:
    """Per-node sums of device-wide power and energy. On MIG every instance repeats the device
    value, so each GPU is reduced to one series (``max by`` UUID) before summing; implausible
    readings (sentinels, NaN) are filtered first so one bad GPU does not poison its node."""
    out: list[Rule] = []
    nodes = node_ids(spec)
    for m in spec.metrics:
        if m.kind == "gauge" and m.unit == "watts" and m.mig == "device":
            per_gpu = f"max by ({by(gpu_ids(spec, m))}) ({valid_values(spec, m)})"
            out.append(record(names.node_sum(m.name), f"sum by ({by(nodes)}) (\n  {per_gpu}\n)"))
        if m.kind == "counter" and m.unit == "millijoules":
            window = dur(max(300.0, 4 * spec.exporter.sample_interval))
            gpu_level = names.energy_watts("job_gpu", window)
            # rate() handles counter resets (driver reload), so the result never goes negative.
            out.append(record(gpu_level, f"max by ({by(gpu_ids(spec, m))}) (rate({job_sel(spec, m.name)}[{window}])) / 1000"))
            out.append(record(names.energy_watts("job_node", window), f"sum by ({by(nodes)}) ({gpu_level})"))
    return out
