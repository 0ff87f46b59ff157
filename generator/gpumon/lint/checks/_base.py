"""Helpers shared by the check modules (not a check)."""

from __future__ import annotations

from typing import Iterator

from ...findings import Finding, Location
from ...readers.model import Inputs, Query


def parsed(inputs: Inputs, origins: tuple[str, ...] = ("rule", "panel", "variable")) -> Iterator[tuple[Query, object]]:
    """``(query, ast)`` for every query of the given origins that parses."""
    for query in inputs.queries:
        if query.origin in origins and query.ast is not None:
            yield query, query.ast


def make(check: str, severity: str, subject: str, message: str, hint: str = "",
         location: Location | None = None, **labels: str) -> Finding:
    """A :class:`~gpumon.findings.Finding` with sorted labels."""
    return Finding(check=check, severity=severity, subject=subject, message=message, hint=hint,
                   location=location, labels=tuple(sorted((k, str(v)) for k, v in labels.items())))
