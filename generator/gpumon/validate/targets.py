"""Check 2: the spec'd job has healthy targets (``/api/v1/targets``, or ``up`` where that API does
not exist: Mimir, Cortex). The down targets are a shared fact (``ctx.targets.down``): per-GPU checks
leave their GPUs alone, so one outage gives one finding.

Why: A target that is down takes every series of its GPUs with it. It is reported once, here; the
per-GPU checks leave its GPUs alone (one cause, one finding).
Silence: Fix the scrape (the finding carries Prometheus' lastError), or leave the check out with
--checks. scrape-slow and targets-api-unavailable are warnings and never fail a run; a
scrape-interval-mismatch goes away once the spec says the job's real interval and the rules are
re-rendered from it.
"""

from __future__ import annotations

from ..findings import Finding
from ..promapi import PromError, count
from . import hints, scrapeinterval
from .base import CheckResult, Context, partial, query_failed
from .facts import Target, not_up

CHECK = "targets"
ORDER = 20
FINDINGS = ("target-missing", "target-down", "target-flapping", "scrape-timeout", "scrape-content-type",
            "scrape-slow", "target-empty", "targets-api-unavailable", scrapeinterval.ID, CHECK)
LOOKS_AT = ("`/api/v1/targets` for the spec's job: health, `lastError`, `lastScrapeDuration` vs `scrapeTimeout`; "
            '`scrape_samples_scraped == 0`; flapping: `avg_over_time(up)` below `alerts.flapping_min_up_ratio` '
            'with >= 4 state changes (NVIDIA/dcgm-exporter#607). No targets API (Mimir, Cortex): falls back to '
            '`up`. No target at all: per-GPU checks are skipped, and the jobs that do carry the first two '
            "required metrics are named (`count by (job) (DCGM_FI_DEV_GPU_TEMP)`: GPU Operator's "
            "`nvidia-dcgm-exporter` vs the chart's `dcgm-exporter`) with the hint to set `exporter.job`. GPUs "
            'behind a down target are reported once, as the target, named with the node(s) whose GPUs it served within '
            'the lookback. The targets\' `scrapeInterval`/`scrapeTimeout` against the spec\'s `exporter.scrape_interval`/'
            '`scrape_timeout` (the rules are sized for the spec\'s): an error when the real interval breaks a bound '
            'of the spec (rate windows, `for`, gap and lookback windows), else a warning; per scrape config.')
FINDING_NOTES = {'scrape-slow': 'warning', 'targets-api-unavailable': 'warning',
                 scrapeinterval.ID: 'warning; error when the real interval breaks a bound of the spec'}


def _classify(target: Target) -> tuple[str, str]:
    """(check id, hint) for a target whose health is not ``up``; message shapes verified against
    Prometheus 2.42 (NVIDIA/dcgm-exporter#607, utkuozdemir/nvidia_gpu_exporter#389,
    nginx/nginx-prometheus-exporter#917)."""
    err = target.last_error
    if "deadline exceeded" in err or "Client.Timeout" in err:
        return "scrape-timeout", hints.SCRAPE_TIMEOUT
    if "Content-Type" in err:
        return "scrape-content-type", hints.CONTENT_TYPE
    return "target-down", hints.EXPORTER_DOWN


def run(ctx: Context) -> CheckResult:
    """Findings: target-missing, target-down, target-flapping, scrape-timeout, scrape-content-type,
    scrape-slow, target-empty, targets-api-unavailable, scrape-interval-mismatch; all from ``ctx.targets``."""
    job = ctx.job
    case = f"{CHECK}/{job}"
    facts = ctx.targets
    res, w = facts.api, facts.window
    findings: list[Finding] = []
    if isinstance(res, PromError):
        if res.kind != "not-found":
            return CheckResult([query_failed(res, CHECK, job, case)], [case])
        findings.append(Finding("targets-api-unavailable", "warning", job,
                                f"{res.url} answered 404: no targets API (Mimir and Cortex have none); "
                                "target health is read from `up` instead, without scrape errors",
                                case=case, labels=(("job", job),)))
        return _from_up(ctx, facts.up, findings, case)
    if facts.missing:
        return _missing(ctx, findings, case)
    ratio = ctx.spec.alerts.scrape_slow_ratio
    reported: set[str] = set()
    for t in facts.targets:
        inst = t.instance
        labels = (("instance", inst), ("job", job))
        where, labels = _serving(ctx, inst, labels) if inst in facts.down else ("", labels)
        timeout = t.scrape_timeout or ctx.spec.exporter.scrape_timeout
        took = t.scrape_duration
        if inst in facts.flapping:
            # GPUs behind it come and go with the scrapes: one finding for the target, none per GPU
            reported.add(inst)
            findings.append(Finding("target-flapping", "error", inst,
                                    f"target {inst}{where} succeeded in only {facts.flapping[inst]:.0%} of its scrapes over the "
                                    f"last {w}, switching between up and down (now {t.health}; last error: "
                                    f"{t.last_error or 'none'}); each recovery resets the `for` of a down alert",
                                    hints.FLAPPING, labels=labels, case=case))
        elif t.health == "down":
            reported.add(inst)
            check, hint = _classify(t)
            findings.append(Finding(check, "error", inst,
                                    f"target {inst} ({t.scrape_url}){where} is down: {t.last_error or 'no error given'}; "
                                    f"last scrape took {took:.3f}s of a {timeout:g}s timeout", hint, labels=labels, case=case))
        elif t.health == "up" and timeout and took >= ratio * timeout:
            findings.append(Finding("scrape-slow", "warning", inst,
                                    f"last scrape of {inst} took {took:.3f}s, {took / timeout:.0%} of the {timeout:g}s "
                                    "scrapeTimeout", hints.SCRAPE_TIMEOUT, labels=labels, case=case))
    findings += _empty(ctx, facts.empty, reported, case)
    findings += scrapeinterval.findings(ctx, facts.targets, case)
    return CheckResult(partial(findings, res, case, CHECK, job), [case])


def _serving(ctx: Context, inst: str, labels: tuple) -> tuple[str, tuple]:
    """(`` of node N`` or `` of nodes A, B``, ``labels`` with the node label when one node) for a
    target whose series are gone now: the nodes whose GPUs it served within the lookback, from the
    inventory (an instance is a pod IP and port in Kubernetes, which names no node once the pod
    is gone); ``("", labels)`` when it served no GPU in that window."""
    nodes = sorted(ctx.inventory.nodes_of(inst))
    if not nodes:
        return "", labels
    if len(nodes) == 1:
        return f" of node {nodes[0]}", tuple(sorted(labels + ((ctx.labels.node, nodes[0]),)))
    shown = ", ".join(nodes[:5]) + (f" and {len(nodes) - 5} more" if len(nodes) > 5 else "")
    return f" of nodes {shown}", labels


def _missing(ctx: Context, findings: list[Finding], case: str) -> CheckResult:
    """target-missing; when dcgm-exporter series exist under other jobs (GPU Operator's
    ``nvidia-dcgm-exporter`` vs the chart's ``dcgm-exporter``), name them: one ``count by (job)``
    per required metric, at most two (never a regex over metric names)."""
    probes = [m.name for m in ctx.spec.required_metrics[:2]]
    answers = ctx.queries_at_now({m: f"count by (job) ({m})" for m in probes})
    jobs: dict[str, dict[str, int]] = {}
    for metric, ans in answers.items():
        if isinstance(ans, PromError):
            continue
        for item in ans.data:
            jobs.setdefault(item["metric"].get("job", ""), {})[metric] = count(item["value"][1])
    msg = f"no active target has job=\"{ctx.job}\"; per-GPU checks for this job are skipped"
    hint = hints.TARGET_MISSING
    if jobs:
        # per job, the count of the first probed metric it carries
        carried = "; ".join(f"job=\"{j}\" ({next(f'{c[m]} series of {m}' for m in probes if m in c)})"
                            for j, c in sorted(jobs.items()))
        msg += f". dcgm-exporter series exist under another job: {carried}"
        hint = (f"set exporter.job in the spec to the job that scrapes your exporter ({', '.join(sorted(jobs))}) and "
                "re-render: GPU Operator installs use nvidia-dcgm-exporter, the Helm chart uses the Service name; "
                "or relabel the job in your scrape config")
    findings.append(Finding("target-missing", "error", ctx.job, msg, hint, labels=(("job", ctx.job),), case=case))
    return CheckResult(findings, [case])


def _empty(ctx: Context, answer, reported: set[str], case: str) -> list[Finding]:
    """target-empty for targets up with 0 samples (not those ``reported`` down already)."""
    if isinstance(answer, PromError):
        return [query_failed(answer, CHECK, ctx.job, case)]
    out = []
    for item in answer.data:
        inst = item["metric"].get("instance", "?")
        if inst in reported:
            continue
        reported.add(inst)
        where, labels = _serving(ctx, inst, (("instance", inst), ("job", ctx.job)))
        out.append(Finding("target-empty", "error", inst, f"target {inst}{where} is up but its last scrape had 0 samples",
                           hints.TARGET_EMPTY, labels=labels, case=case))
    return out


def _from_up(ctx: Context, up, findings: list[Finding], case: str) -> CheckResult:
    if isinstance(up, PromError):
        findings.append(query_failed(up, CHECK, ctx.job, case))
        return CheckResult(findings, [case])
    if not up.data:
        return _missing(ctx, findings, case)
    for item in not_up(up):
        inst = item["metric"].get("instance", "?")
        if item["value"][1] != "1":
            where, labels = _serving(ctx, inst, (("instance", inst), ("job", ctx.job)))
            findings.append(Finding("target-down", "error", inst, f"up{{instance=\"{inst}\"}}{where} is {item['value'][1]}",
                                    hints.EXPORTER_DOWN, labels=labels, case=case))
    return CheckResult(partial(findings, up, case, CHECK, ctx.job), [case])
