"""Intermittent gaps: the field's most reported symptom ("N/A" that comes and goes).

Per target, GPU and required field, the share of the target's successful scrapes that carried
the field. Dividing by the target's own successful scrapes separates field gaps from target
outages (which the exporter alerts cover).
"""

from __future__ import annotations

import textwrap

from ..spec import Spec
from . import names
from .common import alert, record
from .model import Rule
from .promql import by, dur, fleet_ids, gpu_ids, job_sel, node_ids, num, selector


def sample_ratios(spec: Spec) -> list[Rule]:
    """One recording rule per required field: samples seen / successful scrapes over the gap window,
    recorded only where below 1 (a GPU and field that missed some scrape): a healthy fleet records
    nothing, where a dense ratio per target, GPU and field held 64k series at 8,000 GPUs (issue 16).
    The alert and the dashboards only ask for ratios below 1."""
    w = dur(spec.alerts.gap_window)
    keep = by(("job", "instance") + spec.exporter.labels.identity)
    out = []
    for m in spec.required_metrics:
        expr = (f"sum by ({keep}) (count_over_time({job_sel(spec, m.name)}[{w}]))\n"
                f"/ on (job, instance) group_left ()\nsum_over_time({job_sel(spec, 'up')}[{w}])\n< 1")
        out.append(record(names.sample_ratio(w), expr, {names.FIELD_LABEL: m.name}))
    return out


def field_recent(spec: Spec) -> float:
    """Seconds within which an intermittent field must have been seen: ``alerts.for``, the time
    GpuMetricMissing takes to fire. A field missing for longer is missing *now*, the presence
    tiers' case (dropped for good: GpuMetricMissing / GpuNodeMetricMissing / GpuMetricAbsent),
    not a gap.

    Why it never double-pages a drop: after a drop at T the ratio falls below ``gap_min_ratio``
    no earlier than ``T + (1 - gap_min_ratio) x gap_window`` (at least one scrape, see
    ``spec.bounds.durations``), and the field stops counting as seen at ``T + for``, so this
    condition holds for less than ``for`` and the alert stays pending. Gaps shorter than ``for``
    keep it true throughout, so a field that comes and goes at any scrape granularity fires (a
    window of half ``(1 - gap_min_ratio) x gap_window`` was shorter than one missed minute with a
    5m gap window, and the alert never fired; found by the spec fuzzer)."""
    return spec.alerts.for_


def _seen(spec: Spec, window: str) -> str:
    """Per target, GPU and required field (label ``dcgm_field``): some sample within ``window``.
    One ``present_over_time`` per field on the raw series, in this slow group only (the presence
    records are sparse missing sets, issue 16)."""
    parts = [f'label_replace(present_over_time({job_sel(spec, m.name)}[{window}]), "{names.FIELD_LABEL}", '
             f'"{m.name}", "", "")' for m in spec.required_metrics]
    return "(\n  " + "\n  or\n  ".join(parts) + "\n)"


def explained_by(spec: Spec) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The alerts whose outage also lowers a field's sample ratio, with the labels that tie them
    to one GPU and field: a field missing on a GPU (or node, or fleet-wide) for longer than
    ``for``, a GPU lost altogether, and a primary series a fallback source served meanwhile, then
    back. The ratio stays below the minimum for up to a
    gap window after such an outage ends, so without this the same cause paged again as one
    GpuMetricIntermittent per GPU and field (a GPU back from an XID 79 reset paged once per
    required field)."""
    field = (names.FIELD_LABEL,)
    lab = spec.exporter.labels
    device = tuple(x for x in gpu_ids(spec) if x != lab.mig_instance)
    out = (("GpuMetricMissing", gpu_ids(spec) + field), ("GpuNodeMetricMissing", node_ids(spec) + field),
           ("GpuMetricAbsent", fleet_ids(spec) + field), ("GpuLost", device), ("GpuXidCritical", device))
    # a target whose series lost the node or GPU label: its GPUs' series ended and began again
    # under other label sets (rules/inventory.py unlabelled, paged per job)
    out += (("GpuIdentityLabelMissing", fleet_ids(spec)),)
    if any(m.sources for m in spec.required_metrics):
        # a primary gone while a fallback served it paged GpuMetricFallbackServing (rules/sources.py)
        out += (("GpuMetricFallbackServing", node_ids(spec) + field),)
    return out


def intermittent(spec: Spec) -> Rule:
    """Alert when the ratio is below ``gap_min_ratio`` for a GPU that was in the inventory at the
    start of the window (a new node or GPU has a short history, not gaps) and reported recently
    (a GPU gone for good is GpuLost's case). Both inventory checks look at a short window, not an
    instant: a GPU whose fields all come and go drops out of the inventory at every other
    evaluation, which reset ``for`` and kept this alert silent (found by the rendered rule tests).
    The field itself must have been seen within :func:`field_recent`: a field dropped for good
    paged here once per GPU besides its presence alert (issue 11, item 1). And no presence alert of
    the GPU and field (:func:`explained_by`) may have fired within the gap window: Prometheus
    writes every firing alert as an ``ALERTS`` series (so do Thanos Ruler, Mimir's ruler and
    vmalert with remote write); where none is written, this part never matches and the alert
    behaves as before."""
    w = dur(spec.alerts.gap_window)
    recent = dur(max(300.0, 4 * spec.exporter.sample_interval))
    ids = by(gpu_ids(spec))
    field = by(("job", "instance") + spec.exporter.labels.identity + (names.FIELD_LABEL,))
    expr = (f"{names.sample_ratio(w)} < {num(spec.alerts.gap_min_ratio)}\n"
            f"and on ({ids})\nmax_over_time({names.INVENTORY}[{recent}] offset {w})\n"
            f"and on ({ids})\nmax_over_time({names.INVENTORY}[{recent}])\n"
            f"and on ({field})\n{_seen(spec, dur(field_recent(spec)))}")
    for name, on in explained_by(spec):
        fired = selector("ALERTS", alertname=name, alertstate="firing", job=spec.exporter.job)
        expr += f"\nunless on ({by(on)})\nmax_over_time({fired}[{w}])"
    # one page per GPU and field, whichever target served it: the ratio is per target, and a
    # replaced exporter pod (a new instance) ended the page and fired it again a for later; the
    # old target's ratio holds until its field is no longer seen, the new one's from its first gap
    expr = f"min by ({by(gpu_ids(spec) + (names.FIELD_LABEL,))}) (\n{textwrap.indent(expr, '  ')}\n)"
    return alert(spec, "GpuMetricIntermittent", expr, severity="warning", for_=spec.alerts.for_,
                 kind="metric_intermittent", window=w)


def rules(spec: Spec) -> list[Rule]:
    """Recording rules then the alert (evaluated in order within one group)."""
    return sample_ratios(spec) + [intermittent(spec)]
