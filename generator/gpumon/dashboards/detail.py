"""Node / GPU detail: per-GPU readings of every spec'd field for the chosen nodes and GPUs,
XID errors, and which required fields those GPUs miss or report with gaps."""

from __future__ import annotations


from ..durations import format_duration
from ..rules import RuleGroup, names
from ..rules.promql import by
from .sdk import db
from ..spec import Metric, Spec
from . import base, queries as q
from .panels import (Board, Query, stat_panel, table_panel, threshold_steps, timeseries_panel,
                     up_down_mappings)
from .queries import DETAIL, NODE
from .units import COUNT, RATIO, plot, title as panel_title

KEY = "gpu"
TITLE = "GPU node and device detail"


def reading_panel(spec: Spec, m: Metric) -> db.Panel:
    """One series per GPU (per MIG instance for per-instance fields) as the exporter reports
    it; device-wide fields de-duplicated by UUID."""
    p = plot(m)
    shown = "per-second rate" if p.rate else "value"
    desc = f"{m.description} `{m.name}`, {shown} per GPU as reported (implausible readings included)."
    if m.mig == "device":
        desc += " Device-wide field: one series per GPU even on MIG."
    empty = base.no_value(spec, f"The selected GPUs do not report {m.name}.", "GpuMetricMissing") if m.required \
        else f"The selected GPUs do not report {m.name}; it is optional."
    return timeseries_panel(
        panel_title(m), [Query(q.per_gpu(spec, m, DETAIL), q.legend(spec, m))], p.unit, description=desc,
        thresholds=threshold_steps(m, divisor=p.divisor) if m.thresholds else None, no_value=empty,
        min_interval=format_duration(spec.exporter.min_rate_window) if p.rate else None,
        links=base.runbook_links(spec, "GpuMetricMissing") if m.required else ())


def _sparse_panels(spec: Spec, m: Metric) -> list[db.Panel]:
    """A table of the last value per GPU (with the spec's alert labels, e.g. err_code) and the
    values over time. Sparse fields exist only after an event: empty is the healthy state."""
    lab = spec.exporter.labels
    keep = by(("job",) + lab.identity + m.alert_labels)
    src = q.sel(spec, m.name, DETAIL)
    alert = m.thresholds[0].alert if m.thresholds else None
    empty = f"No {m.name} on the selected GPUs: the exporter writes it only after an event."
    if alert:
        empty += f" Runbook: {base.runbook_text(spec, alert)}"
    links = base.runbook_links(spec, alert) if alert else []
    table = table_panel(f"{m.title}: last value per GPU", [Query(f"max by ({keep}) ({src})", instant=True, table=True)],
                        plot(m).unit, description=f"{m.description} `{m.name}`; the value column is the last value.",
                        no_value=empty, links=links, hide=("Time", "__name__", "job"))
    series = timeseries_panel(f"{m.title} over time", [Query(f"max by ({keep}) ({src})", q.legend(spec, m))],
                              plot(m).unit, description=f"{m.description} `{m.name}`.",
                              thresholds=threshold_steps(m) if m.thresholds else None, no_value=empty, links=links)
    return [table, series]


def dashboard(spec: Spec, groups: list[RuleGroup]) -> db.Dashboard:
    """The node / GPU detail dashboard builder; ``groups`` are the rendered rule groups."""
    lab = spec.exporter.labels
    b = Board()
    missing, alerts = _overview(spec, groups, b)
    b.row("Required fields")
    recorded = q.recorded(groups)
    power = [Query(f"sum by ({by(lab.node_identity)}) ({q.sel(spec, names.node_sum(m.name), NODE)})",
                   f"{{{{{lab.node}}}}} {m.title}")
             for m in spec.metrics if names.node_sum(m.name) in recorded]
    if power:
        b.add(timeseries_panel("Node power draw", power, "watt",
                               description="Per-node sum of gpumon's recording rule: MIG instances "
                                           "de-duplicated by UUID, implausible readings left out.",
                               no_value=base.no_value(spec, "No power readings on these nodes.", "GpuMetricMissing")))
    for m in spec.required_metrics:
        b.add(reading_panel(spec, m), key=f"reading:{m.name}")
    sparse = [m for m in spec.metrics if m.presence == "sparse"]
    if sparse:
        b.row("Event fields (XID errors)")
        for m in sparse:
            for role, panel in zip(("last", "series"), _sparse_panels(spec, m)):
                b.add(panel, key=f"sparse-{role}:{m.name}")
    _health(spec, b, missing)
    optional = [m for m in spec.metrics if m.presence == "optional"]
    if optional:
        b.row("Optional fields", collapsed=True)
        for m in optional:
            b.add(reading_panel(spec, m), key=f"reading:{m.name}")
    desc = ("Per-GPU readings of every spec'd field on the chosen nodes and GPUs. Node and GPU "
            "pickers come from gpumon's inventory, so GPUs missing any single field still appear.")
    return base.build(spec, KEY, TITLE, desc, b, node_and_gpu=True, annotation_expr=alerts)


def _overview(spec: Spec, groups: list[RuleGroup], b: Board) -> tuple[str, str]:
    """The top stats and the GPUs table; returns (the missing-fields query, the firing-alerts query)."""
    lab = spec.exporter.labels
    gpus = f"sum({q.sel(spec, names.NODE_GPU_DEVICES_REPORTING, NODE)})"
    b.add(stat_panel("GPUs reporting", [Query(gpus, "GPUs")], COUNT,
                     description="Physical GPUs (distinct UUIDs; MIG instances count once) on the selected "
                                 "nodes reporting a required field now.",
                     no_value=base.no_value(spec, "No GPU on these nodes reports now.", "GpuLost")), 6, 4)
    target_up = (f"up{{{q.target_sel(spec)}}}\n* on (job, instance) group_left ({by(lab.node_identity)})\n"
                 f"{q.target_nodes(spec, NODE)}")
    b.add(stat_panel("Exporter targets", [Query(target_up, f"{{{{{lab.node}}}}}")], "none",
                     description="The dcgm-exporter target of each selected node (matched through the "
                                 "GPUs it reported in the last 15 minutes).",
                     thresholds=threshold_steps(steps=[(None, "red"), (1, "green")]),
                     no_value=base.no_value(spec, "No target reported these nodes' GPUs in 15 minutes.",
                                            "GpuExporterDown"),
                     links=base.runbook_links(spec, "GpuExporterDown"))
          .mappings(up_down_mappings()), 6, 4)
    missing = q.missing_now(spec, DETAIL)
    b.add(stat_panel("Required fields missing now", [Query(f"count(\n{missing}\n) or vector(0)", "missing")], COUNT,
                     description="(GPU, required field) pairs the selected GPUs do not report now.",
                     thresholds=threshold_steps(steps=[(None, "green"), (1, "orange")]),
                     links=base.runbook_links(spec, "GpuMetricMissing")), 6, 4)
    alerts = q.firing_alerts(spec, groups, NODE)
    b.add(stat_panel("gpumon alerts firing here", [Query(f"count({alerts}) or vector(0)", "firing")], COUNT,
                     description="gpumon alerts firing now that carry the selected nodes' label.",
                     thresholds=threshold_steps(steps=[(None, "green"), (1, "orange")])), 6, 4)
    ident = (lab.node, lab.gpu_index, lab.gpu, lab.mig_instance, lab.model, lab.driver_version)
    required = q.field_regex(spec.required_metrics)
    inv = f'{{__name__=~"{required}",{q.matchers(spec, DETAIL)}}}'
    b.add(table_panel("GPUs", [Query(f"group by ({by(ident)}) ({inv})", instant=True, table=True)], "none",
                      description="Identity, model and driver of each selected GPU (from the labels of its "
                                  "required fields; the driver column is empty unless the exporter adds it "
                                  "as a label).",
                      no_value=base.no_value(spec, "No selected GPU reports a required field now.", "GpuLost")),
          24, 6)
    return missing, alerts


def _health(spec: Spec, b: Board, missing: str) -> None:
    """The telemetry-health row: fields missing now and intermittent gaps."""
    b.row("Telemetry health of these GPUs")
    b.add(table_panel("Required fields missing now", [Query(missing, instant=True, table=True)], "none",
                      description="One row per selected GPU and required field it does not report now.",
                      no_value=base.no_value(spec, "The selected GPUs report every required field.",
                                             "GpuMetricMissing"),
                      links=base.runbook_links(spec, "GpuMetricMissing")))
    window = format_duration(spec.alerts.gap_window)
    b.add(timeseries_panel(f"Scrapes carrying each field ({window})",
                           [Query(q.sel(spec, q.gap_ratio(spec), DETAIL),
                                  f"{{{{{names.FIELD_LABEL}}}}} {q.legend(spec)}")], RATIO,
                           description=f"Share of the target's successful scrapes in the last {window} that "
                                       "carried the field, for the fields that missed some scrape (the ratio is recorded only "
                                       "below 100 %): intermittent gaps.",
                           thresholds=threshold_steps(steps=[(None, "red"), (spec.alerts.gap_min_ratio, "orange"),
                                                             (1, "green")]),
                           no_value=base.no_value(spec, "No gaps: these GPUs carried every required field in every "
                                                  "successful scrape of the window.",
                                                  "GpuMetricIntermittent"),
                           min_val=0, max_val=1))
