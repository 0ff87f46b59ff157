"""Writing rendered files: atomic, only what changed, removing only what gpumon wrote before.

gpumon records the files it wrote in ``<out>/.gpumon-files``; a file that disappears from the
rendered set is removed only if it is listed there, so files users keep in ``output/`` are never
touched.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

MANIFEST = ".gpumon-files"


@dataclass
class Drift:
    """What differs between rendered files and a folder (paths relative to it, sorted)."""

    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)

    @property
    def any(self) -> bool:
        return bool(self.added or self.changed or self.removed)

    def lines(self, applied: bool = False) -> list[str]:
        """``+ path`` / ``~ path`` / ``- path`` lines for humans: what differs (``--check``), or
        with ``applied`` what was just written and removed."""
        words = ("new", "updated", "removed") if applied else ("missing", "differs", "no longer rendered")
        return ([f"+ {p} ({words[0]})" for p in self.added] + [f"~ {p} ({words[1]})" for p in self.changed]
                + [f"- {p} ({words[2]})" for p in self.removed])


def _manifest(out: Path) -> list[str]:
    try:
        return [ln for ln in (out / MANIFEST).read_text("utf-8").splitlines() if ln and not ln.startswith("#")]
    except FileNotFoundError:
        return []


def diff(files: dict[str, str], out: Path) -> Drift:
    """Compare rendered ``files`` (relative path -> text) with folder ``out``; writes nothing."""
    drift = Drift()
    for rel in sorted(files):
        path = out / rel
        if not path.exists():
            drift.added.append(rel)
        elif path.read_bytes() != files[rel].encode("utf-8"):
            drift.changed.append(rel)
    drift.removed = sorted(p for p in _manifest(out) if p not in files and (out / p).exists())
    return drift


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder and ``os.replace``,
    so readers never see a half-written file.

    Raises:
        OSError: when the folder cannot be created or written.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write(files: dict[str, str], out: Path) -> Drift:
    """Bring folder ``out`` in line with ``files``: write what is missing or differs, remove
    files gpumon wrote earlier that are no longer rendered, update the manifest.

    Returns:
        the :class:`Drift` that was applied.
    Raises:
        OSError: on a write or delete failure.
    """
    drift = diff(files, out)
    for rel in drift.added + drift.changed:
        atomic_write(out / rel, files[rel].encode("utf-8"))
    for rel in drift.removed:
        (out / rel).unlink(missing_ok=True)
        _prune_empty_dirs((out / rel).parent, out)
    manifest = "# files written by gpumon render; others in this folder are left alone\n" + "".join(
        f"{p}\n" for p in sorted(files))
    mpath = out / MANIFEST
    if not mpath.exists() or mpath.read_text("utf-8") != manifest:
        atomic_write(mpath, manifest.encode("utf-8"))
    return drift


def _prune_empty_dirs(folder: Path, stop: Path) -> None:
    while folder != stop and folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
        folder = folder.parent
