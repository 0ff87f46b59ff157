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


def intermittent(spec: Spec) -> Rule:
    """Alert when the ratio is below ``gap_min_ratio`` for a GPU that was in the inventory at the
    start of the window (a new node or GPU has a short history, not gaps) and reported recently
    (a GPU gone for good is GpuLost's case). Both inventory checks look at a short window, not an
    instant: a GPU whose fields all come and go drops out of the inventory at every other
    evaluation, which reset ``for`` and kept this alert silent (found by the rendered rule tests)."""
    w = dur(spec.alerts.gap_window)
    recent = dur(max(300.0, 4 * spec.exporter.sample_interval))
    ids = by(gpu_ids(spec))
    expr = (f"{names.sample_ratio(w)} < {num(spec.alerts.gap_min_ratio)}\n"
            f"and on ({ids})\nmax_over_time({names.INVENTORY}[{recent}] offset {w})\n"
            f"and on ({ids})\nmax_over_time({names.INVENTORY}[{recent}])")
    return alert(spec, "GpuMetricIntermittent", expr, severity="warning", for_=spec.alerts.for_,
                 kind="metric_intermittent", window=w)


def rules(spec: Spec) -> list[Rule]:
    """Recording rules then the alert (evaluated in order within one group)."""
    return sample_ratios(spec) + [intermittent(spec)]
