"""Check 5: continuity over the lookback — per target, GPU and required metric, the share of the
target's successful scrapes that carried the metric (samples seen / samples expected). Dividing
by the target's own successful scrapes (``sum_over_time(up[w])``) separates field gaps from
target outages, which the targets check reports. The inventory asks it, one query per metric
that also lists the GPUs gone since (:func:`.inventoryqueries.gaps_query`); only GPUs below the
spec's ``gap_min_ratio`` come back. GPUs whose ``instance`` names no target of the job (metric
relabelling rewrote it) have no ``up`` to divide by: one inconclusive finding names them. A GPU
label set that began within the lookback under a target already up (a MIG instance created, the
node label respelled by an exporter upgraded at the same address) is judged on the scrapes since
it was first seen: a few short reads, only for the targets of GPUs below the threshold.

Why: A field missing from some scrapes passes a "present now" check but makes `for` clauses restart
and rates jump.
Silence: Lower `alerts.gap_min_ratio` in the spec, or leave the check out with --checks.
"""

from __future__ import annotations

import math

from ..durations import format_duration
from ..findings import Finding
from ..promapi import PromError
from ..rules.names import FIELD_LABEL
from . import hints
from .base import CheckResult, Context, answered, gpu_count, partial
from .inventoryqueries import at_start_query, first_seen_query, share_query

CHECK = "continuity"
ORDER = 80
FINDINGS = ("series-intermittent", CHECK)
LOOKS_AT = ('per target, GPU and required metric: samples seen / successful scrapes over `--lookback`, below '
            '`alerts.gap_min_ratio`; worst GPUs first')


def run(ctx: Context) -> CheckResult:
    """Findings ``series-intermittent``: one per metric, worst GPUs first. GPUs missing the metric
    right now are left to the presence check (one cause, one finding)."""
    metrics = ctx.spec.required_metrics
    cases = [f"{CHECK}/{m.name}" for m in metrics]
    if ctx.skip_gpu_checks:
        return CheckResult([], cases)
    inv = ctx.inventory
    answers = {m.name: inv.answers.get(f"gaps|{m.name}") for m in metrics}
    findings: list[Finding] = _untargeted(ctx, inv, cases)
    flagged = []
    for m, case, ans in answered(CHECK, metrics, answers, findings):
        bad: dict[frozenset, tuple] = {}
        for item in ans.data:
            ratio, gpu = float(item["value"][1]), ctx.gpu(item["metric"])
            # a negative value is a label set gone since (the inventory's, reported by presence
            # when its GPU reports nothing now); the GPU itself may carry the metric now under
            # another label set: a new exporter pod (another instance), never a gap
            if ratio < 0 or gpu.key not in inv.now.get(m.name, set()):
                continue  # missing now: reported by presence
            bad[frozenset(item["metric"].items())] = (ratio, gpu, item["metric"].get("instance", ""), None)
        flagged.append((m, case, ans, bad))
    _since_first_seen(ctx, {m.name: bad for m, _, _, bad in flagged if bad})
    whole = _whole_gpu(flagged)
    if whole:
        cases.append(f"{CHECK}/{WHOLE}")
        findings.append(_whole_finding(ctx, whole))
    for m, case, ans, rows in flagged:
        rows = {k: row for k, row in rows.items() if row[1].key not in whole}
        bad = sorted(rows.values(), key=lambda x: (x[0], x[1].key))
        out = []
        if bad:
            shown = ", ".join(f"{g} {r:.0%}" + (f" (since first seen: last {format_duration(span)})" if span else "")
                              for r, g, _, span in bad[:8]) + (f" (+{len(bad) - 8} more)" if len(bad) > 8 else "")
            labels = [(FIELD_LABEL, m.name), ("job", ctx.job)]
            if len(bad) == 1:
                labels += [*bad[0][1].node_labels(ctx.labels), (ctx.labels.gpu, bad[0][1].uuid), ("instance", bad[0][2])]
            out.append(Finding("series-intermittent", "error", m.name,
                               f"{m.name} was missing from some successful scrapes over the last "
                               f"{format_duration(ctx.lookback)} on {gpu_count(g for _, g, _, _ in bad)} GPU(s) (share of scrapes that carried it, "
                               f"worst first; threshold {ctx.spec.alerts.gap_min_ratio:.0%}): {shown}",
                               hints.INTERMITTENT, labels=tuple(sorted(labels)), case=case))
        findings += partial(out, ans, case, CHECK, m.name)
    return CheckResult(findings, cases)


#: the case of GPUs that missed every required field in the same scrapes (:func:`_whole_gpu`)
WHOLE = "every-required-field"


def _whole_gpu(flagged) -> dict[tuple, tuple]:
    """{GPU key: (lowest share, Gpu, instance)} of the GPUs below the threshold on *every* required
    field (of two or more): the GPU itself stopped reporting for a while (a reset, off the bus and
    back, its node label respelled for a rollout and back), one outage that GpuLost or
    GpuIdentityLabelMissing pages, not one field's blanks per field."""
    if len(flagged) < 2:
        return {}
    per_field = [{row[1].key: row for row in rows.values()} for _, _, _, rows in flagged]
    common = set.intersection(*(set(rows) for rows in per_field))
    return {key: (min(rows[key][0] for rows in per_field), per_field[0][key][1], per_field[0][key][2])
            for key in common}


def _whole_finding(ctx: Context, whole: dict[tuple, tuple]) -> Finding:
    """One ``series-intermittent`` finding for the GPUs of :func:`_whole_gpu`, worst first."""
    bad = sorted(whole.values(), key=lambda x: (x[0], x[1].key))
    shown = ", ".join(f"{g} {r:.0%}" for r, g, _ in bad[:8]) + (f" (+{len(bad) - 8} more)" if len(bad) > 8 else "")
    labels = [("job", ctx.job)]
    if len(bad) == 1:
        labels += [*bad[0][1].node_labels(ctx.labels), (ctx.labels.gpu, bad[0][1].uuid), ("instance", bad[0][2])]
    return Finding("series-intermittent", "error", "every required field",
                   f"every required field was missing from the same successful scrapes over the last "
                   f"{format_duration(ctx.lookback)} on {gpu_count(g for _, g, _ in bad)} GPU(s) (lowest share of scrapes "
                   f"that carried one, worst first; threshold {ctx.spec.alerts.gap_min_ratio:.0%}): {shown}",
                   hints.GPU_INTERRUPTED, labels=tuple(sorted(labels)), case=f"{CHECK}/{WHOLE}")


def _untargeted(ctx: Context, inv, cases: list[str]) -> list[Finding]:
    """One inconclusive finding when GPUs report under an ``instance`` that names no target of
    the job (metric relabelling rewrote it, e.g. to the node name): ``up`` carries the target's
    own address, so their share of successful scrapes has nothing to divide by and no gap of
    theirs can be seen (the check said nothing, as if they had none)."""
    if not inv.untargeted or not ctx.spec.required_metrics:
        return []
    case = f"{CHECK}/targets"
    cases.append(case)
    names = sorted(inv.untargeted)
    gpus = [k for k in inv.reporting if inv.instance(k) in inv.untargeted]
    shown = ", ".join(names[:5]) + (f" (+{len(names) - 5} more)" if len(names) > 5 else "")
    return [Finding(CHECK, "inconclusive", ctx.job,
                    f"gaps not checked on {gpu_count(gpus)} GPU(s): the instance label of their series "
                    f"({shown}) names no target of job {ctx.job}, so no `up` series counts their scrapes",
                    "metric relabelling (metricRelabelings) rewrote `instance`; keep the target's address in "
                    "`instance` and put the node name in another label", labels=(("job", ctx.job),), case=case)]


def _since_first_seen(ctx: Context, bad: dict[str, dict]) -> None:
    """Amend ``bad`` ({metric: {label set: (share, Gpu, instance)}}, the GPUs below the threshold)
    for label sets that began within the lookback under a target that was up before: a MIG
    instance created, the node label respelled (``Hostname`` -> ``hostname``) by an exporter
    upgraded at the same address. Their share of the whole lookback's scrapes counts the scrapes
    before they existed; it is their share of the scrapes since they were first seen that tells
    a gap. Three short rounds, only for the targets of such GPUs: which label sets were there at
    the lookback's start (an instant read); when the others were first seen (a subquery in steps
    of ``max(scrape interval, lookback / 360)``); their share over that span, rounded down to
    ``step * 2^k`` (a few windows per metric, each within their lifetime). A label set younger
    than 4 scrapes is too new to tell (dropped); a failed read keeps the lookback's share. An
    amended entry carries its span as a fourth element (None: the whole lookback)."""
    def ask(make, wanted: dict[str, set]) -> dict:
        exprs = {name: make(ctx, name, {bad[name][k][2] for k in keys}) for name, keys in wanted.items() if keys}
        return ctx.queries_at_now(exprs) if exprs else {}

    def labels(ans) -> dict:
        return {} if isinstance(ans, PromError) else {frozenset(i["metric"].items()): i["value"][1] for i in ans.data}

    starts = ask(at_start_query, {name: set(rows) for name, rows in bad.items()})
    young = {name: {k for k in bad[name] if k not in labels(ans)} for name, ans in starts.items()
             if not isinstance(ans, PromError)}
    step = max(1.0, ctx.scrape_interval, ctx.lookback / 360)
    spans: dict[tuple[str, float], set] = {}
    for name, ans in ask(first_seen_query, young).items():
        for key, first in labels(ans).items():
            age = ctx.now - float(first)
            if key not in young[name] or age >= ctx.lookback - step:
                continue  # there at the lookback's start
            span = step * 2 ** int(math.log2(max(age, step) / step))
            if span < 4 * ctx.scrape_interval:
                del bad[name][key]  # too new to tell
            else:
                spans.setdefault((name, span), set()).add(key)
    asks = {f"{name}|{span:g}": share_query(ctx, name, {bad[name][k][2] for k in keys}, span)
            for (name, span), keys in spans.items()}
    answers = ctx.queries_at_now(asks) if asks else {}
    for (name, span), keys in spans.items():
        ans = answers[f"{name}|{span:g}"]
        if isinstance(ans, PromError):
            continue
        shares = labels(ans)
        for key in keys:
            if key in shares:
                bad[name][key] = (float(shares[key]), *bad[name][key][1:3], span)
            else:
                del bad[name][key]  # carried in every scrape since it was first seen
