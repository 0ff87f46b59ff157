"""Writing rendered files: staged, all-or-nothing, removing only what gpumon wrote before.

gpumon records the files it wrote in ``<out>/.gpumon-files``, each with the SHA-256 of the
content it wrote (``<sha256>  <path>``, as ``sha256sum`` prints). The manifest lives in a folder
anyone can commit to (a pull request can plant lines in it), so it is never trusted: a line is
honoured only when it is a relative path of the shape gpumon renders (:data:`OWN_PATH`), inside
``out`` after resolving symlinks. Any other line is an :class:`OutputError` naming the line, and
nothing is written or removed. A file no longer rendered is removed only when its content still
has the recorded hash *and* carries gpumon's mark (:func:`carries_mark`: the generated-file header
of YAML, the runbook's first lines, a dashboard's top-level ``gpumon`` field). A hash alone proves
nothing: anyone can compute the hash of a hand-written ``rules/team-b.rules.yaml`` and plant a
manifest line with it, but that file does not say gpumon generated it. A line without a hash, or a
file edited since, is left alone and reported (``Drift.kept``). The journal's removals carry the
same proof, and its swaps are replayed only onto paths gpumon owns (:func:`recover`). A rendered
path holding a file gpumon did not write (no mark, not in the manifest) is an :class:`OutputError`,
not overwritten; one holding a FIFO, device or socket too (:mod:`gpumon.ownfiles` reads only
regular files).

A write is staged (issue #15, finding 8): every new file is first written, flushed and fsynced
as a temporary file beside its target (``.gpumon-tmp.<name>.<random>``); then a journal
(``<out>/.gpumon-journal``) lists the swaps, and only then are the temporary files renamed over
their targets and stale files removed. The journal is the commit point: a failure before it
leaves the old tree (temporary files are removed); a failure after it is rolled back from the
old contents kept in memory; a process killed after it (SIGKILL, power loss) leaves the journal,
and the next ``write`` completes the swap before doing anything else. Temporary files of gpumon's
naming (``.gpumon-tmp.<rendered name>.<8 characters>``, nothing else) left by a killed run are
removed by the next ``write``.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

# the ownership rules live in ownfiles; their names are this module's API too
from .ownfiles import (DASHBOARD_FIELD, GENERATED, MAX_OWN_BYTES, OWN_PATH, NotRegular, OutputError,  # noqa: F401
                       carries_mark, check_regular, inside, is_own_path, read_regular, sha256, wrote)

MANIFEST = ".gpumon-files"
JOURNAL = ".gpumon-journal"
TMP_PREFIX = ".gpumon-tmp."
#: temporary files of gpumon's naming: ``tempfile.mkstemp(prefix=".gpumon-tmp.<name>.")`` adds 8
#: characters of this alphabet (CPython's ``tempfile._RandomNameSequence``)
_TMP_NAME = re.compile(re.escape(TMP_PREFIX) + r"(.+)\.[a-z0-9_]{8}")
#: a manifest line: ``<sha256>  <path>``, or a bare path (written by earlier versions: no proof)
_MANIFEST_LINE = re.compile(r"(?:([0-9a-f]{64})  )?(.*)")
_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass
class Drift:
    """What differs between rendered files and a folder (paths relative to it, sorted)."""

    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    #: no longer rendered but not removed: not (or no longer) the content gpumon wrote there
    kept: list[str] = field(default_factory=list)

    @property
    def any(self) -> bool:
        return bool(self.added or self.changed or self.removed)

    def lines(self, applied: bool = False) -> list[str]:
        """``+ path`` / ``~ path`` / ``- path`` lines for humans: what differs (``--check``), or
        with ``applied`` what was just written and removed."""
        words = ("new", "updated", "removed") if applied else ("missing", "differs", "no longer rendered")
        return ([f"+ {p} ({words[0]})" for p in self.added] + [f"~ {p} ({words[1]})" for p in self.changed]
                + [f"- {p} ({words[2]})" for p in self.removed]
                + [f"! {p} (no longer rendered; left alone: not the content gpumon wrote there)" for p in self.kept])


def _manifest(out: Path) -> dict[str, str | None]:
    """The manifest's paths (each checked) with the SHA-256 recorded for each (None: a line without
    one); raises :class:`OutputError` naming the first bad line."""
    mpath = out / MANIFEST
    try:
        if mpath.is_symlink() or (mpath.exists() and not mpath.is_file()):
            raise OutputError(f"{mpath}: not a regular file; gpumon will not read a manifest through a symlink")
        raw = read_regular(mpath)
    except (FileNotFoundError, NotADirectoryError):
        raw = None
    except OSError as exc:
        raise OutputError(f"{mpath}: cannot read: {exc.strerror or exc}") from None
    if raw is None:
        return {}  # no manifest yet (a folder not created yet, or one a write will fail on)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise OutputError(f"{mpath}: not UTF-8 text; delete it and render again") from None
    paths: dict[str, str | None] = {}
    for number, raw_line in enumerate(text.splitlines(), 1):
        if not raw_line or raw_line.startswith("#"):
            continue
        digest, line = _MANIFEST_LINE.fullmatch(raw_line).groups()
        if not is_own_path(line):
            why = ("an absolute path" if line.startswith("/") or PurePosixPath(line).is_absolute()
                   else "a path leading out of the folder" if ".." in PurePosixPath(line).parts
                   else "not a path gpumon renders (rules/, dashboards/, kubernetes/, tests/, runbooks/)")
            raise OutputError(f"{mpath}:{number}: {line!r} is {why}; gpumon removes only files it wrote inside "
                              f"{out}/ (fix or delete that line)")
        if not inside(out, line):
            raise OutputError(f"{mpath}:{number}: {line!r} leads out of {out}/ through a symlink; gpumon removes "
                              "only files it wrote inside the folder")
        paths[line] = digest
    return paths


def _check_rendered(files: dict[str, str], out: Path) -> None:
    for rel in files:
        if not is_own_path(rel):
            raise OutputError(f"refusing to write {rel!r}: not a path gpumon renders (a bug: please report it)")
        if not inside(out, rel):
            raise OutputError(f"{out / rel}: leads out of {out}/ through a symlink; gpumon writes only inside it")
        if (out / rel).is_dir():
            raise OutputError(f"{out / rel}: is a directory, but gpumon renders a file there; move it away")
        check_regular(out / rel)    # a FIFO would block the read, a device never end


def _foreign(out: Path, changed: list[str], manifest: dict[str, str | None]) -> None:
    """Refuse to replace a file gpumon did not write: one that differs from the rendered text,
    carries no gpumon mark (:func:`carries_mark`) and is not in the manifest (a file gpumon wrote
    before the mark existed is; a manifest line only ever lets gpumon replace a path it renders)."""
    theirs = [rel for rel in changed if rel not in manifest
              and not carries_mark(rel, read_regular(out / rel) or b"")]
    if theirs:
        raise OutputError(f"{out / theirs[0]}: exists but gpumon did not write it (no `{GENERATED}` mark and not in "
                          f"{MANIFEST}); gpumon leaves files it did not write alone: move it away (or delete it) "
                          "and render again" + (f" ({len(theirs) - 1} more such file(s))" if len(theirs) > 1 else ""))


def diff(files: dict[str, str], out: Path) -> Drift:
    """Compare rendered ``files`` (relative path -> text) with folder ``out``; writes nothing.

    Raises:
        OutputError: a bad manifest line, a rendered path that is a directory, a FIFO, device or
            socket or leads out, or holds a file gpumon did not write (:func:`_foreign`).
    """
    _check_rendered(files, out)
    manifest = _manifest(out)
    drift = Drift()
    for rel in sorted(files):
        path = out / rel
        if not check_regular(path):
            drift.added.append(rel)
        elif read_regular(path) != files[rel].encode("utf-8"):
            drift.changed.append(rel)
    _foreign(out, drift.changed, manifest)
    for rel, digest in sorted(manifest.items()):
        if rel not in files and (out / rel).is_file():
            (drift.removed if wrote(out / rel, digest, rel) else drift.kept).append(rel)
    return drift


def _stage(path: Path, data: bytes) -> Path:
    """Write ``data`` to a fsynced temporary file beside ``path``; return its path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f"{TMP_PREFIX}{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return Path(tmp)


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder and ``os.replace``,
    so readers never see a half-written file.

    Raises:
        OSError: when the folder cannot be created or written.
    """
    tmp = _stage(path, data)
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _manifest_text(files: dict[str, str]) -> str:
    return ("# files written by gpumon render (sha256 and path); others in this folder, and these once "
            "edited, are left alone\n" + "".join(f"{sha256(files[p].encode('utf-8'))}  {p}\n" for p in sorted(files)))


def write(files: dict[str, str], out: Path) -> Drift:
    """Bring folder ``out`` in line with ``files``: write what is missing or differs, remove
    files gpumon wrote earlier that are no longer rendered, update the manifest; all or nothing.

    Returns:
        the :class:`Drift` that was applied.
    Raises:
        OutputError: a bad manifest line or rendered path (nothing is touched).
        OSError: on a write or delete failure (the old tree is restored).
    """
    if out.is_dir():
        recover(out, files)
        clean_stale(out, files)
    drift = diff(files, out)
    planned: dict[str, bytes] = {rel: files[rel].encode("utf-8") for rel in drift.added + drift.changed}
    manifest = _manifest_text(files).encode("utf-8")
    mpath = out / MANIFEST
    if read_regular(mpath) != manifest:
        planned[MANIFEST] = manifest
    if not planned and not drift.removed:
        return drift
    staged: dict[str, Path] = {}
    try:
        for rel, data in planned.items():
            staged[rel] = _stage(out / rel, data)
        old = {rel: data for rel in list(planned) + drift.removed if (data := read_regular(out / rel)) is not None}
        journal = {"replace": {rel: tmp.name for rel, tmp in staged.items()},
                   "remove": {rel: sha256(old[rel]) for rel in drift.removed if rel in old}}
        atomic_write(out / JOURNAL, json.dumps(journal, sort_keys=True).encode("utf-8"))
    except BaseException:
        for tmp in staged.values():
            tmp.unlink(missing_ok=True)
            _prune_empty_dirs(tmp.parent, out)
        raise
    try:
        _apply(out, journal)
    except BaseException:
        _roll_back(out, planned, old, staged)
        raise
    return drift


def _apply(out: Path, journal: dict) -> None:
    """Perform (or finish) the swaps a journal lists, then drop it. Idempotent."""
    for rel, tmp_name in journal.get("replace", {}).items():
        tmp = (out / rel).parent / tmp_name
        if tmp.is_file() and not tmp.is_symlink():
            os.replace(tmp, out / rel)
    for rel, digest in journal.get("remove", {}).items():
        if wrote(out / rel, digest, rel):  # only the content the journal says gpumon is replacing
            (out / rel).unlink(missing_ok=True)
            _prune_empty_dirs((out / rel).parent, out)
    (out / JOURNAL).unlink(missing_ok=True)


def _roll_back(out: Path, planned: dict[str, bytes], old: dict[str, bytes], staged: dict[str, Path]) -> None:
    """Put the old tree back after a failed swap (best effort: each step is tried)."""
    for rel in list(planned) + [r for r in old if r not in planned]:
        try:
            if rel in old:
                if not (out / rel).is_file() or (out / rel).read_bytes() != old[rel]:
                    atomic_write(out / rel, old[rel])
            else:
                (out / rel).unlink(missing_ok=True)
        except OSError:
            pass
    for tmp in staged.values():
        tmp.unlink(missing_ok=True)
    (out / JOURNAL).unlink(missing_ok=True)


def recover(out: Path, files: dict[str, str] | None = None) -> bool:
    """Finish a write a killed process left half done (its journal is present); True if one was.

    The journal lives in a folder a pull request can write to, so a swap is replayed only onto a
    path gpumon owns: one it is rendering now (``files``), or one its manifest lists whose file is
    absent or still what gpumon wrote; and only from a temporary file named for that path.

    Raises:
        OutputError: a journal that is not gpumon's (names a path gpumon does not own, a temporary
            file not of its naming); nothing is replaced or removed.
    """
    jpath = out / JOURNAL
    if jpath.is_symlink() or not check_regular(jpath):
        return False
    manifest = _manifest(out)

    def owned(rel: str) -> bool:
        if rel == MANIFEST or rel in (files or {}):
            return True
        return rel in manifest and (not (out / rel).exists() or wrote(out / rel, manifest[rel], rel))

    try:
        journal = json.loads(read_regular(jpath) or b"")
        replace, remove = journal["replace"], journal["remove"]
        ok = isinstance(replace, dict) and isinstance(remove, dict)
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        ok = False
    if ok:
        for rel, tmp in replace.items():
            named = _TMP_NAME.fullmatch(tmp) if isinstance(tmp, str) else None
            ok = ok and (rel == MANIFEST or (is_own_path(rel) and inside(out, rel))) \
                and named is not None and named.group(1) == PurePosixPath(rel).name and "/" not in tmp
            if ok and not owned(rel):
                raise OutputError(f"{jpath}: would replace {rel!r}, a file gpumon neither renders now nor wrote "
                                  "(not in its manifest with the content it wrote); nothing was changed: check "
                                  f"{out / rel}, delete {jpath.name} and render again")
        ok = ok and all(isinstance(r, str) and is_own_path(r) and inside(out, r) and isinstance(d, str)
                        and bool(_SHA256.fullmatch(d)) for r, d in remove.items())
    if not ok:
        raise OutputError(f"{jpath}: not a journal gpumon wrote; delete it and render again")
    _apply(out, journal)
    return True


def clean_stale(out: Path, files: dict[str, str]) -> list[Path]:
    """Remove temporary files of gpumon's naming that a killed run left in the folders gpumon
    writes (never following symlinks); returns what was removed."""
    removed = []
    names_by_dir: dict[str, set[str]] = {"": {MANIFEST, JOURNAL}}
    for rel in files:
        parent, _, name = rel.rpartition("/")
        names_by_dir.setdefault(parent, set()).add(name)
    for folder in sorted(names_by_dir):
        path = out / folder
        if path.is_symlink() or not path.is_dir():
            continue
        for entry in os.scandir(path):
            if not entry.is_file(follow_symlinks=False):
                continue
            own = _TMP_NAME.fullmatch(entry.name)
            if own and own.group(1) in names_by_dir[folder]:
                Path(entry.path).unlink(missing_ok=True)
                removed.append(Path(entry.path))
    return removed


def _prune_empty_dirs(folder: Path, stop: Path) -> None:
    while folder != stop and folder.is_dir() and not folder.is_symlink() and not any(folder.iterdir()):
        folder.rmdir()
        folder = folder.parent
