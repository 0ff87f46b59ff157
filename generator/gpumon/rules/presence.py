"""Alerts for series that go missing: per field fleet-wide, per node and per GPU, GPUs lost
altogether, and series that lost their identity labels.

The three per-field tiers exclude each other, so one cause pages once: a field gone everywhere
fires one fleet alert; gone on every GPU of one node, one node alert; gone on some GPUs, one
alert per GPU. All tiers only look at nodes that report now, so a target that is down or gone
(already alerted by the exporter alerts) does not page once per GPU.
"""

from __future__ import annotations

import textwrap

from ..promqltext import matcher
from ..durations import format_duration
from ..spec import Metric, Spec
from . import fresh, lost, names, sources
from .common import alert
from .model import Rule
from .inventory import node_count
from .promql import by, fleet_ids, gpu_ids, job_sel, node_ids


def _missing(spec: Spec, m: Metric) -> str:
    """The inventory GPUs that do not report ``m`` now (:data:`names.FIELD_MISSING`), as of the
    inventory group's last evaluation (:func:`fresh.fresh`: none left from before a restart)."""
    sel = f'{names.FIELD_MISSING}{{{matcher("job", spec.exporter.job)},{matcher(names.FIELD_LABEL, m.name)}}}'
    return fresh.fresh(sel, fresh.inventory_group(spec))


def _missing_count(spec: Spec, m: Metric, level: tuple[str, ...], op: str) -> str:
    """The ``level`` groups (nodes, or jobs and clusters) of those in :func:`_missing` whose
    count of GPUs missing ``m`` compares ``op`` with the inventory's count there: ``<``, some
    inventory GPU reports it now; ``>=``, none does (the missing set is part of the inventory of
    the same evaluation, :func:`.inventory.node_counts`). Counted from the per-node counts, not by
    reading the inventory (a series per GPU) per field."""
    at = by(level)
    total = node_count(m) if tuple(level) == node_ids(spec) else f"sum by ({at}) ({node_count(m)})"
    return f"count by ({at}) ({_missing(spec, m)})\n  {op} on ({at})\n  {total}"


def _some_present(spec: Spec, m: Metric, level: tuple[str, ...]) -> str:
    """The ``level`` groups where some inventory GPU reports ``m`` now."""
    return _missing_count(spec, m, level, "<")


def _none_present(spec: Spec, m: Metric) -> str:
    """The nodes where every inventory GPU misses ``m`` now (1 each)."""
    return f"group by ({by(node_ids(spec))}) (\n  {_missing_count(spec, m, node_ids(spec), '>=')}\n)"


def metric_absent(spec: Spec, m: Metric) -> Rule:
    """Field absent for every GPU while at least one target is up (config/version problem): every
    inventory GPU of the job (and cluster, when the spec names one) is in the field's missing set,
    or the targets are up and no GPU reports any required field (the inventory is empty: losing
    the only required field, or every one, must not leave the fleet silent; found by the spec
    fuzzer), once the inventory group has been evaluating for :data:`.fresh.SETTLE` (before its
    first records can be read, the inventory looks empty too: a healthy fleet paged on vmalert and
    a Thanos Ruler at start), and only while the inventory rule succeeds (:func:`.fresh.succeeded`:
    a failing rule's records vanish after the lookback and the inventory looks empty; the failure
    is the ruler's rule-failure alert and validate's finding), and not while the field's series are
    there without a node or GPU label (GpuIdentityLabelMissing's case). A field DCGM does not report per MIG instance is measured against
    the GPUs outside MIG mode: a fleet all in MIG mode has none, and stays quiet.

    Counted from the missing sets and the per-node counts the node and GPU tiers read (recorded in
    one inventory evaluation), not by reading the raw field again: the three tiers see the same
    evaluation, so they exclude each other by construction (the fleet tier needs every GPU
    missing, the node tier some GPU of the fleet present), and the field's series are read once
    per inventory evaluation instead of a second time over a window per presence evaluation (at
    8,000 GPUs the presence group costs 0.45x on Prometheus 2.42 and 3.16: docs/performance.md)."""
    fleet = by(fleet_ids(spec))
    # the fleets whose targets are up, less those with inventory GPUs that are not all missing it
    every = _missing_count(spec, m, fleet_ids(spec), ">=").replace("\n", "\n  ")
    expr = (f"group by ({fleet}) ({job_sel(spec, 'up')} == 1)\nunless on ({fleet})\n(\n"
            f"  group by ({fleet}) ({names.NODE_INVENTORY})\n  unless on ({fleet})\n  (\n    {every}\n  )\n)")
    # an empty inventory pages only once the inventory group's results can be read: the groups
    # start together, and vmalert or a Thanos Ruler reads its records back from the store later
    group = fresh.inventory_group(spec)
    expr += f"\nand on ()\n{fresh.settled(group)}"
    # nor while the inventory rule fails: its records linger for the lookback, then look empty
    expr += f"\nand on ()\n{fresh.succeeded(names.INVENTORY, group)}"
    # nor where the field's series are there but name no node or GPU (every exporter writing
    # `hostname`): those are GpuIdentityLabelMissing's, and the inventory cannot hold them
    unnamed = f"{names.UNLABELLED}{{{matcher('job', spec.exporter.job)},{matcher(names.FIELD_LABEL, m.name)}}}"
    expr += f"\nunless on ({fleet})\ngroup by ({fleet}) ({fresh.fresh(unnamed, fresh.coverage_group(spec))})"
    if m.sources:  # a fallback serving some GPU: GpuMetricFallbackServing per node, not this page
        expr += f"\nunless on ({fleet})\ngroup by ({fleet}) ({sources.normalized_sel(spec, m)})"
    return alert(spec, "GpuMetricAbsent", expr, severity="critical", for_=spec.alerts.for_,
                 kind="metric_absent", labels={names.FIELD_LABEL: m.name}, metric=m.name, title=m.title,
                 cluster=spec.exporter.labels.cluster)


def node_metric_missing(spec: Spec, m: Metric) -> Rule:
    """Field missing on every GPU of a node that reports other fields, while other nodes of its
    job (and cluster, when the spec names one: a cluster without the field is the fleet tier's
    alert) have it."""
    nodes, fleet = by(node_ids(spec)), by(fleet_ids(spec))
    # with sources, "has it" means any source serves it (the normalized series): a node a fallback
    # serves is GpuMetricFallbackServing's, and a fleet served only by fallbacks still finds its
    # node without any source
    if m.sources:
        has = sources.normalized_sel(spec, m)
        # the nodes with inventory GPUs and none of them reporting it are among those of the missing set
        expr = (f"(\n  group by ({nodes}) ({_missing(spec, m)})\n"
                f"  unless on ({nodes})\n  group by ({nodes}) ({has})\n)\n"
                f"and on ({fleet})\ngroup by ({fleet}) ({has})")
    else:
        expr = f"{_none_present(spec, m)}\nand on ({fleet})\n(\n  {_some_present(spec, m, fleet_ids(spec))}\n)"
    return alert(spec, "GpuNodeMetricMissing", expr, severity="warning", for_=spec.alerts.for_,
                 kind="node_metric_missing", labels={names.FIELD_LABEL: m.name}, metric=m.name, title=m.title)


def gpu_metric_missing(spec: Spec, m: Metric) -> Rule:
    """Field missing on a GPU that reports other fields, while other GPUs of its node have it."""
    nodes = by(node_ids(spec))
    served = ""
    if m.sources:  # a GPU a fallback serves (matched per device: a source may lack the GPU index)
        served = f"\n  unless on ({by(sources.device_ids(spec))})\n  {sources.fallback_sel(spec, m)}"
    has = (f"group by ({nodes}) ({sources.normalized_sel(spec, m)})" if m.sources
           else _some_present(spec, m, node_ids(spec)))
    expr = f"(\n  {_missing(spec, m)}{served}\n)\nand on ({nodes})\n(\n  {has}\n)"
    if gpu_ids(spec, m) != gpu_ids(spec):
        # a device-wide field is missed on every MIG instance of the GPU: one page per GPU, which a
        # re-partition (new instance ids) does not end and fire again
        expr = f"group by ({by(gpu_ids(spec, m) + (names.FIELD_LABEL,))}) (\n{textwrap.indent(expr, '  ')}\n)"
    return alert(spec, "GpuMetricMissing", expr, severity="warning", for_=spec.alerts.for_,
                 kind="gpu_metric_missing", labels={names.FIELD_LABEL: m.name}, metric=m.name, title=m.title)


def lost_window(spec: Spec) -> float:
    """Seconds a GPU (and its node) must have been silent to count as gone: 4 sample intervals.
    Compared with "reporting now", a flapping target's failed scrapes no longer reset ``for``:
    a GPU lost on a flapping node stayed pending forever (issue 11, item 5)."""
    return 4 * spec.exporter.sample_interval


def gpu_lost(spec: Spec) -> Rule:
    """A known GPU (:data:`names.KNOWN`: it reported once and is not retired) that reports nothing
    now, on a node that still reports other GPUs (a GPU off the bus; an exporter that no longer
    sees it) or whose exporter targets all left service discovery (:func:`lost.node_gone`; a
    target that is down is GpuExporterDown's page). Compared by UUID (:func:`lost.physical_ids`), so
    re-partitioning MIG instances, a GPU renumbered after a reboot and a node label that changes
    with the exporter pod are not a lost GPU. "Now"
    and "still reports" look at :func:`lost_window`, so the scrapes a flapping target misses do not
    count. It stays until the GPU reports again or ``alerts.retired`` names it or its node (it
    resolved when the inventory lookback passed, the GPU still gone). A GPU gone after a critical
    XID is GpuXidCritical's (:data:`names.XID_LOST`): one page for one cause."""
    device = by(lost.device_ids(spec))
    nodes = by(node_ids(spec))
    recent = lost.recent(spec)
    expr = (f"(\n  {names.KNOWN}\n  unless on ({by(lost.physical_ids(spec))})\n  {recent}\n)\n"
            f"and on ({nodes})\n(\n  group by ({nodes}) ({recent})\n  or\n  {lost.node_gone(spec)}\n)")
    if lost.xid_metric(spec) is not None:
        expr += f"\nunless on ({device})\n{names.XID_LOST}"
    return alert(spec, "GpuLost", expr, severity="critical", for_=spec.alerts.for_, kind="gpu_lost",
                 lookback=format_duration(spec.alerts.inventory_lookback))


def identity_label_missing(spec: Spec) -> Rule:
    """Series without the node or GPU label (``Hostname`` renamed ``hostname`` after exporter
    4.8.2; ``uuid`` in 1.x compatibility mode): per-GPU rules and dashboards cannot see them.
    Critical: the target's GPUs leave the inventory, so GpuLost, the presence tiers and every
    per-GPU threshold of that target are blind, as for a target serving only 1.x names
    (GpuExporterLegacyNames), and this is the one alert that fires.

    One alert per job (and cluster), its value the number of targets: the cause is the exporter's
    version or configuration, rolled out over many nodes; per target, a rollout paged once per
    node as it went (the targets are in the runbook's query)."""
    unlabelled = fresh.fresh(job_sel(spec, names.UNLABELLED), fresh.coverage_group(spec))
    # one series per target: every label of the record but the field name
    expr = f"count by ({by(fleet_ids(spec))}) (max without ({names.FIELD_LABEL}) ({unlabelled}))"
    return alert(spec, "GpuIdentityLabelMissing", expr, severity="critical", for_=spec.alerts.for_,
                 kind="identity_label_missing")


def rules(spec: Spec) -> list[Rule]:
    """Presence alerts: three tiers per required field (and, for a field with sources, the
    fallback-serving warning), then whole-GPU and label checks."""
    out: list[Rule] = []
    # With a single required field the inventory *is* that field: a GPU missing it is not in
    # the inventory, so the node and GPU tiers could never fire (GpuLost covers it).
    tiers = len(spec.required_metrics) > 1
    for m in spec.required_metrics:
        out.append(metric_absent(spec, m))
        if tiers:
            out += [node_metric_missing(spec, m), gpu_metric_missing(spec, m)]
    return out + sources.alerts(spec) + [gpu_lost(spec), identity_label_missing(spec)]
