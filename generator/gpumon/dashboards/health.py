"""Monitoring health: is the GPU telemetry itself complete? Exporter target health, scrape
duration against the timeout, per-field coverage from gpumon's coverage recording rules, GPUs
missing a required field now, and intermittent gaps per GPU and field over time.

Every panel that can be empty says what empty means and names the runbook of the alert that
covers it, instead of a bare "No data".
"""

from __future__ import annotations

from ..promqltext import matcher

from ..durations import format_duration
from ..rules import RuleGroup, names
from ..rules.promql import num
from .sdk import db
from ..spec import Spec
from . import base, kube as kube_panels, queries as q
from .panels import (Board, Query, stat_panel, state_timeline_panel, table_panel, threshold_steps,
                     timeseries_panel, up_down_mappings)
from .queries import FLEET
from .units import COUNT, NONE, RATIO, SECONDS

KEY = "health"
TITLE = "GPU monitoring health"

COVERAGE_STEPS = [(None, "red"), (0.9, "orange"), (1, "green")]


def _coverage(spec: Spec, metrics) -> str:
    """Share of inventory GPUs reporting each field now. The coverage rule has one series per
    job and cluster, so with a cluster label the clusters chosen are combined, each weighted by
    its inventory series (``names.NODE_INVENTORY``; for fields DCGM does not report per MIG
    instance this weights by every GPU, MIG instances included: an approximation)."""
    fields = q.field_regex(metrics)
    lab = spec.exporter.labels
    if not lab.cluster:
        return f'{names.COVERAGE}{{{matcher("job", spec.exporter.job)},{matcher(names.FIELD_LABEL, fields, "=~")}}}'
    cov = q.sel(spec, names.COVERAGE, FLEET, matcher(names.FIELD_LABEL, fields, "=~"))
    inv = q.sel(spec, names.NODE_INVENTORY, FLEET)
    return (f"sum by ({names.FIELD_LABEL}) (\n  {cov}\n  * on (job, {lab.cluster}) group_left ()\n"
            f"  sum by (job, {lab.cluster}) ({inv})\n)\n/ scalar(sum({inv}))")


def _targets(spec: Spec, b: Board) -> None:
    up = f"up{{{q.target_sel(spec)}}}"
    timeout = spec.exporter.scrape_timeout
    slow = spec.alerts.scrape_slow_ratio
    b.add(stat_panel("Targets up", [Query(f"count({up} == 1)", "up")], COUNT,
                     description=f"dcgm-exporter targets (job {spec.exporter.job}) whose last scrape succeeded.",
                     thresholds=threshold_steps(steps=[(None, "red"), (1, "green")]),
                     no_value=base.no_value(spec, f"Prometheus scrapes no target of job {spec.exporter.job}, "
                                            "or none is up.", "GpuExporterTargetMissing"),
                     links=base.runbook_links(spec, "GpuExporterTargetMissing")), 6, 4)
    b.add(stat_panel("Targets down", [Query(f"count({up} == 0) or vector(0)", "down")], COUNT,
                     description="Targets whose last scrape failed.",
                     thresholds=threshold_steps(steps=[(None, "green"), (1, "red")]),
                     links=base.runbook_links(spec, "GpuExporterDown")), 6, 4)
    empty = f"count(scrape_samples_scraped{{{q.target_sel(spec)}}} == 0 and {up} == 1) or vector(0)"
    b.add(stat_panel("Targets up but empty", [Query(empty, "empty")], COUNT,
                     description="Targets that answer but expose no sample (DCGM not readable).",
                     thresholds=threshold_steps(steps=[(None, "green"), (1, "red")]),
                     links=base.runbook_links(spec, "GpuExporterEmpty")), 6, 4)
    # per target against its own timeout where Prometheus records it, as GpuExporterScrapeSlow does
    targets = q.target_sel(spec)
    on = ", ".join(("job",) + ((spec.exporter.labels.cluster,) if spec.exporter.labels.cluster else ()) + ("instance",))
    slowest = (f"max(scrape_duration_seconds{{{targets}}} / on ({on}) (scrape_timeout_seconds{{{targets}}} "
               f"or 0 * scrape_duration_seconds{{{targets}}} + {num(timeout)}))")
    b.add(stat_panel("Slowest scrape / timeout", [Query(slowest, "slowest")], RATIO,
                     description=f"Longest scrape duration as a share of its target's scrape timeout "
                                 f"(scrape_timeout_seconds where Prometheus records it, else the spec's "
                                 f"{format_duration(timeout)}); the GpuExporterScrapeSlow alert fires above "
                                 f"{num(slow * 100)} %.",
                     thresholds=threshold_steps(steps=[(None, "green"), (slow, "orange"), (1, "red")]),
                     no_value=base.no_value(spec, "No scrape of the job.", "GpuExporterTargetMissing"),
                     links=base.runbook_links(spec, "GpuExporterScrapeSlow")), 6, 4)
    b.add(state_timeline_panel("Target health", [Query(q.per_target(spec, "up"), _target_legend(spec))], NONE,
                               description="up per dcgm-exporter target, named by the node whose GPUs it "
                                           "reported (the address only when it never reported one).",
                               mappings=up_down_mappings(),
                               no_value=base.no_value(spec, f"No target of job {spec.exporter.job}.",
                                                      "GpuExporterTargetMissing"),
                               links=base.runbook_links(spec, "GpuExporterDown", "GpuExporterFlapping")), 24, 8)
    b.add(timeseries_panel("Scrape duration vs timeout",
                           [Query(q.per_target(spec, "scrape_duration_seconds"), _target_legend(spec))], SECONDS,
                           description=f"Dashed lines: {num(slow * 100)} % of the timeout (alert "
                                       f"GpuExporterScrapeSlow) and the {format_duration(timeout)} timeout, "
                                       "where scrapes fail (big MIG nodes, dcgm-exporter#607).",
                           thresholds=threshold_steps(steps=[(None, "green"), (round(slow * timeout, 3), "orange"),
                                                             (timeout, "red")]),
                           no_value=base.no_value(spec, "No scrape of the job.", "GpuExporterTargetMissing"),
                           links=base.runbook_links(spec, "GpuExporterScrapeSlow"), soft_max=timeout))
    b.add(timeseries_panel("Samples per scrape",
                           [Query(q.per_target(spec, "scrape_samples_scraped"), _target_legend(spec))], COUNT,
                           description="A drop means fields or GPUs left the exposition; 0 while up is an "
                                       "empty exporter.",
                           no_value=base.no_value(spec, "No scrape of the job.", "GpuExporterTargetMissing"),
                           links=base.runbook_links(spec, "GpuExporterEmpty")))


def _target_legend(spec: Spec) -> str:
    # The node label first; instance only tells apart targets that never reported a GPU.
    return f"{{{{{spec.exporter.labels.node}}}}} {{{{instance}}}}"


def _coverage_panels(spec: Spec, b: Board) -> None:
    lab = spec.exporter.labels
    field = f"{{{{{names.FIELD_LABEL}}}}}"
    b.add(stat_panel("Required fields: share of GPUs reporting", [Query(_coverage(spec, spec.required_metrics), field)],
                     RATIO, description="Per required field, the share of inventory GPUs reporting it now "
                                        "(gpumon coverage recording rule). Anything below 100 % pages. On MIG, "
                                        "fields DCGM does not report per instance (mig: unsupported) count "
                                        "each instance as not reporting.",
                     thresholds=threshold_steps(steps=COVERAGE_STEPS), horizontal=True,
                     no_value=base.no_value(spec, "No coverage series: no GPU in the inventory, or gpumon's "
                                            "recording rules are not loaded.", "GpuMetricAbsent"),
                     links=base.runbook_links(spec, "GpuMetricAbsent", "GpuNodeMetricMissing")))
    optional = [m for m in spec.metrics if m.presence == "optional"]
    if optional:
        b.add(stat_panel("Optional fields: share of GPUs reporting", [Query(_coverage(spec, optional), field)],
                         RATIO, description="Optional fields are checked only where present; low shares are "
                                            "normal for fields some models, modes or drivers lack.",
                         thresholds=threshold_steps(steps=[(None, "blue")]), horizontal=True,
                         no_value="No GPU reports any optional field."))
    b.add(timeseries_panel("Required field coverage over time", [Query(_coverage(spec, spec.required_metrics), field)],
                           RATIO, description="Share of inventory GPUs reporting each required field.",
                           thresholds=threshold_steps(steps=COVERAGE_STEPS), min_val=0, max_val=1,
                           no_value=base.no_value(spec, "No coverage series.", "GpuMetricAbsent")))
    nodes = q.sel(spec, names.NODE_COVERAGE, FLEET,
                  f'{names.FIELD_LABEL}=~"{q.field_regex(spec.required_metrics)}"') + " < 1"
    b.add(base.link_rows_to_detail(spec, table_panel(
        "Nodes missing a required field on some GPUs", [Query(nodes, instant=True, table=True)], RATIO,
        description="Per node and required field, the share of the node's GPUs reporting it, where below "
                    f"100 % (value column). Columns: {', '.join(lab.node_identity)}, field. Each row links to "
                    "the GPU detail dashboard.",
        no_value=base.no_value(spec, "Every node's GPUs report every required field.", "GpuNodeMetricMissing"),
        links=base.runbook_links(spec, "GpuNodeMetricMissing"), hide=("Time", "__name__", "job")),
        with_gpu=False))


def _missing_panels(spec: Spec, b: Board) -> None:
    missing = q.missing_now(spec, FLEET)
    window = format_duration(spec.alerts.gap_window)
    b.add(timeseries_panel("GPUs missing each required field",
                           [Query(f"count by ({names.FIELD_LABEL}) (\n{missing}\n)", f"{{{{{names.FIELD_LABEL}}}}}")],
                           COUNT, description="Inventory GPUs that do not report the field, over time.",
                           no_value=base.no_value(spec, "No GPU missed a required field in this time range.",
                                                  "GpuMetricMissing"),
                           links=base.runbook_links(spec, "GpuMetricMissing", "GpuNodeMetricMissing",
                                                    "GpuMetricAbsent")))
    b.add(base.link_rows_to_detail(spec, table_panel(
        "GPUs missing a required field now", [Query(missing, instant=True, table=True)], NONE,
        description="One row per inventory GPU and required field it does not report now; each row "
                    "links to the GPU detail dashboard.",
        no_value=base.no_value(spec, "Every GPU in the inventory reports every required field.", "GpuMetricMissing"),
        links=base.runbook_links(spec, "GpuMetricMissing"))))
    ratio = f"{q.sel(spec, q.gap_ratio(spec), FLEET)} < 1"
    b.add(state_timeline_panel(
        f"Gaps per GPU and field (share of scrapes carrying it, {window})",
        [Query(ratio, f"{q.legend(spec)} {{{{{names.FIELD_LABEL}}}}}")], RATIO,
        description=f"Only GPU × field pairs that missed the field in some successful scrape of the last "
                    f"{window}; red below {num(spec.alerts.gap_min_ratio * 100)} % (alert GpuMetricIntermittent).",
        thresholds=threshold_steps(steps=[(None, "red"), (spec.alerts.gap_min_ratio, "orange"), (1, "green")]),
        no_value=base.no_value(spec, f"No gaps: every GPU carried every required field in every successful "
                               f"scrape of the last {window}.", "GpuMetricIntermittent"),
        links=base.runbook_links(spec, "GpuMetricIntermittent"), min_interval="1m"), 24, 10)
    b.add(base.link_rows_to_detail(spec, table_panel(
        "GPUs lost (known, silent now)",
        [Query(q.lost(spec, FLEET), instant=True, table=True)], NONE,
        description="GPUs that were in the inventory and report no required field now, for as long as "
                    "they stay gone (alert GpuLost; alerts.retired ends it); each row links to the GPU "
                    "detail dashboard.",
        no_value=base.no_value(spec, "No GPU was lost.", "GpuLost"),
        links=base.runbook_links(spec, "GpuLost"), hide=("Time", "Value", "__name__", "job")), with_gpu=False))
    lab = spec.exporter.labels
    unlabelled = f"count(max without ({names.FIELD_LABEL}) ({names.UNLABELLED}{{{q.target_sel(spec)}}})) or vector(0)"
    b.add(stat_panel("Targets serving series without node or GPU label", [Query(unlabelled, "targets")], COUNT,
                     description=f"Exporter targets whose GPU series lack {lab.node} or {lab.gpu} (renamed label, "
                                 "1.x compatibility mode): per-GPU rules and these dashboards cannot see them.",
                     thresholds=threshold_steps(steps=[(None, "green"), (1, "orange")]),
                     links=base.runbook_links(spec, "GpuIdentityLabelMissing")))


def dashboard(spec: Spec, groups: list[RuleGroup]) -> db.Dashboard:
    """The monitoring health dashboard builder; ``groups`` are the rendered rule groups."""
    b = Board()
    b.row("Exporter targets")
    _targets(spec, b)
    k = spec.kubernetes
    if k is not None:
        kube_panels.exporter_row(spec, k, b)
    b.row("Field coverage")
    _coverage_panels(spec, b)
    b.row("Missing fields and gaps")
    _missing_panels(spec, b)
    desc = ("Is the GPU telemetry complete? Exporter targets, scrape duration, coverage of every "
            "spec'd field, GPUs missing required fields now and intermittent gaps. Empty panels say "
            "what empty means and link the alert's runbook.")
    return base.build(spec, KEY, TITLE, desc, b, node_and_gpu=False, annotation_expr=q.firing_alerts(spec, groups))
