"""Check 5: continuity over the lookback — per target, GPU and required metric, the share of the
target's successful scrapes that carried the metric (samples seen / samples expected). Dividing
by the target's own successful scrapes (``sum_over_time(up[w])``) separates field gaps from
target outages, which the targets check reports. The inventory asks it, one query per metric
that also lists the GPUs gone since (:func:`.inventoryqueries.gaps_query`); only GPUs below the
spec's ``gap_min_ratio`` come back. GPUs whose ``instance`` names no target of the job (metric
relabelling rewrote it) have no ``up`` to divide by: one inconclusive finding names them.

Why: A field missing from some scrapes passes a "present now" check but makes `for` clauses restart
and rates jump.
Silence: Lower `alerts.gap_min_ratio` in the spec, or leave the check out with --checks.
"""

from __future__ import annotations

from ..durations import format_duration
from ..findings import Finding
from ..rules.names import FIELD_LABEL
from . import hints
from .base import CheckResult, Context, answered, gpu_count, partial

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
    for m, case, ans in answered(CHECK, metrics, answers, findings):
        bad = []
        for item in ans.data:
            ratio, gpu = float(item["value"][1]), ctx.gpu(item["metric"])
            # a negative value is a label set gone since (the inventory's, reported by presence
            # when its GPU reports nothing now); the GPU itself may carry the metric now under
            # another label set: a new exporter pod (another instance), never a gap
            if ratio < 0 or gpu.key not in inv.now.get(m.name, set()):
                continue  # missing now: reported by presence
            bad.append((ratio, gpu, item["metric"].get("instance", "")))
        bad.sort(key=lambda x: (x[0], x[1].key))
        out = []
        if bad:
            shown = ", ".join(f"{g} {r:.0%}" for r, g, _ in bad[:8]) + (f" (+{len(bad) - 8} more)" if len(bad) > 8 else "")
            labels = [(FIELD_LABEL, m.name), ("job", ctx.job)]
            if len(bad) == 1:
                labels += [*bad[0][1].node_labels(ctx.labels), (ctx.labels.gpu, bad[0][1].uuid), ("instance", bad[0][2])]
            out.append(Finding("series-intermittent", "error", m.name,
                               f"{m.name} was missing from some successful scrapes over the last "
                               f"{format_duration(ctx.lookback)} on {gpu_count(g for _, g, _ in bad)} GPU(s) (share of scrapes that carried it, "
                               f"worst first; threshold {ctx.spec.alerts.gap_min_ratio:.0%}): {shown}",
                               hints.INTERMITTENT, labels=tuple(sorted(labels)), case=case))
        findings += partial(out, ans, case, CHECK, m.name)
    return CheckResult(findings, cases)


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
