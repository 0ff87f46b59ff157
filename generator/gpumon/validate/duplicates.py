"""Check: the same GPU UUID reported now by two or more targets or jobs — two exporters on one
node (the GPU Operator's plus a Helm-installed one), or a ServiceMonitor next to a static scrape
config. Sums double and every alert fires twice.

One aggregated query on the first required metric, whatever the fleet size: GPUs whose UUID
appears under more than one (job, instance), limited to UUIDs the spec's job reports (MIG
instances share their parent's UUID on one target, so they do not count as duplicates)::

    group by (UUID, job, instance, Hostname) (last_over_time(M{UUID!=""}[3 scrapes]) and on (job, instance) up == 1)
    and on (UUID) (count by (UUID) (group by (UUID, job, instance) (...the same...)) > 1)
    and on (UUID) last_over_time(M{job="<job>"}[3 scrapes])

Only targets up *now* count (``up == 1``, an instant selector: a target that left service
discovery got staleness markers and is gone at once). An exporter pod replaced by one at a new
address reports the same UUIDs from two targets within the 3-scrape window, one after the other:
that is one GPU, not a duplicate.

Only series that carry the spec's UUID label count (``UUID!=""``): series without it (the label
dropped by relabeling, or spelled otherwise) would all share the empty value and look like one
GPU reported by every target. The presence check reports them (identity-label-missing /
identity-label-renamed).

Why: Two exporters or two scrape configs reporting one GPU double every sum and fire every alert
twice.
Silence: Remove one exporter or scrape config, or leave the check out with --checks.
"""

from __future__ import annotations

from collections import defaultdict

from .. import promqltext
from ..durations import format_duration
from ..findings import Finding
from ..promapi import PromError
from . import hints
from .base import CheckResult, Context, other_spelling, partial, query_failed

CHECK = "duplicates"
ORDER = 50
FINDINGS = ("duplicate-gpu", CHECK)
LOOKS_AT = ("a GPU UUID reported now by more than one (job, instance): two exporters on a node (GPU Operator's "
            'plus a Helm-installed one) or two scrape configs for one target; sums double, alerts fire twice. One '
            'aggregated query on the first required metric: `count by (UUID) (group by (UUID, job, instance) '
            "(...)) > 1`, limited to UUIDs of the spec's job; series without the UUID label are not GPUs here "
            "(identity-label-missing reports them); MIG instances of one GPU on one target are not "
            'duplicates. Only targets up now count (`... and on (job, instance) up == 1`): an exporter pod '
            'replaced by one at a new address reports the same UUIDs from two targets one after the other, which '
            'is one GPU, not a duplicate')


def query(ctx: Context, metric: str) -> str:
    """Series of ``metric`` whose GPU UUID is reported by more than one target, with their job,
    instance and node label."""
    uuid, node = ctx.labels.gpu, ctx.labels.node
    recent = format_duration(3 * max(1.0, ctx.scrape_interval))
    # under a global view two clusters may reuse one target address: the cluster is part of it
    target = ", ".join((ctx.labels.cluster,) * bool(ctx.labels.cluster) + ("job", "instance"))
    # series without the UUID label all share the empty value: one "GPU" on every target. They
    # are identity-label-missing (presence check), not duplicates
    carrying = promqltext.series(metric, promqltext.matcher(uuid, "", "!="))
    now = f"(last_over_time({carrying}[{recent}]) and on ({target}) up == 1)"
    # both spellings of the node label (Hostname / hostname, NVIDIA/dcgm-exporter#655)
    return (f"group by ({uuid}, job, instance, {node}, {other_spelling(node)}) ({now})\n"
            f"and on ({uuid}) (count by ({uuid}) (group by ({uuid}, job, instance) ({now})) > 1)\n"
            f"and on ({uuid}) last_over_time({ctx.sel(metric)}[{recent}])")


def queries(ctx: Context) -> dict[str, str]:
    """``{"dup": query}`` on the first required metric (what :func:`run` asks; the run prefetches
    it), none without a required metric."""
    return {"dup": query(ctx, ctx.spec.required_metrics[0].name)} if ctx.spec.required_metrics else {}


def run(ctx: Context) -> CheckResult:
    """Finding ``duplicate-gpu`` (error): one per set of targets reporting the same GPUs."""
    case = f"{CHECK}/gpu-uuid"
    if ctx.skip_gpu_checks or not ctx.spec.required_metrics:
        return CheckResult([], [case])
    metric = ctx.spec.required_metrics[0].name
    ans = ctx.queries_at_now(queries(ctx))["dup"]
    if isinstance(ans, PromError):
        return CheckResult([query_failed(ans, CHECK, metric, case)], [case])
    uuid_label, node_label = ctx.labels.gpu, ctx.labels.node
    targets: dict[str, set[tuple[str, str]]] = defaultdict(set)
    nodes: dict[str, set[str]] = defaultdict(set)
    for item in ans.data:
        m = item["metric"]
        uuid = m.get(uuid_label, "")
        if not uuid:  # the query asks for a non-empty UUID; an answer without one is no GPU
            continue
        targets[uuid].add((m.get("job", ""), m.get("instance", "")))
        name = m.get(node_label) or m.get(other_spelling(node_label))
        if name:
            nodes[uuid].add(name)
    # one finding per set of targets: two exporters on a node duplicate all its GPUs at once
    groups: dict[frozenset, list[str]] = defaultdict(list)
    for uuid, where in targets.items():
        groups[frozenset(where)].append(uuid)
    findings = []
    for where, uuids in sorted(groups.items(), key=lambda kv: sorted(kv[0])):
        node_names = sorted({n for u in uuids for n in nodes[u]})
        shown = ", ".join(sorted(uuids)[:8]) + (f" (+{len(uuids) - 8} more)" if len(uuids) > 8 else "")
        listed = ", ".join(f'job="{j}" instance="{i}"' for j, i in sorted(where))
        jobs = sorted({j for j, _ in where})
        # one address in several jobs: two scrape configs (or a ServiceMonitor and a static config)
        same = " (one target address in several jobs: two scrape configs select it)" \
            if len({i for _, i in where}) == 1 else ""
        findings.append(Finding(
            "duplicate-gpu", "error", ", ".join(node_names) or "?",
            f"{len(uuids)} GPU(s) of node {', '.join(node_names) or '?'} are reported by {len(where)} targets "
            f"({listed}){same}: {shown}; sums double and alerts fire {len(where)} times",
            hints.DUPLICATE,
            labels=tuple(sorted((("job", ",".join(jobs)),) + (((node_label, node_names[0]),) if len(node_names) == 1 else ()))),
            case=case))
    return CheckResult(partial(findings, ans, case, CHECK, metric), [case])
