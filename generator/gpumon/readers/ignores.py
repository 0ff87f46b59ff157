"""Ignore comments in rule files: ``# gpumon-lint: ignore <check-id>[,<check-id>...]`` on a rule's
lines or on the comment lines right above it silences those checks for that rule; ``# gpumon-lint:
ignore-file <check-id>...`` anywhere in a YAML file silences them for the whole file (also for
dashboards in ConfigMaps). ``all`` silences every check."""

from __future__ import annotations

import re

from .model import Inputs

_IGNORE = re.compile(r"#\s*gpumon-lint:\s*(ignore-file|ignore)\b\s*([\w\-, ]*)")


def collect_ignores(lines: list[str], name: str, rule_starts: list, inputs: Inputs) -> None:
    starts = sorted(line for line, _ in rule_starts)
    spans = []
    for i, first in enumerate(starts):
        last = starts[i + 1] - 1 if i + 1 < len(starts) else len(lines)
        spans.append((first, last))
    out = inputs.ignores.setdefault(name, [])
    for idx, line in enumerate(lines, start=1):
        match = _IGNORE.search(line)
        if not match:
            continue
        ids = {x for x in re.split(r"[\s,]+", match.group(2).strip()) if x} or {"all"}
        if match.group(1) == "ignore-file":
            out.append((1, max(len(lines), 1), ids))
            continue
        target = _ignore_target(lines, idx, spans)
        if target:
            out.append((target[0], target[1], ids))


def _ignore_target(lines: list[str], line_no: int, spans: list) -> tuple[int, int] | None:
    """The rule span an ignore comment on ``line_no`` (1-based) applies to: the next rule when
    only comments/blank lines separate them, else the rule containing the comment."""
    for first, last in spans:
        if first > line_no:
            between = lines[line_no:first - 1]
            if all(not ln.strip() or ln.strip().startswith("#") for ln in between):
                return (first, last)
            break
    for first, last in spans:
        if first <= line_no <= last:
            return (first, last)
    return None

