"""Check 4: the values now — outside the spec's plausible range, DCGM blank sentinels, NaN, and
counters that stopped increasing (frozen telemetry). The inventory's count of each metric's GPUs
says whether any reads it badly (:mod:`.readings`: the same read); only a metric with a bad
reading, or one the count cannot judge, is asked for its bad readings (the reason told from the
value), so the answers are small and do not grow with the fleet, and a healthy fleet's readings
are read once.

Why: A series that exists but carries DCGM blank codes, NaN, implausible readings or a frozen
counter keeps threshold alerts from firing (or makes them fire wrongly) while presence looks fine.
Silence: Widen the metric's `range` or drop `frozen_check` in the spec when the reading is real, or
leave the check out with --checks.
"""

from __future__ import annotations

from collections import defaultdict

from ..durations import format_duration
from ..findings import Finding
from ..promapi import Answer, PromError
from ..rules.names import FIELD_LABEL
from ..rules.promql import num
from ..spec import DCGM_BLANK_MIN, Metric
from . import hints
from .base import CheckResult, Context, answered, gpu_count, gpu_list, partial
from .readings import PLAUSIBLE, exact, judged, latest

CHECK = "values"
ORDER = 70
FINDINGS = ("value-out-of-range", "value-sentinel", "value-nan", "value-frozen", CHECK)
LOOKS_AT = ("readings now outside the spec's `range`, DCGM blank codes (>= 2^47), NaN, and `frozen_check` "
            'counters with `increase == 0` while the target is up')
FINDING_NOTES = {'value-out-of-range': 'implausible-low / -high'}
_REASONS = {  # reason -> (check id, what, hint)
    "below_range": ("value-out-of-range", "implausible-low", hints.RANGE_LOW),
    "above_range": ("value-out-of-range", "implausible-high", hints.RANGE_HIGH),
    "dcgm_blank": ("value-sentinel", "DCGM blank/not-supported code", hints.SENTINEL),
    "nan": ("value-nan", "NaN", hints.NAN),
    "frozen": ("value-frozen", "counter not increasing", hints.FROZEN),
}


#: DCGM's blank codes (NVIDIA/DCGM dcgmlib/dcgm_structs.h): base value and the names of base + 0, 1, 2, 3
_BLANKS = ((0x7FFFFFF0, "INT32"), (0x7FFFFFFFFFFFFFF0, "INT64"), (140737488355328, "FP64"))
_BLANK_KINDS = ("BLANK", "NOT_FOUND", "NOT_SUPPORTED", "NO_PERMISSION")


def shown_value(raw: str) -> str:
    """A sample as the server's API returned it (never re-formatted: ``9223372036854775808`` stays
    itself, not ``9223372036854776000`` or ``9.2e+18``), with the DCGM blank code it is, if any.
    The int64 codes all read as 2^63 once stored as a float64, so they are named together."""
    try:
        value = float(raw)
    except ValueError:
        return raw
    for base, kind in _BLANKS:
        if kind == "INT64" and value == float(base):
            return f"{raw} (DCGM_INT64_BLANK..NO_PERMISSION, 2^63 as a float)"
        if kind != "INT64" and base <= value <= base + 3 and value.is_integer():
            return f"{raw} (DCGM_{kind}_{_BLANK_KINDS[int(value) - base]})"
    return raw


def frozen_query(ctx: Context, m: Metric) -> str:
    """One series per GPU of a ``frozen_check`` metric whose counter did not increase over the
    frozen window while its target is up, labelled ``gpumon_reason="frozen"``."""
    w = format_duration(max(ctx.spec.alerts.frozen_window, 10 * ctx.spec.exporter.collect_interval))
    return (f'label_replace(max by ({", ".join(ctx.id_labels)}) (increase({ctx.sel(m.name)}[{w}]) == 0 and on (job, instance) '
            f'{ctx.sel("up")} == 1), "{FROZEN}", "frozen", "", "")')


def counted(ctx: Context, m: Metric) -> bool:
    """Whether the inventory's count of ``m`` also says whether any GPU reads it badly: a tracked
    metric (the inventory counts those) whose good readings one comparison tells
    (:func:`.readings.judged`)."""
    return m in ctx.spec.tracked_metrics and judged(m)


def queries(ctx: Context) -> dict[str, str]:
    """``{metric: query}`` the check asks whatever the inventory says (the run prefetches them):
    the bad readings (:func:`.readings.exact`) of a metric the inventory does not judge
    (:func:`counted`), and the frozen counters."""
    out = {}
    for m in ctx.spec.metrics:
        parts = [] if counted(ctx, m) else [exact(m, latest(ctx, m))]
        parts += [frozen_query(ctx, m)] if m.frozen_check else []
        if parts:
            out[m.name] = "\n  or\n  ".join(parts)
    return out


def _answers(ctx: Context, metrics: list[Metric]) -> dict:
    """``{metric: Answer or PromError}``: its bad readings as read, and its frozen counters. A
    :func:`counted` metric whose count says every GPU reads it well asks nothing more; one with
    a bad reading, or whose count is not at hand, asks :func:`.readings.exact` now."""
    asked = ctx.queries_at_now(queries(ctx))
    answers = ctx.inventory.answers
    out, again = {}, {}
    for m in metrics:
        mine = asked.get(m.name)
        is_counted = counted(ctx, m)
        count = answers.get(f"plausible|{m.name}") if is_counted else None
        if not is_counted:
            out[m.name] = mine
        elif isinstance(count, PromError) or isinstance(mine, PromError):
            out[m.name] = count if isinstance(count, PromError) else mine
        else:
            out[m.name] = Answer(list(mine.data) if mine else [], warnings=(count.warnings if count else [])
                                 + (mine.warnings if mine else []))
            if count is None or any(item["metric"].get(PLAUSIBLE) != "1" for item in count.data):
                again[m.name] = exact(m, latest(ctx, m))
    for name, got in ctx.queries_at_now(again).items():
        first = out[name]
        out[name] = got if isinstance(got, PromError) else Answer(got.data + first.data,
                                                                  warnings=first.warnings + got.warnings)
    return out


#: the label marking the frozen-counter part of a values answer (never a dcgm-exporter label)
FROZEN = "gpumon_reason"


def reason(m: Metric, value: float) -> str | None:
    """Why a reading of ``m`` is bad (a key of :data:`_REASONS`), None when it is not: the
    blank codes first, then NaN, then the range (exclusive, as the query's filter)."""
    if value >= DCGM_BLANK_MIN:
        return "dcgm_blank"
    if value != value:
        return "nan"
    if m.range_max is not None and value > m.range_max:
        return "above_range"
    if m.range_min is not None and value < m.range_min:
        return "below_range"
    return None


def _bad(ctx: Context, m: Metric, data: list[dict]) -> list[tuple[dict, str, str]]:
    """(labels, reason, value) per GPU and reason: the series of one GPU (the context's identity
    labels) with one reason merge into their largest value, as ``max by`` would (NaN only when
    every value is NaN)."""
    out: dict[tuple, tuple[dict, str, str]] = {}
    for item in data:
        labels, raw = item["metric"], item["value"][1]
        why = labels[FROZEN] if FROZEN in labels else reason(m, float(raw))
        if why is None:
            continue
        key = (tuple(labels.get(k, "") for k in ctx.id_labels), why)
        old = out.get(key)
        if old is None or float(old[2]) != float(old[2]) or float(raw) > float(old[2]):
            out[key] = (labels, why, raw)
    return list(out.values())


def run(ctx: Context) -> CheckResult:
    """Findings value-out-of-range, value-sentinel, value-nan, value-frozen: one per metric,
    reason and node, listing the GPUs and their values."""
    metrics = [m for m in ctx.spec.metrics]
    cases = [f"{CHECK}/{m.name}" for m in metrics]
    if ctx.skip_gpu_checks:
        return CheckResult([], cases)
    answers = _answers(ctx, metrics)
    findings: list[Finding] = []
    for m, case, ans in answered(CHECK, metrics, answers, findings):
        groups: dict[tuple[str, str], list] = defaultdict(list)
        for labels, why, raw in _bad(ctx, m, ans.data):
            if ctx.target_down(labels.get("instance", "")):
                continue
            gpu = ctx.gpu(labels)
            groups[(why, gpu.where)].append((gpu, raw))
        out = []
        for (reason, node), items in sorted(groups.items()):
            check, what, hint = _REASONS.get(reason, ("value-out-of-range", reason, ""))
            lo = "-inf" if m.range_min is None else num(m.range_min)
            hi = "+inf" if m.range_max is None else num(m.range_max)
            shown = ", ".join(f"{g} = {shown_value(v)}" for g, v in sorted(items, key=lambda x: x[0].key)[:8])
            rng = f" (plausible {lo}..{hi} {m.unit})" if check == "value-out-of-range" else ""
            labels = [(FIELD_LABEL, m.name), ("job", ctx.job), ("reason", reason), *items[0][0].node_labels(ctx.labels)]
            if len(items) == 1:
                labels.append((ctx.labels.gpu, items[0][0].uuid))
            out.append(Finding(check, "error", f"{m.name} on {node or '?'}",
                               f"{what}: {gpu_count(g for g, _ in items)} GPU(s){rng}: {shown}" if reason != "frozen" else
                               f"{what} while the target is up: {gpu_list([g for g, _ in items])}",
                               hint, labels=tuple(sorted(labels)), case=case))
        findings += partial(out, ans, case, CHECK, m.name)
    return CheckResult(findings, cases)
