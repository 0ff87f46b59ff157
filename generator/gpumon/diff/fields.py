"""The change by DCGM field, first thing in a diff: removing ``DCGM_FI_DEV_MEM_CLOCK`` from the
spec reads as "removed: Memory clock panel, its alerts", however many files and rules that
touches.

A side's fields are the ``DCGM_FI_*`` metrics its panels and rules read, and the ``dcgm_field``
label values its rules write (gpumon's per-field recording rules and alerts).
"""

from __future__ import annotations

import re

from .comment import code as _c, text as _t

_FIELD = re.compile(r"\bDCGM_FI_[A-Z0-9_]+\b")


def rule_fields(rule) -> set[str]:
    """Fields a rule view is about: its ``dcgm_field`` label, else the fields its expression names."""
    label = dict(rule.labels).get("dcgm_field")
    return {label} if label else set(_FIELD.findall(rule.expr))


def side_fields(rules, panels) -> set[str]:
    """Every field named by ``rules`` (rule views) or read by ``panels`` ((panel, metrics) pairs)."""
    out = set()
    for r in rules:
        out |= rule_fields(r)
    for _, names in panels:
        out |= {n for n in names if n.startswith("DCGM_FI_")}
    return out


def _names(rules) -> str:
    return ", ".join(sorted({_c(r.name) for r in rules}))


def summary(field: str, verb: str, panels: list[tuple[str, str]], alerts: list, records: list,
            relisted: int) -> str:
    """One line: ``- **removed** `F`: Memory clock panel (fleet, detail); its alerts: ...``."""
    parts = []
    titles: dict[str, list[str]] = {}
    for title, dash in panels:
        titles.setdefault(title, []).append(dash)
    for title, dashes in titles.items():
        parts.append(f"{_t(title)} panel ({', '.join(_t(d) for d in dashes)})")
    its = "its" if verb == "removed" else "new"
    if alerts:
        parts.append(f"{its} alerts: {_names(alerts)}")
    if records:
        parts.append(f"{its} recording rules: {_names(records)}")
    if relisted:
        parts.append(f"{'dropped from' if verb == 'removed' else 'added to'} the field lists of {relisted} "
                     f"rule(s)/quer(ies)")
    return f"- **{verb}** {_c(field)}: " + ("; ".join(parts) if parts else "no panel or rule named it")
