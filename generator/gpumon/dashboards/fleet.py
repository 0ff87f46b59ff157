"""Fleet overview: how many GPUs report, exporter targets, gpumon alerts firing, and per spec'd
field the per-GPU maximum, mean and minimum with the spec's unit and thresholds."""

from __future__ import annotations

from ..promqltext import matcher

from ..durations import format_duration
from ..rules import RuleGroup, lost, names
from .sdk import db
from ..spec import Metric, Spec
from . import base, kube as kube_panels, queries as q
from .panels import Board, Query, stat_panel, table_panel, threshold_steps, timeseries_panel
from .queries import FLEET
from .units import COUNT, plot, title as panel_title

KEY = "fleet"
TITLE = "GPU fleet overview"


def _counts(spec: Spec) -> tuple[str, str]:
    """(physical GPUs reporting now, physical GPUs seen within the lookback): distinct UUIDs, so
    MIG instances do not count as GPUs. With a cluster label the counts come from the per-GPU
    inventory and, when rendered, the GPUs on dcgm-exporter 1.x names (narrowed by the cluster
    picker)."""
    if not spec.exporter.labels.cluster:
        job = f'{{{matcher("job", spec.exporter.job)}}}'
        return f"sum({names.GPU_DEVICES_REPORTING}{job})", f"sum({names.GPU_DEVICES_KNOWN}{job})"
    lab = spec.exporter.labels
    sets = [q.sel(spec, s, FLEET) for s in lost.reporting_sets(spec)]
    lookback = format_duration(spec.alerts.inventory_lookback)
    device = f"{lab.cluster}, {lab.node}, {lab.gpu}"
    return (f"count(group by ({device}) ({' or '.join(sets)}))",
            f"count(group by ({device}) ({' or '.join(f'max_over_time({s}[{lookback}])' for s in sets)}))")


def _lost_count(spec: Spec, known: str) -> str:
    """Physical GPUs of :func:`queries.lost`; 0 (not "no value") while GPUs are known."""
    lab = spec.exporter.labels
    device = ", ".join(x for x in ("job", lab.cluster, lab.node, lab.gpu) if x)
    return f"count(group by ({device}) ({q.lost(spec, FLEET)}))\nor\n({known}) * 0"


def metric_panel(spec: Spec, m: Metric) -> db.Panel:
    """Max / mean / min over GPUs of one field (plausible readings only; device-wide fields
    de-duplicated per GPU first, so MIG instances do not count a GPU several times)."""
    p = plot(m)
    g = q.per_gpu(spec, m, FLEET, only_plausible=True)
    if p.rate:
        shown = "per-second rate" + (" (the power drawn, in watts)" if m.unit in ("millijoules", "joules") else "")
        note = "rate() absorbs counter resets (driver reload), so the lines never go negative."
    else:
        shown = "value"
        note = ("Readings outside the spec range, DCGM blank sentinels and NaN are left out (the "
                "GpuTelemetryImplausible alert reports them).")
    desc = f"{m.description} `{m.name}`, {shown} per GPU: maximum, mean and minimum over the fleet. {note}"
    if m.thresholds:
        desc += " Dashed lines: the spec's thresholds."
    empty = base.no_value(spec, f"No GPU reports {m.name} now.", "GpuMetricAbsent") if m.required else \
        f"No GPU reports {m.name}: it is optional (not every model, mode or driver has it)."
    return timeseries_panel(
        panel_title(m), [Query(f"max({g})", "max"), Query(f"avg({g})", "mean"), Query(f"min({g})", "min")],
        p.unit, description=desc, thresholds=threshold_steps(m, divisor=p.divisor) if m.thresholds else None,
        no_value=empty, min_interval=format_duration(spec.exporter.min_rate_window) if p.rate else None,
        links=base.runbook_links(spec, "GpuMetricAbsent") if m.required else ())


def _power_panel(spec: Spec, groups: list[RuleGroup]) -> db.Panel | None:
    """Fleet power from the MIG-de-duplicated per-node recording rules, if the spec has them."""
    recorded = q.recorded(groups)
    queries = []
    for m in spec.metrics:
        rule = names.node_sum(m.name)
        if rule in recorded:
            queries.append(Query(f"sum({q.sel(spec, rule, FLEET)})", m.title))
    for rule in sorted(r for r in recorded if r.startswith(names.energy_watts("job_node", ""))):
        queries.append(Query(f"sum({q.sel(spec, rule, FLEET)})", "from energy counter"))
    if not queries:
        return None
    return timeseries_panel(
        "Fleet power draw", queries, "watt",
        description="Sum over nodes of gpumon's per-node recording rules: each GPU counted once "
                    "(MIG instances de-duplicated by UUID), implausible readings left out.",
        no_value=base.no_value(spec, "No power readings.", "GpuMetricAbsent"))


def dashboard(spec: Spec, groups: list[RuleGroup]) -> db.Dashboard:
    """The fleet overview dashboard builder; ``groups`` are the rendered rule groups."""
    b = Board()
    reporting, known = _counts(spec)
    up = f"up{{{q.target_sel(spec)}}}"
    lookback = format_duration(spec.alerts.inventory_lookback)
    alert_thresholds = threshold_steps(steps=[(None, "green"), (1, "orange")])
    # With the kubernetes section two more stats (GPUs expected, GPUs missing) share the line.
    expected = kube_panels.expected_stats(spec, fleet=True) if spec.kubernetes is not None else []
    w = 3 if expected else 4
    b.add(stat_panel("GPUs reporting", [Query(reporting, "reporting")], COUNT,
                     description="GPUs reporting at least one required field now (gpumon inventory).",
                     no_value=base.no_value(spec, "No GPU in the inventory: targets down, or gpumon's "
                                            "recording rules not loaded.", "GpuExporterTargetMissing")), w, 4)
    for panel in expected:
        b.add(panel, w, 4)
    b.add(stat_panel(f"GPUs seen in {lookback}", [Query(known, "known")], COUNT,
                     description=f"GPUs in the inventory at any time in the last {lookback} "
                                 "(alerts.inventory_lookback).",
                     no_value="No GPU seen: see GPUs reporting."), w, 4)
    b.add(stat_panel("GPUs lost", [Query(_lost_count(spec, known), "lost")], COUNT,
                     description="Known GPUs silent now, for as long as they stay gone (alert GpuLost; "
                                 "alerts.retired ends it).",
                     thresholds=threshold_steps(steps=[(None, "green"), (1, "red")]),
                     no_value=base.no_value(spec, "No inventory series.", "GpuLost"),
                     links=base.runbook_links(spec, "GpuLost")), w, 4)
    b.add(stat_panel("Exporter targets up", [Query(f"count({up} == 1)", "up")], COUNT,
                     description=f"dcgm-exporter targets of job {spec.exporter.job} whose last scrape succeeded.",
                     thresholds=threshold_steps(steps=[(None, "red"), (1, "green")]),
                     no_value=base.no_value(spec, "No target up.", "GpuExporterTargetMissing"),
                     links=base.runbook_links(spec, "GpuExporterTargetMissing")), w, 4)
    b.add(stat_panel("Exporter targets down", [Query(f"count({up} == 0) or vector(0)", "down")], COUNT,
                     description="Targets whose last scrape failed (alert GpuExporterDown).",
                     thresholds=threshold_steps(steps=[(None, "green"), (1, "red")]),
                     links=base.runbook_links(spec, "GpuExporterDown")), w, 4)
    b.add(stat_panel("gpumon alerts firing", [Query(f"count({q.firing_alerts(spec, groups)}) or vector(0)", "firing")],
                     COUNT, description="Alerts from gpumon's rules that fire now.",
                     thresholds=alert_thresholds), w, 4)
    b.add(timeseries_panel("GPUs reporting vs inventory", [Query(reporting, "reporting now"),
                                                            Query(known, f"seen in {lookback}")], COUNT,
                           description="A gap between the lines is GPUs that stopped reporting.",
                           no_value=base.no_value(spec, "No inventory series.", "GpuExporterTargetMissing")))
    b.add(base.link_rows_to_detail(spec, table_panel(
        "Firing gpumon alerts", [Query(q.firing_alerts(spec, groups), instant=True, table=True)], "none",
        description="One row per firing alert from gpumon's rules, with its labels; each row links to the "
                    "GPU detail dashboard.",
        no_value="No gpumon alert fires now.", hide=("Time", "Value", "__name__", "alertstate", "job")),
        with_gpu=False))
    power = _power_panel(spec, groups)
    if power is not None:
        b.add(power, 24, 8)
    b.row("Required fields: per-GPU max / mean / min")
    for m in spec.required_metrics:
        b.add(metric_panel(spec, m), key=f"field:{m.name}")
    optional = [m for m in spec.metrics if m.presence == "optional"]
    if optional:
        b.row("Optional fields", collapsed=True)
        for m in optional:
            b.add(metric_panel(spec, m), key=f"field:{m.name}")
    desc = ("Fleet-wide health of the GPUs dcgm-exporter reports: counts against gpumon's GPU "
            "inventory, exporter targets, firing gpumon alerts and every spec'd field. Generated by "
            "gpumon from the spec; edit the spec, not this dashboard.")
    return base.build(spec, KEY, TITLE, desc, b, node_and_gpu=False, annotation_expr=q.firing_alerts(spec, groups))
