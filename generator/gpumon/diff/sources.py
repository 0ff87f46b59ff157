"""Read one side of ``gpumon diff``: a file, a directory, or ``git:REV:path`` (a file or
directory at a git revision, read with ``git ls-tree -z``/``git cat-file`` in the current repository).
Rules and dashboards are read by the lint loader, so every input kind lint reads works here."""

from __future__ import annotations

import os
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
        if rev.startswith("-"):  # git would take it for an option
            raise SourceError(f"{ref}: a revision cannot start with '-'")
        for name in _git_files(rev, path):
            _check_blob_size(rev, name, ref, limits)
            blob = _git(["cat-file", "blob", f"{rev}:{name}"], ref)
            try:
                text = blob.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise SourceError(f"{name} at {rev}: not UTF-8 text (byte {exc.start})") from None
            loader.load_text(text, name, inputs)
    else:
        if not Path(ref).exists():
            raise SourceError(f"{ref}: no such file or directory")
        inputs = loader.load([ref], limits)
    if inputs.problems:
        raise SourceError("; ".join(f"{p.location}: {p.message}" for p in inputs.problems))
    return inputs


def _git(args: list[str], ref: str) -> bytes:
    """git's output as bytes: blobs are decoded as UTF-8 by the caller, NUL-separated listings
    (``-z``) split on NUL, so no name is ever read in git's quoted form."""
    try:
        proc = subprocess.run(["git", *args], capture_output=True, check=False)
    except OSError as exc:
        raise SourceError(f"{ref}: cannot run git: {exc}") from None
    if proc.returncode != 0:
        message = proc.stderr.decode("utf-8", "replace").strip()
        raise SourceError(f"{ref}: git {' '.join(args)}: {message or 'failed'}")
    return proc.stdout


def _check_blob_size(rev: str, name: str, ref: str, limits: files.Limits) -> None:
    """Refuse a blob over the size cap before ``git cat-file`` reads it into memory."""
    size = _git(["cat-file", "-s", f"{rev}:{name}"], ref).decode("ascii", "replace").strip()
    if size.isdigit() and int(size) > limits.max_bytes:
        raise SourceError(f"{name} at {rev}: {size} bytes, over the cap of {limits.max_bytes} bytes per input file")


def _git_files(rev: str, path: str) -> list[str]:
    ref = f"git:{rev}:{path}"
    # -z: names verbatim, NUL-terminated (without it git quotes names with non-ASCII or quote
    # characters, "donn\342\202\254es.json", and such a file would be left out of the diff)
    try:
        raw = _git(["ls-tree", "-r", "-z", "--name-only", "--full-name", rev, "--", path or "."], ref)
    except SourceError as exc:
        if "not a valid object name" in str(exc).lower() or "not a tree object" in str(exc).lower():
            raise SourceError(f"{exc}; {_unknown_revision(rev)}") from None
        raise
    listing = [os.fsdecode(n) for n in raw.split(b"\0") if n]
    files = sorted(n for n in listing if n.endswith((".yaml", ".yml", ".json")))
    if not listing:
        raise SourceError(f"{ref}: no such path at revision {rev}")
    return files


def _unknown_revision(rev: str) -> str:
    """What to do about a revision this clone does not have: a remote branch is fetched (CI
    checkouts are shallow and have no ``origin/main``), anything else is checked for a typo."""
    remote, _, branch = rev.partition("/")
    if branch and not any(c in rev for c in "~^@:"):
        return (f"this clone has no {rev}: fetch it first (`git fetch {remote} {branch}`); a shallow CI checkout "
                "has none (GitHub's actions/checkout needs fetch-depth: 0)")
    return f"this clone has no revision {rev}: name a branch, tag or commit it has (`git log --oneline -1 {rev}`)"
