"""Recording rules everything else shares: which field each GPU reports now, the GPU inventory,
coverage, and MIG-aware node aggregates.

One ``group by`` per field feeds all presence alerts, dashboards and coverage panels; alerts
compare these small series instead of re-selecting raw metrics (measured at 8,000 GPUs, a shared
inventory cut evaluation time by a third against a ``count`` per rule).
"""

from __future__ import annotations

from ..promqltext import matcher
from ..sourcepresets import PRIMARY
from ..spec import Spec
from . import names
from .common import record
from .model import Rule
from .promql import by, dur, fleet_ids, gpu_ids, job_sel, node_ids, valid_values


def field_present(spec: Spec) -> list[Rule]:
    """One recording rule per required/optional field: 1 per (target, GPU) carrying it now.
    ``instance`` is kept so alerts can tell which target a GPU came from; the workload labels
    (pod, namespace, exported_*) are dropped so their churn does not split a GPU."""
    keep = by(("job", "instance") + spec.exporter.labels.identity)
    return [record(names.FIELD_PRESENT, f"group by ({keep}) ({job_sel(spec, m.name)})",
                   {names.FIELD_LABEL: m.name})
            for m in spec.tracked_metrics]


def inventory(spec: Spec) -> list[Rule]:
    """The GPU inventory: 1 per GPU reporting a required field now. Built from required fields
    only, so a GPU exporting only optional fields does not count as healthy. With fallback
    sources, a GPU only a fallback serves counts too (its normalized series)."""
    ids = gpu_ids(spec)
    required = "|".join(m.name for m in spec.required_metrics)
    # dcgm_field is a label value on our own small series, not a metric name: the regex is cheap.
    src = f'{names.FIELD_PRESENT}{{{matcher("job", spec.exporter.job)},{matcher(names.FIELD_LABEL, required, "=~")}}}'
    expr = f"group by ({by(ids)}) ({src})"
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
    return [record(names.INVENTORY, expr)]


def target_node(spec: Spec) -> list[Rule]:
    """Which node each exporter target serves, from its GPU series: the exporter alerts (from
    ``up`` and ``scrape_*``, which carry no node label) join it, so Alertmanager can match a down
    target with its node's GPU alerts."""
    lab = spec.exporter.labels
    keep = by(("job",) + ((lab.cluster,) if lab.cluster else ()) + ("instance", lab.node))
    src = f'{names.FIELD_PRESENT}{{{matcher("job", spec.exporter.job)},{matcher(lab.node, "", "!=")}}}'
    return [record(names.TARGET_NODE, f"group by ({keep}) ({src})")]


def counts(spec: Spec) -> list[Rule]:
    """Physical GPUs (distinct UUIDs) reporting now per job and node, physical GPUs seen within
    the inventory lookback, and MIG instances reporting now per job and node. The inventory has
    one series per MIG instance: counted as is, one GPU in 4 MIG slices read 4 GPUs (issue 11,
    item 7), so physical GPUs and MIG instances are counted apart and named so."""
    lab = spec.exporter.labels
    nodes = by(node_ids(spec))
    lookback = dur(spec.alerts.inventory_lookback)
    fleet = by(fleet_ids(spec))
    device = f"{nodes}, {lab.gpu}"
    mig = f'{names.INVENTORY}{{{lab.mig_instance}!=""}}'
    return [
        record(names.NODE_GPU_DEVICES_REPORTING, f"count by ({nodes}) (group by ({device}) ({names.INVENTORY}))"),
        record(names.GPU_DEVICES_REPORTING, f"sum by ({fleet}) ({names.NODE_GPU_DEVICES_REPORTING})"),
        record(names.GPU_DEVICES_KNOWN,
               f"count by ({fleet}) (group by ({device}) (max_over_time({names.INVENTORY}[{lookback}])))"),
        record(names.NODE_MIG_INSTANCES_REPORTING, f"count by ({nodes}) ({mig})"),
        record(names.MIG_INSTANCES_REPORTING, f"sum by ({fleet}) ({names.NODE_MIG_INSTANCES_REPORTING})"),
    ]


def coverage(spec: Spec) -> list[Rule]:
    """Share of inventory GPUs reporting each field, fleet-wide and per node (0..1).

    Fields DCGM does not report per MIG instance (``mig: unsupported``) are measured against the
    GPUs not in MIG mode only; otherwise a MIG fleet would show them at a permanent 50 %."""
    mig = spec.exporter.labels.mig_instance
    sets = [([m.name for m in spec.tracked_metrics if m.mig != "unsupported"], ""),
            ([m.name for m in spec.tracked_metrics if m.mig == "unsupported"], f',{mig}=""')]
    out = []
    for name, level in ((names.COVERAGE, fleet_ids(spec)), (names.NODE_COVERAGE, node_ids(spec))):
        parts = []
        for fields, extra in sets:
            if not fields:
                continue
            present = f'{names.FIELD_PRESENT}{{{matcher(names.FIELD_LABEL, "|".join(fields), "=~")}{extra}}}'
            inv = f"{names.INVENTORY}{{{extra[1:]}}}" if extra else names.INVENTORY
            # FIELD_PRESENT keeps ``instance``: while a replaced exporter pod and its successor
            # are both scraped a GPU appears twice, so count each GPU once (found by rule tests).
            present = f"group by ({by(gpu_ids(spec))}, {names.FIELD_LABEL}) ({present})"
            parts.append(f"  count by ({by(level)}, {names.FIELD_LABEL}) ({present})\n"
                         f"  / on ({by(level)}) group_left ()\n  count by ({by(level)}) ({inv})")
        # one rule (the two parts have disjoint dcgm_field values), so promtool sees no duplicate
        out.append(record(name, "(\n" + "\n)\nor\n(\n".join(parts) + "\n)"))
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
