"""Read one side of ``gpumon diff``: a file, a directory, or ``git:REV:path`` (a file or
directory at a git revision, read with ``git ls-tree``/``git show`` in the current repository).
Rules and dashboards are read by the lint loader, so every input kind lint reads works here."""

from __future__ import annotations

import subprocess
from pathlib import Path

from ..readers import files, loader
from ..readers.model import Inputs


class SourceError(Exception):
    """A side cannot be read (missing path, unknown revision, git not available)."""


def read(ref: str, limits: files.Limits = files.DEFAULT) -> Inputs:
    """Load rules and dashboards from ``ref`` (path or ``git:REV:path``), each file within
    ``limits`` (:mod:`gpumon.readers.files`; at a git revision the size cap applies to blobs).

    Raises:
        SourceError: unreadable path, git failure, or YAML/JSON syntax errors (message lists them).
    """
    inputs = Inputs()
    if ref.startswith("git:"):
        rev, _, path = ref[4:].partition(":")
        if not rev:
            raise SourceError(f"{ref}: expected git:REV:path, e.g. git:origin/main:output")
        for name in _git_files(rev, path):
            _check_blob_size(rev, name, ref, limits)
            loader.load_text(_git(["show", f"{rev}:{name}"], ref), f"{name}", inputs)
    else:
        if not Path(ref).exists():
            raise SourceError(f"{ref}: no such file or directory")
        inputs = loader.load([ref], limits)
    if inputs.problems:
        raise SourceError("; ".join(f"{p.location}: {p.message}" for p in inputs.problems))
    return inputs


def _git(args: list[str], ref: str) -> str:
    try:
        proc = subprocess.run(["git", *args], capture_output=True, text=True, check=False)
    except OSError as exc:
        raise SourceError(f"{ref}: cannot run git: {exc}") from None
    if proc.returncode != 0:
        raise SourceError(f"{ref}: git {' '.join(args)}: {proc.stderr.strip() or 'failed'}")
    return proc.stdout


def _check_blob_size(rev: str, name: str, ref: str, limits: files.Limits) -> None:
    """Refuse a blob over the size cap before ``git show`` reads it into memory."""
    size = _git(["cat-file", "-s", f"{rev}:{name}"], ref).strip()
    if size.isdigit() and int(size) > limits.max_bytes:
        raise SourceError(f"{name} at {rev}: {size} bytes, over the cap of {limits.max_bytes} bytes per input file")


def _git_files(rev: str, path: str) -> list[str]:
    ref = f"git:{rev}:{path}"
    listing = _git(["ls-tree", "-r", "--name-only", "--full-name", rev, "--", path or "."], ref).splitlines()
    files = sorted(n for n in listing if n.endswith((".yaml", ".yml", ".json")))
    if not listing:
        raise SourceError(f"{ref}: no such path at revision {rev}")
    return files
