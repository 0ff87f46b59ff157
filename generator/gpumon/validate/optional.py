"""Check: optional fields that no GPU reports at all — e.g. every DCGM_FI_PROF_* field missing
because the DCGM profiling module is not loaded (NVIDIA/dcgm-exporter#571), or a field the collectors
CSV does not list. Always a note (``info``): the spec allows these fields to be absent, so their
absence asks nothing of the reader; the message still says when they were reported earlier and are
gone now (an upgrade or config change dropped them; make the field required to be paged for that).
Reuses the presence check's queries: no extra query.

Why: Optional fields (profiling, fields the collector list may omit) come and go with the exporter's
configuration; knowing which are absent explains empty dashboard panels. Never an error.
Silence: Remove the field from the spec, or leave the check out with --checks (it never fails a
run).
"""

from __future__ import annotations

from ..durations import format_duration
from ..findings import Finding
from ..promapi import Answer
from ..rules.names import FIELD_LABEL
from . import hints
from .base import CheckResult, Context, gpu_count

CHECK = "optional"
ORDER = 60
FINDINGS = ("optional-absent",)
LOOKS_AT = ('optional fields no GPU reports now; the `DCGM_FI_PROF_*` fields get their own finding with the '
            'profiling-module hint (dcgm-exporter#571; not on consumer GPUs, some vGPU profiles). Never an error. '
            "No extra query (the presence check's)")
FINDING_NOTES = {'optional-absent': 'info: the spec allows them to be absent; the message says when they were reported earlier in the lookback'}
PROFILING_PREFIX = "DCGM_FI_PROF_"


def run(ctx: Context) -> CheckResult:
    """Finding ``optional-absent`` (info): one for the DCGM_FI_PROF_* fields, one for the
    others, listing the fields no GPU reports now."""
    optional = [m for m in ctx.spec.tracked_metrics if not m.required]
    cases = [f"{CHECK}/profiling", f"{CHECK}/fields"]
    if ctx.skip_gpu_checks or not optional:
        return CheckResult([], cases)
    inv = ctx.inventory
    answers = inv.answers
    if not inv.reporting:
        return CheckResult([], cases)  # nothing reports at all: presence and targets say why
    # a failed or partial "now" query proves nothing about absence
    unsure = [m.name for m in optional if not isinstance(answers.get(f"now|{m.name}"), Answer)
              or answers[f"now|{m.name}"].partial]
    absent = [m.name for m in optional if not inv.now.get(m.name) and m.name not in unsure]
    window = format_duration(ctx.lookback)
    findings = []
    for case, names, hint in (
            (cases[0], [n for n in absent if n.startswith(PROFILING_PREFIX)], hints.PROFILING),
            (cases[1], [n for n in absent if not n.startswith(PROFILING_PREFIX)], hints.OPTIONAL_ABSENT)):
        if not names:
            continue
        gone = [n for n in names if inv.seen.get(n)]
        what = "DCGM_FI_PROF_* (profiling) field(s)" if case == cases[0] else "optional field(s)"
        msg = f"none of the {gpu_count(inv.reporting)} GPUs reports the {what} {', '.join(names)}"
        if gone:
            msg += f"; reported earlier in the last {window} and gone now: {', '.join(gone)}"
        else:
            msg += f"; none seen in the last {window}"
        labels = ((FIELD_LABEL, names[0]), ("job", ctx.job)) if len(names) == 1 else (("job", ctx.job),)
        findings.append(Finding("optional-absent", "info", ctx.job if len(names) > 1 else names[0],
                                msg, hint, labels=tuple(sorted(labels)), case=case))
    if unsure:
        findings.append(Finding("optional-absent", "inconclusive", ctx.job,
                                f"could not tell whether these optional fields are reported: {', '.join(unsure)} "
                                "(query failed or partial response)", case=cases[1]))
    return CheckResult(findings, cases)
