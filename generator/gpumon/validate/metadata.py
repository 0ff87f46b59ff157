"""Check 8: what the exporter declares and carries, against the spec.

``type-mismatch`` (info): the ``# TYPE`` the exporter declares (``/api/v1/metadata``) differs from
the spec's kind, e.g. DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL typed counter although it goes down
(dcgm-exporter#417): rate() on it reads every drop as a reset.
``label-limit`` (warning, when a limit is set — ``--backend mimir`` sets Mimir's default 30):
series of the first required metric with more label names than the limit; Mimir rejects those
samples (dcgm-exporter#585: pod labels copied onto GPU series). One metadata
request per metric and one series request in all: nothing grows with the number of GPUs but
the size of that one series answer.

Why: A `# TYPE` that differs from the spec's kind makes rules use the wrong functions; series with
more labels than Mimir accepts are dropped at ingestion.
Silence: Set the metric's `kind` in the spec, do not pass --label-limit, or leave the check out with
--checks.
"""

from __future__ import annotations

from ..findings import Finding
from ..promapi import PromError
from ..rules.names import FIELD_LABEL
from .base import CheckResult, Context, answered, partial, query_failed

CHECK = "metadata"
ORDER = 120
FINDINGS = ("type-mismatch", "label-limit", CHECK)
LOOKS_AT = ("the `# TYPE` the exporter declares (`/api/v1/metadata`) against the spec's kind "
            '(NVIDIA/dcgm-exporter#417, NVLINK_BANDWIDTH_TOTAL is typed counter but goes down); with '
            '`--label-limit N` (`--backend mimir`: 30) series of the first required metric carrying more label '
            'names than Mimir accepts (NVIDIA/dcgm-exporter#585)')
FINDING_NOTES = {'type-mismatch': 'info', 'label-limit': 'warning'}


def calls(ctx: Context) -> dict[str, tuple]:
    """The API calls :func:`run` makes (the run prefetches them): one metadata request per spec'd
    metric and, with ``--label-limit``, the first required metric's series."""
    out = {m.name: ("metadata", m.name) for m in ctx.spec.metrics}
    if ctx.label_limit and ctx.spec.required_metrics and not ctx.skip_gpu_checks:
        out["|series"] = ("series", ctx.sel(ctx.spec.required_metrics[0].name), ctx.now - 300, ctx.now)
    return out


def run(ctx: Context) -> CheckResult:
    """Findings type-mismatch (info) and label-limit (warning)."""
    metrics = ctx.spec.metrics
    cases = [f"{CHECK}/{m.name}" for m in metrics]
    answers = ctx.run(calls(ctx))
    findings: list[Finding] = []
    for m, case, ans in answered(CHECK, metrics, answers, findings):
        declared = sorted({d.get("type", "") for d in ans.data} - {"", "unknown"})
        out = []
        if declared and declared != [m.kind]:
            out.append(Finding("type-mismatch", "info", m.name,
                               f"the exporter declares {m.name} as {', '.join(declared)}; the spec says {m.kind}",
                               "gpumon's rules follow the spec; make sure your own rules and dashboards do too "
                               "(rate()/increase() only on real counters)" if m.kind == "gauge" else
                               "check the exporter's collectors CSV and the spec's kind",
                               labels=((FIELD_LABEL, m.name),), case=case))
        findings += partial(out, ans, case, CHECK, m.name)
    if "|series" in answers:
        findings += _label_limit(ctx, answers["|series"])
        cases.append(f"{CHECK}/label-limit")
    return CheckResult(findings, cases)


def _label_limit(ctx: Context, ans) -> list[Finding]:
    case = f"{CHECK}/label-limit"
    if isinstance(ans, PromError):
        return [query_failed(ans, CHECK, "label-limit", case)]
    over = [s for s in ans.data if len(s) > ctx.label_limit]
    if not over:
        return partial([], ans, case, CHECK, "label-limit")
    worst = max(over, key=len)
    extra = sorted(k for k in worst if k.startswith(("label_", "exported_")) or k in ("pod", "namespace", "container"))
    name = ctx.spec.required_metrics[0].name
    return partial([Finding("label-limit", "warning", name,
                            f"{len(over)} series of {name} carry more than {ctx.label_limit} label names "
                            f"(up to {len(worst)}; e.g. {', '.join(extra[:8]) or ', '.join(sorted(worst)[:8])})",
                            "a backend with a label-name limit (Mimir: max_label_names_per_series, default 30) "
                            "rejects these samples: drop pod labels (dcgm-exporter enablePodLabels, "
                            "labeldrop in metricRelabelings) or raise the limit",
                            labels=((FIELD_LABEL, name), ("job", ctx.job)), case=case)], ans, case, CHECK, "label-limit")
