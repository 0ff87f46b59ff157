"""Check: spec'd counters that go down (NVIDIA/dcgm-exporter#417). A counter whose ``resets()`` over the
lookback is above 2 while the exporter process did not restart is not a counter: ``rate()`` reads
every drop as a reset and spikes (DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL, dcgm-exporter#417). One
query per counter of the spec, returning only the offending GPUs::

    max by (<identity>) (resets(M{job}[lookback]) > 2
      unless on (job, instance) changes(process_start_time_seconds{job}[lookback]) > 0)

(dcgm-exporter does not export ``process_start_time_seconds`` in every version; without it no
series is excluded.)

Why: A spec'd counter that goes down without an exporter restart is not a counter: rate() and
increase() read every drop as a reset and report increases that never happened.
Silence: Set the metric's `kind: gauge` in the spec (a warning: it never fails a run), or leave the
check out with --checks.
"""

from __future__ import annotations

from collections import defaultdict

from ..durations import format_duration
from ..findings import Finding
from ..promapi import count
from ..rules.names import FIELD_LABEL
from . import hints
from .base import CheckResult, Context, answered, gpu_count, partial

CHECK = "counters"
ORDER = 90
FINDINGS = ("counter-decreases", CHECK)
LOOKS_AT = ("spec'd counters with `resets(m[lookback]) > 2` on a GPU, unless the target's "
            '`process_start_time_seconds` changed (an exporter restart) (dcgm-exporter#417); one query per '
            'counter')
FINDING_NOTES = {'counter-decreases': 'warning'}
#: resets over the lookback tolerated: a GPU reset or driver reload resets a real counter (aitra-ai/aitra-meter#59)
MAX_RESETS = 2


def query(ctx: Context, metric: str) -> str:
    """GPUs whose ``metric`` was reset more than :data:`MAX_RESETS` times in the lookback."""
    w = format_duration(ctx.lookback)
    return (f"max by ({', '.join(ctx.id_labels)}) (\n  resets({ctx.sel(metric)}[{w}]) > {MAX_RESETS}\n"
            f"  unless on (job, instance) changes({ctx.sel('process_start_time_seconds')}[{w}]) > 0\n)")


def queries(ctx: Context) -> dict[str, str]:
    """``{metric: query}`` per spec'd counter (what :func:`run` asks; the run prefetches it)."""
    return {m.name: query(ctx, m.name) for m in ctx.spec.metrics if m.kind == "counter"}


def run(ctx: Context) -> CheckResult:
    """Finding ``counter-decreases`` (warning): one per counter and node, listing the GPUs and
    how often the value went down."""
    metrics = [m for m in ctx.spec.metrics if m.kind == "counter"]
    cases = [f"{CHECK}/{m.name}" for m in metrics]
    if ctx.skip_gpu_checks or not metrics:
        return CheckResult([], cases)
    answers = ctx.queries_at_now(queries(ctx))
    window = format_duration(ctx.lookback)
    findings: list[Finding] = []
    for m, case, ans in answered(CHECK, metrics, answers, findings):
        by_node: dict[str, list] = defaultdict(list)  # cluster/node -> [(gpu, decreases)]
        for item in ans.data:
            if ctx.target_down(item["metric"].get("instance", "")):
                continue
            gpu = ctx.gpu(item["metric"])
            by_node[gpu.where].append((gpu, count(item["value"][1])))
        out = []
        for node, items in sorted(by_node.items()):
            items.sort(key=lambda x: x[0].key)
            shown = ", ".join(f"{g}: {n} times" for g, n in items[:8])
            labels = [(FIELD_LABEL, m.name), ("job", ctx.job), *items[0][0].node_labels(ctx.labels)]
            if len(items) == 1:
                labels.append((ctx.labels.gpu, items[0][0].uuid))
            out.append(Finding("counter-decreases", "warning", f"{m.name} on {node or '?'}",
                               f"{m.name} (spec kind counter) went down more than {MAX_RESETS} times in the last "
                               f"{window} without an exporter restart on {gpu_count(g for g, _ in items)} GPU(s): {shown}",
                               hints.COUNTER_DECREASES, labels=tuple(sorted(labels)), case=case))
        findings += partial(out, ans, case, CHECK, m.name)
    return CheckResult(findings, cases)
