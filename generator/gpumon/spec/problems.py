"""Spec errors: where and what (file, line, column, path, message)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One spec error: where (file, 1-based line and column, JSON path) and what."""

    file: str
    line: int
    column: int
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}: {self.path or '<root>'}: {self.message}"


class SpecError(Exception):
    """Raised when a spec cannot be loaded; ``problems`` lists every error found, in file order."""

    def __init__(self, problems: list[Problem], warnings: list[Problem] | tuple[Problem, ...] = ()):
        self.problems = sorted(problems, key=lambda p: (p.file, p.line, p.column, p.path))
        #: the warnings the spec has besides (an uncatalogued field name may be the typo behind an
        #: error), so a user sees both in one round
        self.warnings = tuple(warnings)
        super().__init__("\n".join(str(p) for p in self.problems))
