"""Check 9 (only with the spec's ``kubernetes`` section): the layer under the metrics — how many GPUs
each node should report against how many it does, GPU nodes without an exporter target, exporter
pods restarting or OOM-killed within the lookback, the exporter DaemonSet, the device plugin.

The expected and reported counts are gpumon's recording rules (``gpumon.rules.kubernetes``,
names in ``gpumon.rules.names``); node-level conditions are the alert expressions themselves,
evaluated once now (no ``for``), so validate and the alerts cannot disagree. Pod, DaemonSet and
device-plugin facts are read from kube-state-metrics directly. A fixed set of about 15 instant
queries: nothing grows with GPUs or nodes (the missing UUIDs come from one query over the
recorded inventory, limited to nodes with missing GPUs). Without the recorded series (rule groups
not loaded) the count findings are ``inconclusive``, never "ok". Finding ids and order follow
docs/kubernetes.md ("What reads this section").

Why: GPUs that no exporter reports (a node without an exporter pod, a crash-looping pod, an
unhealthy device plugin) are invisible to every check that reads GPU series.
Silence: Remove the spec's `kubernetes` section (or give a `static` expectation), or leave the check
out with --checks.
"""

from __future__ import annotations

from collections import defaultdict

from ..durations import format_duration
from ..findings import Finding
from ..spec.kube import Kubernetes
from ..promapi import Answer, PromError
from ..rules import kubernetes as krules
from ..rules import names
from ..rules.promql import by, node_ids, selector
from . import hints
from .base import CheckResult, Context, gpu_list, partial, query_failed
from .facts import loaded_groups

CHECK = "kubernetes"
ORDER = 130
APPLIES = "only with the spec's kubernetes section"
FINDINGS = ("kube-state-metrics-missing", "kubernetes-inconclusive", "kubernetes-rules-not-loaded",
            "gpus-missing", "gpus-above-expected", "node-without-exporter", "node-gpu-capacity-missing",
            "exporter-restarts", "exporter-oom-killed", "exporter-daemonset-not-ready", "exporter-daemonset-missing",
            "device-plugin-unhealthy", CHECK)
LOOKS_AT = ('per node, expected GPUs (`nvidia_com_gpu` capacity / `units_per_gpu`, or the static expectation) vs '
            'physical GPUs reporting, with the UUIDs of the missing ones when the recorded inventory saw them '
            'within `--lookback`; GPU nodes with no exporter target (the `GpuNodeExporterMissing` expression and '
            'its `reason`); exporter containers restarted or OOM-killed within `--lookback` (with their node); '
            "DaemonSet ready vs desired; allocatable < capacity. Counts come from gpumon's recording rules: when "
            'the `<name>.kubernetes`/`<name>.inventory` groups are not loaded those findings are inconclusive, '
            'never "ok"; without kube-state-metrics the pod findings are inconclusive')
FINDING_NOTES = {'gpus-above-expected': 'warning', 'node-gpu-capacity-missing': 'warning', 'exporter-restarts': 'warning', 'exporter-daemonset-not-ready': 'warning', 'device-plugin-unhealthy': 'warning', 'kubernetes-rules-not-loaded': 'inconclusive'}
CASES = ("kube-state-metrics", "expected-gpus", "exporter-targets", "exporter-pods", "daemonset", "device-plugin")
_REASON_HINT = {"no_exporter_pod": hints.NO_EXPORTER_POD, "pod_not_scraped": hints.POD_NOT_SCRAPED,
                "no_gpu_series": hints.NO_GPU_SERIES}


def _case(name: str) -> str:
    return f"{CHECK}/{name}"


def queries(ctx: Context, k: Kubernetes) -> dict[str, str]:
    """``{key: PromQL}``: a fixed set, independent of the fleet size."""
    spec = ctx.spec
    nodes = by(node_ids(spec))
    window = format_duration(ctx.lookback)
    gpu_ids = by(node_ids(spec) + (ctx.labels.gpu, ctx.labels.gpu_index))
    out = {
        "expected": ctx.sel(names.NODE_GPUS_EXPECTED),
        "reporting": ctx.sel(names.NODE_GPU_DEVICES_REPORTING),
        "missing": krules.node_gpus_missing(spec, k).expr,
        # GPUs seen in the lookback that are not in the inventory now, on nodes missing GPUs
        "gone": (f"group by ({gpu_ids}) (max_over_time({ctx.sel(names.INVENTORY)}[{window}]))\n"
                 f"unless on ({nodes}, {ctx.labels.gpu}) {ctx.sel(names.INVENTORY)}\n"
                 f"and on ({nodes}) ({ctx.sel(names.NODE_GPUS_MISSING)} > 0)"),
        "above": (f"{ctx.sel(names.NODE_GPU_DEVICES_REPORTING)} - on ({nodes}) "
                  f"{ctx.sel(names.NODE_GPUS_EXPECTED)} > 0"),
        "no_exporter": krules.node_exporter_missing(spec, k).expr,
    }
    if k.expected_source == "capacity":
        out["capacity_missing"] = krules.capacity_missing(spec, k).expr
    if k.ksm_job is not None:
        ds = {"job": k.ksm_job, "namespace": k.exporter.namespace, "daemonset": k.exporter.daemonset}
        out |= {
            "ksm_up": selector("up", job=k.ksm_job),
            "restarts": f"{krules.restarts_in(k, ctx.lookback)} > 0",
            "oom": krules.oom_kills_in(spec, k, ctx.lookback),
            "pod_node": f"max by (namespace, pod, node) ({krules.pods_selector(k, 'kube_pod_info')})",
            "ds_desired": selector("kube_daemonset_status_desired_number_scheduled", **ds),
            "ds_ready": selector("kube_daemonset_status_number_ready", **ds),
            "ds_unavailable": selector("kube_daemonset_status_number_unavailable", **ds),
            "device_plugin": krules.device_plugin_unhealthy(spec, k).expr,
        }
    return out


def run(ctx: Context) -> CheckResult:
    """Findings: kube-state-metrics-missing, kubernetes-rules-not-loaded (inconclusive),
    gpus-missing, gpus-above-expected, node-without-exporter, node-gpu-capacity-missing,
    exporter-restarts, exporter-oom-killed, exporter-daemonset-not-ready,
    exporter-daemonset-missing, device-plugin-unhealthy. Nothing without the section."""
    k = ctx.spec.kubernetes
    if k is None:
        return CheckResult()
    cases = [_case(c) for c in CASES if k.ksm_job is not None or c in ("expected-gpus", "exporter-targets")]
    answers = ctx.queries_at_now(queries(ctx, k))
    findings: list[Finding] = []
    ksm_ok = True
    if k.ksm_job is not None:
        ksm_ok, found = _ksm(ctx, k, answers["ksm_up"])
        findings += found
    if _rules_loaded(ctx, findings):
        findings += _counts(ctx, k, answers)
        findings += _targets(ctx, k, answers)
    if k.ksm_job is not None and ksm_ok:
        pod_node = _pod_nodes(answers["pod_node"])
        findings += _restarts(ctx, k, answers["restarts"], answers["oom"], pod_node)
        findings += _daemonset(ctx, k, answers)
        findings += _device_plugin(ctx, k, answers["device_plugin"])
    return CheckResult(findings, cases)


def _ksm(ctx: Context, k: Kubernetes, up) -> tuple[bool, list[Finding]]:
    case = _case("kube-state-metrics")
    if isinstance(up, PromError):
        return False, [query_failed(up, CHECK, k.ksm_job, case)]
    if any(i["value"][1] == "1" for i in up.data):
        return True, []
    state = "is down" if up.data else "has no target"
    return False, [
        Finding("kube-state-metrics-missing", "error", k.ksm_job,
                f"job {k.ksm_job} {state}: exporter pods, the DaemonSet and node GPU capacity cannot be read",
                hints.KSM_MISSING, labels=(("job", k.ksm_job),), case=case),
        Finding("kubernetes-inconclusive", "inconclusive", k.ksm_job,
                "exporter restarts, OOM kills, the DaemonSet and the device plugin were not checked "
                "(no kube-state-metrics)", hints.KSM_MISSING, case=_case("exporter-pods"))]


def _rules_loaded(ctx: Context, findings: list[Finding]) -> bool:
    """True when the inventory and kubernetes rule groups are loaded (else an inconclusive finding):
    the counts are recorded series. Reads the shared ``ctx.rule_groups``."""
    loaded = loaded_groups(ctx.rule_groups)
    if loaded is None:
        findings.append(query_failed(ctx.rule_groups, CHECK, "rules", _case("expected-gpus")))
        return False
    want = [g.name for g in ctx.expected_groups if g.name.endswith((".kubernetes", ".inventory"))]
    absent = [g for g in want if g not in loaded]
    if absent:
        findings.append(Finding("kubernetes-rules-not-loaded", "inconclusive", ", ".join(absent),
                                f"rule group(s) {', '.join(absent)} not loaded: expected vs reported GPUs per node "
                                "and nodes without an exporter target were not checked", hints.K8S_RULES,
                                case=_case("expected-gpus")))
        return False
    return True


def _node_key(ctx: Context, metric: dict) -> tuple[str, ...]:
    return tuple(metric.get(label, "") for label in node_ids(ctx.spec))


def _node_name(ctx: Context, key: tuple[str, ...]) -> str:
    """``gpu-node-b`` (``cluster/gpu-node-b`` when a cluster label is set)."""
    return "/".join(v for v in key[1:] if v) or "?"


def _node_labels(ctx: Context, key: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(zip(node_ids(ctx.spec), key)))


def _values(ctx: Context, ans) -> dict[tuple, float]:
    if not isinstance(ans, Answer):
        return {}
    return {_node_key(ctx, i["metric"]): float(i["value"][1]) for i in ans.data if i["metric"].get("job") == ctx.job}


def _source(k: Kubernetes) -> str:
    if k.expected_source == "static":
        return "the static expectation"
    per = f" / {k.units_per_gpu}" if k.units_per_gpu != 1 else ""
    return f"kube_node_status_capacity {k.resource}{per}"


def _counts(ctx: Context, k: Kubernetes, answers: dict) -> list[Finding]:
    """gpus-missing (per node, with the UUIDs history knows) and gpus-above-expected."""
    case = _case("expected-gpus")
    for key in ("expected", "reporting", "missing", "gone", "above"):
        if isinstance(answers[key], PromError):
            return [query_failed(answers[key], CHECK, ctx.job, case)]
    expected, reporting = _values(ctx, answers["expected"]), _values(ctx, answers["reporting"])
    gone: dict[tuple, list] = defaultdict(list)
    for item in answers["gone"].data:
        gone[_node_key(ctx, item["metric"])].append(ctx.gpu(item["metric"]))
    window = format_duration(ctx.lookback)
    out = []
    for node in sorted(_values(ctx, answers["missing"])):
        want, have = expected.get(node, 0), reporting.get(node, 0)
        name = _node_name(ctx, node)
        known = gone.get(node, [])
        if known:
            which = f"not reporting now, seen in the last {window}: {gpu_list(known)}"
            if len(known) < want - have:
                which += f"; {int(want - have - len(known))} more never seen in the last {window}"
        else:
            which = f"no UUID of the missing GPUs was seen in the last {window} (try a longer --lookback)"
        out.append(Finding("gpus-missing", "error", name,
                           f"node {name}: {have:g}/{want:g} GPUs reporting (expected from {_source(k)}); {which}",
                           hints.GPUS_MISSING, labels=_node_labels(ctx, node), case=case))
    for item in answers["above"].data:
        if item["metric"].get("job") != ctx.job:
            continue
        node = _node_key(ctx, item["metric"])
        name = _node_name(ctx, node)
        out.append(Finding("gpus-above-expected", "warning", name,
                           f"node {name}: {reporting.get(node, 0):g} GPUs reporting, {expected.get(node, 0):g} expected "
                           f"(from {_source(k)})", hints.GPUS_ABOVE, labels=_node_labels(ctx, node), case=case))
    for key in ("expected", "reporting", "missing", "gone"):
        out = partial(out, answers[key], case, CHECK, ctx.job)
    return out


def _targets(ctx: Context, k: Kubernetes, answers: dict) -> list[Finding]:
    """node-without-exporter (with the alert's reason) and node-gpu-capacity-missing."""
    case = _case("exporter-targets")
    out = []
    ans = answers["no_exporter"]
    if isinstance(ans, PromError):
        return [query_failed(ans, CHECK, ctx.job, case)]
    expected = _values(ctx, answers["expected"])
    for item in sorted(ans.data, key=lambda i: _node_key(ctx, i["metric"])):
        if item["metric"].get("job") != ctx.job:
            continue
        node = _node_key(ctx, item["metric"])
        reason = item["metric"].get("reason", "")
        name = _node_name(ctx, node)
        what = {"no_exporter_pod": "no Running exporter pod on it",
                "pod_not_scraped": "an exporter pod runs there but no target of the job scrapes it",
                "no_gpu_series": "no series of the job carries it"}.get(reason, reason)
        out.append(Finding("node-without-exporter", "error", name,
                           f"node {name} should report {expected.get(node, 0):g} GPUs (from {_source(k)}) but has no "
                           f"exporter target and reports no GPU: {what} (reason {reason})",
                           _REASON_HINT.get(reason, ""), labels=_node_labels(ctx, node) + (("reason", reason),),
                           case=case))
    out = partial(out, ans, case, CHECK, ctx.job)
    cap = answers.get("capacity_missing")
    if isinstance(cap, PromError):
        out.append(query_failed(cap, CHECK, ctx.job, case))
    elif cap is not None:
        reporting = _values(ctx, answers["reporting"])
        for node in sorted(_values(ctx, cap)):
            name = _node_name(ctx, node)
            out.append(Finding("node-gpu-capacity-missing", "warning", name,
                               f"node {name} reports {reporting.get(node, 0):g} GPUs but advertises no {k.resource} "
                               "capacity", hints.CAPACITY_MISSING, labels=_node_labels(ctx, node), case=case))
    return out


def _pod_nodes(ans) -> dict[tuple[str, str], str]:
    if not isinstance(ans, Answer):
        return {}
    return {(i["metric"].get("namespace", ""), i["metric"].get("pod", "")): i["metric"].get("node", "")
            for i in ans.data}


def _restarts(ctx: Context, k: Kubernetes, restarts, oom, pod_node: dict) -> list[Finding]:
    """exporter-restarts (warning) and exporter-oom-killed (error), one per pod and container."""
    case = _case("exporter-pods")
    window = format_duration(ctx.lookback)
    out = []
    for ans in (restarts, oom):
        if isinstance(ans, PromError):
            return [query_failed(ans, CHECK, k.exporter.daemonset, case)]
    killed = {(i["metric"].get("namespace", ""), i["metric"].get("pod", ""), i["metric"].get("container", ""))
              for i in oom.data}
    counts = {(i["metric"].get("namespace", ""), i["metric"].get("pod", ""), i["metric"].get("container", "")):
              float(i["value"][1]) for i in restarts.data}
    for key in sorted(set(counts) | killed):
        ns, pod, container = key
        node = pod_node.get((ns, pod))
        on = f" on node {node}" if node else ""
        labels = (("container", container), ("namespace", ns), ("pod", pod))
        n = counts.get(key, 0)
        if key in killed:
            out.append(Finding("exporter-oom-killed", "error", f"{ns}/{pod}",
                               f"exporter container {container} of pod {ns}/{pod}{on} was OOM-killed (last termination "
                               f"reason OOMKilled) and restarted {n:g} time(s) in the last {window}",
                               hints.OOM, labels=labels, case=case))
        else:
            out.append(Finding("exporter-restarts", "warning", f"{ns}/{pod}",
                               f"exporter container {container} of pod {ns}/{pod}{on} restarted {n:g} time(s) in the "
                               f"last {window}", hints.RESTARTS, labels=labels, case=case))
    return partial(partial(out, restarts, case, CHECK, k.exporter.daemonset), oom, case, CHECK, k.exporter.daemonset)


def _daemonset(ctx: Context, k: Kubernetes, answers: dict) -> list[Finding]:
    """exporter-daemonset-not-ready (warning) / exporter-daemonset-missing (error)."""
    case = _case("daemonset")
    subject = f"{k.exporter.namespace}/{k.exporter.daemonset}"
    vals = {}
    for key in ("ds_desired", "ds_ready", "ds_unavailable"):
        ans = answers[key]
        if isinstance(ans, PromError):
            return [query_failed(ans, CHECK, subject, case)]
        vals[key] = max((float(i["value"][1]) for i in ans.data), default=None)  # max: HA kube-state-metrics
    labels = (("daemonset", k.exporter.daemonset), ("namespace", k.exporter.namespace))
    if vals["ds_desired"] is None:
        out = [Finding("exporter-daemonset-missing", "error", subject,
                       f"kube-state-metrics has no kube_daemonset_status_desired_number_scheduled for DaemonSet "
                       f"{subject}", hints.DS_MISSING, labels=labels, case=case)]
    else:
        desired, ready, unavailable = vals["ds_desired"], vals["ds_ready"] or 0, vals["ds_unavailable"] or 0
        out = []
        if desired - ready > 0 or unavailable > 0:
            out.append(Finding("exporter-daemonset-not-ready", "warning", subject,
                               f"DaemonSet {subject}: {ready:g} of {desired:g} pods ready, {unavailable:g} unavailable",
                               hints.DS_NOT_READY, labels=labels, case=case))
    return partial(out, answers["ds_desired"], case, CHECK, subject)


def _device_plugin(ctx: Context, k: Kubernetes, ans) -> list[Finding]:
    case = _case("device-plugin")
    if isinstance(ans, PromError):
        return [query_failed(ans, CHECK, k.resource, case)]
    out = []
    for item in sorted(ans.data, key=lambda i: i["metric"].get("node", "")):
        node = item["metric"].get("node", "?")
        out.append(Finding("device-plugin-unhealthy", "warning", node,
                           f"node {node}: {k.resource} allocatable {float(item['value'][1]):g} is below its capacity",
                           hints.DEVICE_PLUGIN, labels=(("node", node),), case=case))
    return partial(out, ans, case, CHECK, k.resource)
