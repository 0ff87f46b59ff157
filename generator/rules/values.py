"""Alerts on the values themselves: implausible readings, spec thresholds, frozen counters."""

from __future__ import annotations

from ..durations import format_duration
from ..spec import DCGM_BLANK_MIN, Metric, Spec, Threshold
from .common import alert
from .model import Rule
from .promql import by, dur, gpu_ids, job_sel, num, valid_values


def _reason(expr: str, reason: str) -> str:
    return f'label_replace({expr}, "reason", "{reason}", "", "")'


def implausible(spec: Spec, m: Metric) -> Rule:
    """Readings that cannot be real, labelled with a ``reason``: ``dcgm_blank`` (a DCGM blank /
    not-supported code >= 2^47 passed through as a number; dcgm_structs.h), ``nan`` (NaN compares
    unequal to itself), ``above_range`` / ``below_range`` (outside the spec's plausible range,
    e.g. 0 C or 0 W on a running GPU)."""
    s = job_sel(spec, m.name)
    parts = [_reason(f"{s} >= {DCGM_BLANK_MIN}", "dcgm_blank"), _reason(f"{s} != {s}", "nan")]
    if m.range_max is not None:
        parts.append(_reason(f"{s} > {num(m.range_max)} < {DCGM_BLANK_MIN}", "above_range"))
    if m.range_min is not None:
        parts.append(_reason(f"{s} < {num(m.range_min)}", "below_range"))
    inner = "\n  or\n  ".join(parts)
    expr = f"max by ({by(gpu_ids(spec, m))}, reason) (\n  {inner}\n)"
    if m.has_range:
        lo = "-inf" if m.range_min is None else num(m.range_min)
        hi = "+inf" if m.range_max is None else num(m.range_max)
        range_text = f"plausible {lo}..{hi} {m.unit}"
    else:
        range_text = "the spec gives no range: only DCGM blank codes and NaN are implausible"
    return alert(spec, "GpuTelemetryImplausible", expr, severity="warning", for_=spec.alerts.implausible_for,
                 kind="implausible_value", labels={"dcgm_field": m.name}, metric=m.name, title=m.title,
                 range_text=range_text)


def threshold(spec: Spec, m: Metric, t: Threshold) -> Rule:
    """A spec threshold on plausible readings only, so sentinels and NaN never trigger it.
    Aggregated to the GPU identity (plus ``alert_labels``) so workload-label churn does not
    reset ``for``."""
    keep = by(gpu_ids(spec, m) + m.alert_labels)
    agg = "max" if t.op in (">", ">=") else "min"
    expr = f"{agg} by ({keep}) (\n  {valid_values(spec, m)}\n) {t.op} {num(t.value)}"
    # An error-code field (XID) is a different story from a reading past a limit: own texts and runbook.
    kind = "xid" if m.unit == "code" else "threshold"
    return alert(spec, t.alert, expr, severity=t.severity, for_=t.for_, kind=kind,
                 labels={"dcgm_field": m.name}, metric=m.name, title=m.title, unit=m.unit,
                 op=t.op, value=num(t.value), severity_name=t.severity, for_text=format_duration(t.for_))


def frozen(spec: Spec, m: Metric) -> Rule:
    """A counter that stopped increasing while its target is up. A powered GPU always draws
    energy, so a flat energy counter means the exporter serves frozen values (dcgm-exporter#164).
    ``increase`` handles resets; the window is >= 10 x the collect interval."""
    w = dur(max(spec.alerts.frozen_window, 10 * spec.exporter.collect_interval))
    keep = by(("instance",) + gpu_ids(spec, m))
    expr = (f"max by ({keep}) (increase({job_sel(spec, m.name)}[{w}])) == 0\n"
            f"and on (job, instance)\n{job_sel(spec, 'up')} == 1")
    return alert(spec, "GpuTelemetryFrozen", expr, severity="warning", for_=spec.alerts.for_, kind="frozen",
                 labels={"dcgm_field": m.name}, metric=m.name, title=m.title, window=w)


#: (busy field, its threshold in the field's unit, profiling field) for :func:`profiling_stuck`
PROFILING_PAIR = ("DCGM_FI_DEV_GPU_UTIL", 90, "DCGM_FI_PROF_GR_ENGINE_ACTIVE")


def profiling_stuck(spec: Spec) -> Rule | None:
    """The GPU is busy by NVML's utilisation while DCGM's profiling engine-activity reads 0: the
    profiling fields are stuck (dcgm-exporter#662 for weeks; DCGM#303 after XID 31), so every panel
    and alert built on DCGM_FI_PROF_* is wrong. Rendered only when the spec has both fields. MIG
    GPUs do not report GPU_UTIL, so they never match."""
    busy_name, level, prof_name = PROFILING_PAIR
    busy, prof = spec.metric(busy_name), spec.metric(prof_name)
    if busy is None or prof is None:
        return None
    dev = by(tuple(x for x in gpu_ids(spec) if x != spec.exporter.labels.mig_instance))
    expr = (f"max by ({dev}) ({valid_values(spec, busy)}) > {num(level)}\n"
            f"and on ({dev})\nmax by ({dev}) ({valid_values(spec, prof)}) == 0")
    return alert(spec, "GpuProfilingStuck", expr, severity="warning", for_=max(spec.alerts.for_, 900.0),
                 kind="profiling_stuck", busy=busy.name, level=num(level), prof=prof.name)


def rules(spec: Spec) -> list[Rule]:
    """Value alerts for every spec'd metric: implausible, thresholds, frozen counters, and the
    busy-but-profiling-zero divergence."""
    out: list[Rule] = []
    for m in spec.metrics:
        out.append(implausible(spec, m))
        out += [threshold(spec, m, t) for t in m.thresholds]
        if m.frozen_check:
            out.append(frozen(spec, m))
    stuck = profiling_stuck(spec)
    return out + ([stuck] if stuck else [])
