"""Alerts on the values themselves: implausible readings, spec thresholds, frozen counters."""

from __future__ import annotations

from ..durations import format_duration
from ..spec import DCGM_BLANK_MIN, Metric, Spec, Threshold
from . import lost, names
from .common import alert, record
from .model import Rule
from ..promqltext import matcher
from .promql import (by, dur, fleet_ids, gpu_ids, implausible_ceiling, job_sel, node_ids, num, plausible_filter,
                     reading_sel, selector, valid_values)


def _reason(expr: str, reason: str) -> str:
    return f'label_replace({expr}, "reason", "{reason}", "", "")'


def implausible_set(spec: Spec, m: Metric) -> Rule:
    """Recording rule: the series of ``m`` whose reading cannot be real (NaN, a DCGM blank code,
    outside the spec range), as they are; none on a healthy fleet. The raw metric is read here
    and nowhere else in the implausible tiers (issue 16: four ``label_replace`` reads and an
    ``M != M`` self-join per field took most of the values group's time): once when a ceiling
    bounds the plausible readings (:func:`~gpumon.rules.promql.implausible_ceiling`), twice (``M
    unless M >= lo ...``) when a lower bound makes them two-sided."""
    s = reading_sel(spec, m)
    # per target and GPU (and the alert labels, e.g. err_code): workload labels (pod, namespace)
    # are dropped so their churn does not make new series; every label IMPLAUSIBLE keeps stays
    keep = by(tuple(dict.fromkeys(("job", "instance") + spec.exporter.labels.identity + m.alert_labels)))
    ceiling = implausible_ceiling(m)
    if ceiling is None:   # plausible between two bounds: what lies outside takes a second read
        body = f"{s}\n  unless\n  {s}{plausible_filter(m)}"
    else:                 # plausible up to a ceiling: one read keeps what lies above it, and NaN
        body = f"clamp_min({s}, {num(ceiling)}) != {num(ceiling)}"
    return record(names.IMPLAUSIBLE_READING, f"max by ({keep}) (\n  {body}\n)", {names.FIELD_LABEL: m.name})


def implausible_readings(spec: Spec, m: Metric) -> Rule:
    """Recording rule: per GPU, the reading of ``m`` when it cannot be real, labelled with a
    ``reason``: ``dcgm_blank`` (a DCGM blank / not-supported code >= 2^47 passed through as a
    number; dcgm_structs.h), ``nan`` (NaN compares unequal to itself), ``above_range`` /
    ``below_range`` (outside the spec's plausible range, e.g. 0 C or 0 W on a running GPU). The
    three implausible tiers read it. Split from :func:`implausible_set` (the small set), so the
    raw metric is not re-read per reason. A metric with ``sources`` is read from its normalized
    series (issue 13): a fallback's implausible reading counts like the primary's."""
    s = selector(names.IMPLAUSIBLE_READING, job=spec.exporter.job, **{names.FIELD_LABEL: m.name})
    parts = [_reason(f"{s} >= {DCGM_BLANK_MIN}", "dcgm_blank"), _reason(f"{s} != {s}", "nan")]
    if m.range_max is not None:
        parts.append(_reason(f"{s} > {num(m.range_max)} < {DCGM_BLANK_MIN}", "above_range"))
    if m.range_min is not None:
        parts.append(_reason(f"{s} < {num(m.range_min)}", "below_range"))
    inner = "\n  or\n  ".join(parts)
    return record(names.IMPLAUSIBLE, f"max by ({by(gpu_ids(spec, m))}, reason) (\n  {inner}\n)",
                  {names.FIELD_LABEL: m.name})


def _implausible_sel(spec: Spec, m: Metric) -> str:
    return selector(names.IMPLAUSIBLE, job=spec.exporter.job, **{names.FIELD_LABEL: m.name})


def node_plausible(spec: Spec, m: Metric) -> Rule:
    """Recording rule: 1 per node with a plausible reading of ``m`` now, kept only in the jobs
    (and clusters) where some GPU reads ``m`` implausibly, so a healthy fleet records nothing. The
    three tiers only ask "plausible elsewhere on this node / in this fleet" about the nodes and
    fleets :data:`names.IMPLAUSIBLE` has, so the restriction changes no answer; the fleet level
    is ``group by`` of this series instead of another pass over the raw metric."""
    nodes, fleet = by(node_ids(spec)), by(fleet_ids(spec))
    expr = (f"group by ({nodes}) ({valid_values(spec, m)})\n"
            f"and on ({fleet})\ngroup by ({fleet}) ({_implausible_sel(spec, m)})")
    return record(names.NODE_PLAUSIBLE, expr, {names.FIELD_LABEL: m.name})


def _plausible(spec: Spec, m: Metric, level: tuple[str, ...]) -> str:
    """``group by (level)`` of the nodes with a plausible reading of ``m`` now, from
    :func:`node_plausible` (only where :data:`names.IMPLAUSIBLE` has series of the same fleet)."""
    src = selector(names.NODE_PLAUSIBLE, job=spec.exporter.job, **{names.FIELD_LABEL: m.name})
    return f"group by ({by(level)}) ({src})"


def _range_text(m: Metric) -> str:
    if m.has_range:
        lo = "-inf" if m.range_min is None else num(m.range_min)
        hi = "+inf" if m.range_max is None else num(m.range_max)
        return f"plausible {lo}..{hi} {m.unit}"
    return "the spec gives no range: only DCGM blank codes and NaN are implausible"


def fleet_implausible(spec: Spec, m: Metric) -> Rule:
    """Every GPU of the job (and cluster) that reports ``m`` reads it implausibly: one cause (a
    DCGM blank for a field the fleet's model does not support, an exporter build serving zeros),
    one page, instead of one per GPU (issue 11, item 2)."""
    fleet = fleet_ids(spec)
    expr = (f"count by ({by(fleet)}, reason) ({_implausible_sel(spec, m)})\n"
            f"unless on ({by(fleet)})\n{_plausible(spec, m, fleet)}")
    return alert(spec, "GpuFleetTelemetryImplausible", expr, severity="warning", for_=spec.alerts.implausible_for,
                 kind="fleet_implausible_value", labels={names.FIELD_LABEL: m.name}, metric=m.name, title=m.title,
                 range_text=_range_text(m), cluster=spec.exporter.labels.cluster)


def node_implausible(spec: Spec, m: Metric) -> Rule:
    """Every GPU of one node that reports ``m`` reads it implausibly, while other nodes of the job
    (and cluster) have plausible readings: that node's exporter, driver or model."""
    nodes, fleet = node_ids(spec), fleet_ids(spec)
    expr = (f"(\n  count by ({by(nodes)}, reason) ({_implausible_sel(spec, m)})\n"
            f"  unless on ({by(nodes)})\n  {_plausible(spec, m, nodes)}\n)\n"
            f"and on ({by(fleet)})\n{_plausible(spec, m, fleet)}")
    return alert(spec, "GpuNodeTelemetryImplausible", expr, severity="warning", for_=spec.alerts.implausible_for,
                 kind="node_implausible_value", labels={names.FIELD_LABEL: m.name}, metric=m.name, title=m.title,
                 range_text=_range_text(m))


def implausible(spec: Spec, m: Metric) -> Rule:
    """Implausible readings on a GPU whose node has plausible readings of ``m`` on other GPUs
    (the node and fleet tiers cover the rest)."""
    nodes = node_ids(spec)
    expr = f"{_implausible_sel(spec, m)}\nand on ({by(nodes)})\n{_plausible(spec, m, nodes)}"
    return alert(spec, "GpuTelemetryImplausible", expr, severity="warning", for_=spec.alerts.implausible_for,
                 kind="implausible_value", labels={names.FIELD_LABEL: m.name}, metric=m.name, title=m.title,
                 range_text=_range_text(m))


def threshold(spec: Spec, m: Metric, t: Threshold) -> Rule:
    """A spec threshold on plausible readings only, so sentinels and NaN never trigger it.
    Aggregated to the GPU identity (plus ``alert_labels``) so workload-label churn does not
    reset ``for``."""
    keep = by(gpu_ids(spec, m) + m.alert_labels)
    agg = "max" if t.op in (">", ">=") else "min"
    unit = m.unit
    if t.rate is not None:
        # per-second rate of a counter: rate() is reset safe (a driver reload); a GPU whose counter
        # served a DCGM blank code within the window is left out (the jump would read as a storm)
        s, w = job_sel(spec, m.name), dur(t.rate)
        expr = (f"{agg} by ({keep}) (rate({s}[{w}])) {t.op} {num(t.value)}\n"
                f"unless on ({keep})\nmax by ({keep}) (max_over_time({s}[{w}]) >= {DCGM_BLANK_MIN})")
        unit = f"{m.unit}/s (rate over {w})"
    else:
        expr = f"{agg} by ({keep}) (\n  {valid_values(spec, m)}\n) {t.op} {num(t.value)}"
    # An error-code field (XID) is a different story from a reading past a limit: own texts and runbook.
    kind = "xid" if m.unit == "code" else "threshold"
    return alert(spec, t.alert, expr, severity=t.severity, for_=t.for_, kind=kind,
                 labels={"dcgm_field": m.name}, metric=m.name, title=m.title, unit=unit,
                 op=t.op, value=num(t.value), severity_name=t.severity,
                 held=f" for {format_duration(t.for_)}" if t.for_ else "")


#: alert name per XID policy severity (one name per severity: see the spec's alert-name check)
XID_ALERTS = {"critical": "GpuXidCritical", "warning": "GpuXidWarning", "info": "GpuXidInformational"}


#: the filter of a reading that is an XID code: above 0 and below DCGM's blank codes (a "not
#: supported" blank, 2^63 - 14, is GpuTelemetryImplausible's page, not an unlisted XID at warning)
_XID_CODE = f" > 0 < {DCGM_BLANK_MIN}"


def _xid_selected(spec: Spec, m: Metric, codes: tuple[int, ...], others: tuple[int, ...] | None = None,
                  held: str | None = None) -> str:
    """Series of ``m`` whose code is one of ``codes``; with ``others``, any code > 0 but those.
    By the ``err_code`` label when the spec keeps it (NVIDIA/dcgm-exporter#309 and #326), else by value.
    ``held`` (a duration): each series' last sample within it, so the series counts for that long
    after it vanished."""
    s = job_sel(spec, m.name)
    if held:
        s = f"last_over_time({s}[{held}])"
    if "err_code" in m.alert_labels:
        listed = "|".join(str(c) for c in (others if others is not None else codes))
        op = "!~" if others is not None else "=~"
        sel = _xid_series(spec, m, listed or "0", op)
        return (f"last_over_time({sel}[{held}])" if held else sel) + _XID_CODE
    if others is not None:
        chain = " or ".join(f"{s} == {c}" for c in others)
        return f"{s}{_XID_CODE}" + (f" unless ({chain})" if chain else "")
    return "(" + " or ".join(f"{s} == {c}" for c in codes) + ")"


def _xid_compared(spec: Spec, m: Metric, codes: tuple[int, ...], listed: tuple[int, ...] | None) -> str:
    """The selector of the "same value one window ago" side of an XID alert: with the ``err_code``
    label, only the codes the alert selects (``listed``: the policy's other codes too, as
    :func:`_xid_selected`'s ``others`` with this severity's codes taken back), so a rule reads the
    XID series of those codes, not every GPU's (exact: ``unless`` matches whole label sets, and
    the alert's series all carry one of these codes). Without the label, every series."""
    if "err_code" not in m.alert_labels:
        return job_sel(spec, m.name)
    if listed is None:
        return _xid_series(spec, m, "|".join(map(str, codes)), "=~")
    return _xid_series(spec, m, "|".join(str(c) for c in (0,) + listed if c not in codes), "!~")


def _xid_series(spec: Spec, m: Metric, codes: str, op: str) -> str:
    """``m`` of the exporter's job whose ``err_code`` matches (``=~``) or not (``!~``) ``codes``."""
    return f'{m.name}{{{matcher("job", spec.exporter.job)},{matcher("err_code", codes, op)}}}'


def xid(spec: Spec, m: Metric, severity: str) -> Rule | None:
    """An XID whose code the spec's policy puts at ``severity`` appeared within the policy window.
    The field holds the *last* code until the exporter restarts (NVIDIA/DCGM#227,
    NVIDIA/dcgm-exporter#500), so ``> 0`` stayed firing for days, and paged critical for
    application XIDs (13, 31, 43) as much as for 79 (issue 11, item 8). "New" = the GPU's value
    for that code differs from (or it had none) one window ago, per :func:`lost.xid_code_ids`: a
    new XID is a new ``err_code``, or a new value without that label; the alert resolves
    ``window`` after the last new one. Two identical XIDs in a row cannot be told apart
    (NVIDIA/dcgm-exporter#190)."""
    policy = m.xid
    codes = policy.codes(severity)
    # the GPU gone after it (off the bus): the page passes to job_gpu:gpumon_xid_lost:max, which the
    # inventory group records at its first evaluation after the GPU's series went stale. This alert
    # is in another group, which may evaluate in between, and the record's new series may become
    # readable only seconds later (VictoriaMetrics): the XID is read over the record's own window
    # (lost.xid_hold), or the page ended and started again (seen live on Prometheus and on vmalert;
    # promtool evaluates every group at one instant)
    bus_off = severity == "critical" and lost.xid_metric(spec) is m
    # every level reads the XID over that window: a failed scrape's staleness marker ended the page
    # for a step and it paged again (NVIDIA/dcgm-exporter#607: scrapes that time out now and then)
    held = dur(lost.xid_hold(spec))
    if policy.other == severity:
        listed = tuple(c for level in ("critical", "warning", "info", "ignore") for c in policy.codes(level))
        selected = _xid_selected(spec, m, (), others=(0,) + listed if "err_code" in m.alert_labels else listed,
                                 held=held)
        if codes:
            selected = f"({selected})\nor\n({_xid_selected(spec, m, codes, held=held)})"
    elif codes:
        selected = _xid_selected(spec, m, codes, held=held)
    else:
        return None
    s = _xid_compared(spec, m, codes, listed if policy.other == severity else None)
    w = dur(policy.window)
    keep = by(gpu_ids(spec, m) + m.alert_labels)
    # "new": not the same value one window ago, per GPU and code, read over the held window (a held
    # XID already seen then is not new; a failed scrape then does not make an old XID new)
    same = lost.xid_seen_before(spec, m, s, held)
    expr = f"max by ({keep}) (\n  {selected}\n  unless on ({lost.xid_code_ids(spec, m)})\n  {same}\n)"
    if bus_off:
        # the GPU gone after it (off the bus) keeps this page until it reports again (rules/lost.py)
        expr += f"\nor\n{names.XID_LOST}"
    listed_text = ", ".join(str(c) for c in codes) or "none"
    return alert(spec, XID_ALERTS[severity], expr, severity=severity, for_=0.0, kind="xid_policy",
                 labels={names.FIELD_LABEL: m.name}, metric=m.name, title=m.title, window=w,
                 codes=listed_text, other=policy.other == severity, severity_name=severity)


def frozen(spec: Spec, m: Metric) -> Rule:
    """A counter that stopped increasing while the GPU reports it from a target that is up. A
    powered GPU always draws energy, so a flat energy counter means the exporter serves frozen
    values (dcgm-exporter#164). ``increase`` handles resets; the window is >= 10 x the collect
    interval.

    Keyed by the GPU, not by the exporter target: a replaced exporter pod is a new ``instance``,
    and keyed by it the page ended and, a ``for`` later, fired again for the same frozen counter.
    Every series of the GPU within the window counts (the old pod's flat samples bridge the new
    pod's first scrape, which ``increase`` cannot read yet), so the counter rising on either
    ends it."""
    w = dur(max(spec.alerts.frozen_window, 10 * spec.exporter.collect_interval))
    keep = by(gpu_ids(spec, m))
    sel = job_sel(spec, m.name)
    expr = (f"max by ({keep}) (increase({sel}[{w}])) == 0\n"
            f"and on ({keep})\n({sel} and on (job, instance) {job_sel(spec, 'up')} == 1)")
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
    """Value alerts for every spec'd metric: thresholds, XID policy, frozen counters, and the
    busy-but-profiling-zero divergence. Thresholds read only plausible readings (in range, not a
    blank code, not NaN) on their own, so they need nothing from :func:`plausibility_rules`."""
    stuck = profiling_stuck(spec)
    return [r for m in spec.metrics for r in _per_metric(spec, m)] + ([stuck] if stuck else [])


def plausibility_rules(spec: Spec) -> list[Rule]:
    """The implausible readings of every spec'd metric and the nodes that read each field
    plausibly where some GPU does not (recorded first), then three tiers that exclude each other
    like the presence tiers. Their own group, evaluated every ``alerts.slow_group_interval``:
    they read every raw field two or three times, most of the rules' cost on a large fleet,
    for a data-quality page that a minute's delay does not hurt."""
    recorded = [r for m in spec.metrics for r in (implausible_set(spec, m), implausible_readings(spec, m),
                                                  node_plausible(spec, m))]
    return recorded + [r for m in spec.metrics for r in (fleet_implausible(spec, m), node_implausible(spec, m),
                                                         implausible(spec, m))]


def _per_metric(spec: Spec, m: Metric) -> list[Rule]:
    """The value alerts of one metric: thresholds, XID policy levels, frozen counter (the group
    puts critical alerts first: :func:`gpumon.rules._inhibitors_first`)."""
    alerts = [threshold(spec, m, t) for t in m.thresholds]
    if m.xid is not None:
        alerts += [r for r in (xid(spec, m, sev) for sev in ("critical", "warning", "info")) if r]
    if m.frozen_check:
        alerts.append(frozen(spec, m))
    return alerts
