"""Check: for every metric with ``sources``, which source serves each node's GPUs.

One query per such metric: the normalized expression gpumon's rules record
(``job_gpu:dcgm_field_value:normalized``, :mod:`gpumon.rules.sources`), grouped by node, GPU
and ``source``. GPUs read from a fallback are a ``fallback-serving`` warning per node (the
presence check leaves them out of ``series-missing``: their alerts and panels still work); a
fleet whose nodes are read under different names for one quantity is one ``alias-split``
warning (a node wholly on dcgm-exporter 1.x names, or on a field's old DCGM name:
``DCGM_FI_DEV_CLOCK_THROTTLE_REASONS`` -> ``DCGM_FI_DEV_CLOCKS_EVENT_REASONS``,
NVIDIA/dcgm-exporter#261); ``sources-served`` (info) lists per field which source serves which nodes.

Why: A field read from a fallback (nvidia-smi exporter, 1.x names, a renamed field) keeps its alerts
and panels, but the primary exporter is degraded there; nodes on different names for one quantity
are a half-done upgrade that rules written for one name miss (NVIDIA/dcgm-exporter#261).
Silence: Remove the source from the metric's `sources` in the spec (its GPUs are then
series-missing), or leave the check out with --checks (it never fails a run).
"""

from __future__ import annotations

from collections import defaultdict

from ..findings import Finding
from ..promapi import Answer, PromError
from ..rules.names import FIELD_LABEL, SOURCE_LABEL
from ..spec.presets import PRIMARY
from .base import CheckResult, Context, partial, query_failed

CHECK = "sources"
ORDER = 40
APPLIES = "metrics with fallback sources"
FINDINGS = ("fallback-serving", "alias-split", "sources-served", CHECK)
LOOKS_AT = ('one query per such metric: the normalized expression the rules record '
            '(`job_gpu:dcgm_field_value:normalized`), grouped by node, UUID and `source`. GPUs read from a '
            'fallback are a warning per node and field, and the presence check leaves them out of '
            '`series-missing`; nodes wholly on another name for one quantity (1.x names, a renamed field: '
            'NVIDIA/dcgm-exporter#261) are one `alias-split` per field; `sources-served` lists which source '
            'serves which nodes')
FINDING_NOTES = {'fallback-serving': 'warning', 'alias-split': 'warning', 'sources-served': 'info'}


def _names(m) -> dict[str, str]:
    """source label -> series name, the primary included."""
    return {PRIMARY: m.name, **{s.label: s.series for s in m.sources}}


def run(ctx: Context) -> CheckResult:
    """Findings ``fallback-serving`` (warning, per node and field), ``alias-split`` (warning, per
    field), ``sources-served`` (info, per field); the check's own id when its query failed."""
    metrics = [m for m in ctx.spec.tracked_metrics if m.sources]
    cases = [f"{CHECK}/{m.name}" for m in metrics]
    if ctx.skip_gpu_checks or not metrics:
        return CheckResult([], cases)
    facts = ctx.sources
    findings: list[Finding] = []
    lab = ctx.labels
    for m in metrics:
        case = f"{CHECK}/{m.name}"
        ans = facts.answers.get(m.name)
        if isinstance(ans, PromError):
            findings.append(query_failed(ans, CHECK, m.name, case))
            continue
        names = _names(m)
        per_node: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for (cluster, _uuid), (node, src) in facts.served.get(m.name, {}).items():
            per_node[(cluster, node)][src] += 1
        own: list[Finding] = []
        for (cluster, node), counts in sorted(per_node.items()):
            where = f"{cluster}/{node}" if cluster else node
            node_labels = (((lab.cluster, cluster),) if lab.cluster else ()) + ((lab.node, node),)
            for src, n in sorted(counts.items()):
                if src == PRIMARY:
                    continue
                own.append(Finding(
                    "fallback-serving", "warning", f"{m.name} on {where or '?'}",
                    f"{n} GPU(s) of node {where or '?'} read {m.name} from fallback source {src} ({names.get(src, src)}); "
                    f"{m.name} itself is absent for them"
                    + (f" ({counts[PRIMARY]} GPU(s) of the node read it from dcgm-exporter)" if counts.get(PRIMARY) else ""),
                    "alerts and panels still see the reading (from the normalized series); find out why dcgm-exporter "
                    "lost the field there (NVML returns nothing for it, 1.x names, a renamed field, the collectors CSV)",
                    labels=tuple(sorted(node_labels + ((FIELD_LABEL, m.name), ("job", ctx.job), (SOURCE_LABEL, src)))),
                    case=case))
        by_set: dict[tuple[str, ...], list[str]] = defaultdict(list)
        for (cluster, node), counts in sorted(per_node.items()):
            by_set[tuple(sorted(counts))].append(f"{cluster}/{node}" if cluster else node)

        def said(srcs: tuple[str, ...]) -> str:
            return " + ".join(names.get(s, s) for s in srcs)

        if len(by_set) > 1 and any(PRIMARY not in srcs for srcs in by_set):
            parts = [f"node{'s' if len(nodes) > 1 else ''} {', '.join(nodes)} on {said(srcs)}"
                     for srcs, nodes in sorted(by_set.items(), key=lambda kv: (-len(kv[1]), kv[0]))]
            own.append(Finding("alias-split", "warning", m.name, f"{m.name}: " + "; ".join(parts),
                               "one quantity under several names: finish the exporter upgrade (or roll the odd "
                               "nodes back); until then gpumon reads each node from the name it serves",
                               labels=((FIELD_LABEL, m.name), ("job", ctx.job)), case=case))
        if per_node:
            served = defaultdict(list)
            for (cluster, node), counts in sorted(per_node.items()):
                for src in counts:
                    served[src].append(f"{cluster}/{node}" if cluster else node)
            text = "; ".join(f"{src} ({names.get(src, src)}) on {', '.join(nodes)}"
                             for src, nodes in sorted(served.items(), key=lambda kv: (kv[0] != PRIMARY, kv[0])))
            own.append(Finding("sources-served", "info", m.name, f"{m.name} is read from {text}",
                               labels=((FIELD_LABEL, m.name), ("job", ctx.job)), case=case))
        warned = ans if isinstance(ans, Answer) and ans.partial else None
        findings += partial(own, warned, case, CHECK, m.name)
    return CheckResult(findings, cases)
