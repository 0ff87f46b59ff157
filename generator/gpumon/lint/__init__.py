"""``gpumon lint``: static checks of Prometheus rule files, PrometheusRule objects and Grafana
dashboards (plain JSON or in ConfigMaps) against the spec and dcgm-exporter's field lists.

Usage from Python::

    report = lint(["output/"], spec)          # a gpumon.findings.Report
    print(reporters.render(report, "text"))

One module per check in ``generator/gpumon/lint/checks/``; :func:`describe` lists them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from ..applysize import BUDGET
from ..checkfind import sections
from ..findings import SEVERITIES, Report
from ..rules import RuleGroup, build_groups
from ..spec import Spec
from ..readers import loader
from ..readers.model import UNREADABLE
from ..docpages import LINT_DIR, page_uri
from . import context
from .checks import ALL as CHECKS

__all__ = ["CHECKS", "check_ids", "describe", "lint", "failing", "sections"]


def check_ids() -> list[str]:
    """Ids of every check, in report order (plus ``input-unreadable`` for unreadable files)."""
    return [m.ID for m in CHECKS]


def describe() -> list[tuple[str, str, str]]:
    """``(id, default severity, docstring)`` of every check."""
    return [(m.ID, m.SEVERITY, (m.__doc__ or "").strip()) for m in CHECKS]


def lint(paths: Iterable[str | Path], spec: Spec, disable: Iterable[str] = (),
         limits: loader.inputfiles.Limits = loader.inputfiles.DEFAULT, max_object_bytes: int = BUDGET,
         skip_other: bool = False, groups: list[RuleGroup] | None = None) -> Report:
    """Lint every rule file, PrometheusRule and dashboard under ``paths``.

    Args:
        paths: files and directories (walked recursively).
        spec: the loaded spec (metric kinds, labels, intervals, rule selector labels).
        disable: check ids to skip.
        limits: how files are read (symlinks, size and nesting caps; :mod:`gpumon.readers.files`).
        max_object_bytes: the most bytes a Kubernetes object's last-applied annotation may take
            (``object-too-large-to-apply``; default 90 % of the API server's limit).
        skip_other: named files holding no rules or dashboards are skipped, not unreadable.
        groups: the rule groups built from ``spec`` (:func:`gpumon.rules.build_groups`), whose
            recording rules are known names; built here when not given.
    Returns:
        a Report (tool ``gpumon lint``); unreadable input appears as ``input-unreadable`` findings.
    Raises:
        ValueError: an unknown id in ``disable``.
    """
    disabled = set(disable)
    unknown = disabled - set(check_ids()) - {UNREADABLE}
    if unknown:
        raise ValueError(f"unknown check id(s): {', '.join(sorted(unknown))}; see `gpumon lint --list-checks`")
    inputs = loader.load(paths, limits, skip_other)
    ctx = context.build(spec, inputs, build_groups(spec) if groups is None else groups)
    ctx.max_object_bytes = max_object_bytes
    report = Report(tool="gpumon lint")
    report.findings.extend(p for p in inputs.problems if UNREADABLE not in disabled)
    for module in CHECKS:
        if module.ID in disabled:
            continue
        found = [f for f in module.check(inputs, ctx) if not inputs.ignored(f.check, f.location)]
        report.findings.extend(found)
        if not found:
            report.checks.append(f"{module.ID}/")
    report.findings = _dedupe(report.findings)
    report.summary = {
        "inputs": f"{len(inputs.files)} files: {len(inputs.rules)} rules, {len(inputs.objects)} PrometheusRule "
                  f"objects, {len(inputs.dashboards)} dashboards, {len(inputs.queries)} PromQL queries",
        "spec": spec.path,
    }
    report.docs = {m.ID: (_help_text(m), page_uri(LINT_DIR, m.ID)) for m in CHECKS}
    skipped = ([f"{len(inputs.templates)} Helm/Go template files (render them to lint them)"] if inputs.templates else []) \
        + ([f"{len(inputs.others)} files with no rules or dashboards"] if inputs.others else [])
    if skipped:
        report.summary["skipped"] = "; ".join(skipped)
    return report


def _help_text(module) -> str:
    parts = {k: v.replace("``", "`") for k, v in sections(module.__doc__ or "").items()}
    return " ".join([parts["summary"]] + [f"{k.capitalize()}: {parts[k]}" for k in ("what", "why", "silence")
                                          if parts[k]])


def _dedupe(findings: list) -> list:
    seen, out = set(), []
    for f in findings:
        key = (f.check, f.severity, f.subject, f.message, f.location)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


def failing(report: Report, fail_on: str) -> bool:
    """True when a finding is at or above ``fail_on`` (a severity, or ``never``).
    ``inconclusive`` never fails a lint run."""
    if fail_on == "never":
        return False
    limit = SEVERITIES.index(fail_on)
    return any(SEVERITIES.index(f.severity) <= limit for f in report.findings if f.severity != "inconclusive")
