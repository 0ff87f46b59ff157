"""Check 6: the rule groups gpumon renders for this spec are loaded (``/api/v1/rules``), each with
all its rules and ``health: ok``. Expected groups come from :func:`gpumon.rules.build_groups`,
the same code that writes the rule files, so the check cannot drift from what render wrote.

A group of this spec loaded from more than one file is reported too: two different copies (an
older render left in ``rule_files``, an old release's PrometheusRule still selected, or two specs
of the same ``name``) write their records alternately, so the records and the alerts read from them
flap between the two versions; identical copies evaluate everything twice.

Why: Rendered rules that the server never loaded (PrometheusRule selector labels, namespace
selector, a stale file) mean no alert at all, and nothing says so.
Silence: Leave the check out with --checks when rules run on a server this API does not show (e.g. a
separate ruler).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from ..findings import Finding
from ..promapi import PromError
from .base import CheckResult, Context, partial, query_failed
from .facts import loaded_groups

CHECK = "rules-loaded"
ORDER = 100
FINDINGS = ("rules-not-loaded", "rule-missing", "rule-unhealthy", "rules-loaded-twice", CHECK)
LOOKS_AT = ('`/api/v1/rules` against the groups `gpumon render` writes for this spec (same code: '
            '`gpumon.rules.build_groups`), with the PrometheusRule selector-label hint')


def _selector_hint(ctx: Context) -> str:
    labels = ", ".join(f"{k}={v}" for k, v in ctx.spec.prometheus_rule.labels) or "none"
    return ("load output/rules/*.yaml via rule_files, or apply output/kubernetes/ (PrometheusRule); the "
            f"PrometheusRule must carry every label of the Prometheus ruleSelector (spec labels: {labels}; "
            "kube-prometheus-stack ignores PrometheusRules without its `release` label), and the "
            "ruleNamespaceSelector must match its namespace (prometheus-operator#3767)")


def _key(rule: dict) -> tuple[str, str]:
    return ("alerting" if rule.get("type") == "alerting" else "recording", rule.get("name", ""))


def _copies(ctx: Context, answer, expected) -> list[Finding]:
    """``rules-loaded-twice`` for each expected group the rules API lists from more than one file:
    an error when the copies differ (by each rule's type, name and query as the server prints
    them: the same server prints both), a warning when they are the same. A global view (Thanos
    Query, the spec has a cluster label) lists each cluster's copy of a group: identical copies
    are expected there, and copies are compared by their rules' names only (servers of different
    versions print one query differently); different ones are clusters running different
    versions (an error)."""
    fields = ("type", "name") if ctx.labels.cluster else ("type", "name", "query")
    files: dict[str, dict[str, list]] = {}
    for group in answer.data or []:
        rules = sorted(tuple(str(r.get(k, "")) for k in fields) for r in group.get("rules") or [] if isinstance(r, dict))
        files.setdefault(group.get("name", ""), {}).setdefault(str(group.get("file", "")), []).append(rules)
    out = []
    for g in expected:
        copies = [(f, rules) for f, each in sorted(files.get(g.name, {}).items()) for rules in each]
        if len(copies) < 2:
            continue
        versions = {repr(rules) for _, rules in copies}
        where = "; ".join(f"{f or '?'} ({len(rules)} rules)" for f, rules in copies[:4]) + \
            (f"; and {len(copies) - 4} more" if len(copies) > 4 else "")
        if len(versions) > 1:
            out.append(Finding("rules-loaded-twice", "error", g.name,
                               f"rule group {g.name} is loaded {len(copies)} times in {len(versions)} different "
                               f"versions: {where}. Their records are written alternately, so the records and "
                               "the alerts that read them flap between the versions",
                               "keep one copy: remove the older render from rule_files, delete the old release's "
                               "PrometheusRule, or give each spec its own `name`; in a global view, roll the "
                               "same rendering out to every cluster", case=f"{CHECK}/{g.name}"))
        elif not ctx.labels.cluster:
            out.append(Finding("rules-loaded-twice", "warning", g.name,
                               f"rule group {g.name} is loaded {len(copies)} times, the same rules each time: "
                               f"{where}. Every rule is evaluated once per copy",
                               "keep one copy (rule_files and a PrometheusRule both load it, or two "
                               "PrometheusRules carry it)", case=f"{CHECK}/{g.name}"))
    return out


def run(ctx: Context) -> CheckResult:
    """Findings: rules-not-loaded (one for every absent group: they share a cause), rule-missing (some rules absent),
    rule-unhealthy (``health: err`` with its lastError), rules-loaded-twice (:func:`_copies`)."""
    expected = ctx.expected_groups
    cases = [f"{CHECK}/{g.name}" for g in expected]
    ans = ctx.rule_groups
    if isinstance(ans, PromError):
        return CheckResult([query_failed(ans, CHECK, g.name, f"{CHECK}/{g.name}") for g in expected], cases)
    loaded = loaded_groups(ans)
    findings: list[Finding] = []
    absent = [g for g in expected if g.name not in loaded]
    if absent:
        # one cause (the file is not loaded, or the server evaluates no rules) for every absent
        # group: one finding with one hint, not the same hint once per group
        hint = _selector_hint(ctx) if loaded else (
            "this server has no rule groups at all: it may not evaluate rules itself (VictoriaMetrics "
            "single-node: rules run in vmalert, visible here only with -vmalert.proxyURL; Thanos Query: "
            "from Thanos Ruler or sidecars); otherwise " + _selector_hint(ctx))
        what = (f"rule group {absent[0].name} is not loaded" if len(absent) == 1 else
                f"{len(absent)} of {len(expected)} rule groups are not loaded ({', '.join(g.name for g in absent)})")
        findings.append(Finding("rules-not-loaded", "error", absent[0].name if len(absent) == 1 else ctx.spec.name,
                                f"{what}: expected {sum(len(g.rules) for g in absent)} rules, found 0 "
                                f"({len(loaded)} other groups are loaded)", hint, case=f"{CHECK}/not-loaded"))
        cases = [c for c in cases if c.split("/", 1)[1] not in {g.name for g in absent}] + [f"{CHECK}/not-loaded"]
    for g in expected:
        case = f"{CHECK}/{g.name}"
        want = Counter(("alerting" if r.alert else "recording", r.name) for r in g.rules)
        out: list[Finding] = []
        if g.name not in loaded:
            continue
        have = Counter(_key(r) for r in loaded[g.name])
        missing = want - have
        if missing:
            names = sorted({name for _, name in missing})
            out.append(Finding("rule-missing", "error", g.name,
                               f"rule group {g.name} has {sum(have.values())} of {len(g.rules)} rules; missing: "
                               f"{', '.join(names)} ({sum(missing.values())} rules)",
                               "the loaded file is older or was edited: re-render and re-apply it "
                               "(`gpumon render --check` catches a stale output/)", case=case))
        for r in loaded[g.name]:
            if r.get("health") == "err":
                out.append(Finding("rule-unhealthy", "error", f"{g.name}/{r.get('name')}",
                                   f"rule {r.get('name')} fails to evaluate: {r.get('lastError', '')}",
                                   "check that the server supports every function the rule uses and that "
                                   "recording-rule inputs exist", case=case))
        findings += partial(out, ans, case, CHECK, g.name)
    # a partial answer (a store or ruler did not answer) may list a group once more or fewer
    findings += [replace(f, severity="inconclusive", message=f"{f.message} (partial response)")
                 if ans.partial and f.severity == "error" else f for f in _copies(ctx, ans, expected)]
    return CheckResult(findings, cases)
