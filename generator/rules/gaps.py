"""Intermittent gaps: the field's most reported symptom ("N/A" that comes and goes).

Per target, GPU and required field, the share of the target's successful scrapes that carried
the field. Dividing by the target's own successful scrapes separates field gaps from target
outages (which the exporter alerts cover).
"""

from __future__ import annotations

from ..spec import Spec
from . import names
from .common import alert, record
from .model import Rule
from .promql import by, dur, gpu_ids, job_sel, num


def sample_ratios(spec: Spec) -> list[Rule]:
    """One recording rule per required field: samples seen / successful scrapes over the gap window."""
    w = dur(spec.alerts.gap_window)
    keep = by(("job", "instance") + spec.exporter.labels.identity)
    out = []
    for m in spec.required_metrics:
        expr = (f"sum by ({keep}) (count_over_time({job_sel(spec, m.name)}[{w}]))\n"
                f"/ on (job, instance) group_left ()\nsum_over_time({job_sel(spec, 'up')}[{w}])")
        out.append(record(names.sample_ratio(w), expr, {names.FIELD_LABEL: m.name}))
    return out


def field_recent(spec: Spec) -> float:
    """Seconds within which an intermittent field must have been seen: ``alerts.for``, the time
    GpuMetricMissing takes to fire. A field missing for longer is missing *now*, the presence
    tiers' case (dropped for good: GpuMetricMissing / GpuNodeMetricMissing / GpuMetricAbsent),
    not a gap.

    Why it never double-pages a drop: after a drop at T the ratio falls below ``gap_min_ratio``
    no earlier than ``T + (1 - gap_min_ratio) x gap_window`` (at least one scrape, see
    ``specbounds.durations``), and the field stops counting as seen at ``T + for``, so this
    condition holds for less than ``for`` and the alert stays pending. Gaps shorter than ``for``
    keep it true throughout, so a field that comes and goes at any scrape granularity fires (a
    window of half ``(1 - gap_min_ratio) x gap_window`` was shorter than one missed minute with a
    5m gap window, and the alert never fired; found by the spec fuzzer)."""
    return spec.alerts.for_


def intermittent(spec: Spec) -> Rule:
    """Alert when the ratio is below ``gap_min_ratio`` for a GPU that was in the inventory at the
    start of the window (a new node or GPU has a short history, not gaps) and reported recently
    (a GPU gone for good is GpuLost's case). Both inventory checks look at a short window, not an
    instant: a GPU whose fields all come and go drops out of the inventory at every other
    evaluation, which reset ``for`` and kept this alert silent (found by the rendered rule tests).
    The field itself must have been seen within :func:`field_recent`: a field dropped for good
    paged here once per GPU besides its presence alert (issue 11, item 1)."""
    w = dur(spec.alerts.gap_window)
    recent = dur(max(300.0, 4 * spec.exporter.sample_interval))
    ids = by(gpu_ids(spec))
    field = by(("job", "instance") + spec.exporter.labels.identity + (names.FIELD_LABEL,))
    expr = (f"{names.sample_ratio(w)} < {num(spec.alerts.gap_min_ratio)}\n"
            f"and on ({ids})\nmax_over_time({names.INVENTORY}[{recent}] offset {w})\n"
            f"and on ({ids})\nmax_over_time({names.INVENTORY}[{recent}])\n"
            f"and on ({field})\nmax_over_time({names.FIELD_PRESENT}[{dur(field_recent(spec))}])")
    return alert(spec, "GpuMetricIntermittent", expr, severity="warning", for_=spec.alerts.for_,
                 kind="metric_intermittent", window=w)


def rules(spec: Spec) -> list[Rule]:
    """Recording rules then the alert (evaluated in order within one group)."""
    return sample_ratios(spec) + [intermittent(spec)]
