"""Open what ``gpumon lint``, ``gpumon diff`` and ``gpumon validate --dashboards`` read, bounded.

Those commands read files a pull request controls, so each file is read only when it is:

- a regular file: devices (``/dev/zero`` never ends), FIFOs (an open blocks) and sockets are
  refused; the check is ``fstat`` on the opened descriptor, so a swap after the check is caught;
- inside the tree being read: a symlink whose target resolves outside every path named on the
  command line is refused unless ``--follow-symlinks`` is given (a path named itself counts as
  the folder it is in);
- at most :data:`MAX_FILE_BYTES` long (read through a bounded buffer, so a file that grows while
  it is read is refused too);
- UTF-8 text;
- nested at most :data:`MAX_DEPTH` levels deep (YAML and JSON): parsers and the checks that walk
  the result recurse, and a 5,000-deep document exhausts the stack or takes gigabytes.

A refusal is a :class:`Refused` whose message names the reason; the loader turns it into an
``input-unreadable`` finding naming the file (the commands exit 2 for it).
"""

from __future__ import annotations

import itertools
import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

import yaml

#: bytes per input file (16 MiB: the largest Grafana dashboard JSON and rule files seen in the wild
#: are well under 2 MiB; a generous cap still stops /dev/zero-like inputs long before memory does)
MAX_FILE_BYTES = 16 << 20
#: nesting levels of a YAML or JSON document (Grafana dashboards nest about 10 deep)
MAX_DEPTH = 100
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_BRACKETS = re.compile(r"[\[\]{}]")


class Refused(Exception):
    """A file gpumon will not read; ``str()`` says why (without the file name)."""


@dataclass(frozen=True)
class Limits:
    """How inputs are read: ``follow_symlinks`` lets a symlink lead out of the tree being read,
    ``max_bytes`` caps each file. ``roots`` are the paths named on the command line (filled in
    by :meth:`for_paths`)."""

    follow_symlinks: bool = False
    max_bytes: int = MAX_FILE_BYTES
    roots: tuple[Path, ...] = field(default=())

    def for_paths(self, paths) -> "Limits":
        """These limits with the trees of ``paths`` (a file's tree is its folder)."""
        roots = []
        for raw in paths:
            path = Path(raw)
            base = path if is_dir(path) else path.parent
            try:
                roots.append(base.resolve())
            except (OSError, RuntimeError):
                continue
        return Limits(self.follow_symlinks, self.max_bytes, tuple(roots))


DEFAULT = Limits()


def is_dir(path: Path) -> bool:
    """``path.is_dir()``, False where a folder on the way may not be entered (``Path.is_dir``
    raises PermissionError there; reading the path then says "permission denied")."""
    try:
        return path.is_dir()
    except OSError:
        return False


def read_text(path: Path, limits: Limits = DEFAULT) -> str:
    """The UTF-8 text of ``path``, read within ``limits``.

    Raises:
        Refused: not a regular file, a symlink leading out of the tree, too large, not UTF-8.
        OSError: the file cannot be opened or read (permissions, vanished).
    """
    if path.is_symlink() and not limits.follow_symlinks:
        _check_inside(path, limits.roots)
    # O_NONBLOCK: opening a FIFO must not wait for a writer; O_NOCTTY: a terminal device never
    # becomes the controlling one. The type is checked on the descriptor actually read.
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise Refused(f"not a regular file ({_kind(info.st_mode)}); gpumon reads only regular files")
        if info.st_size > limits.max_bytes:
            raise Refused(f"{info.st_size} bytes, over the cap of {limits.max_bytes} bytes per input file")
        with os.fdopen(fd, "rb", closefd=True) as fh:
            fd = -1
            data = fh.read(limits.max_bytes + 1)
    finally:
        if fd >= 0:
            os.close(fd)
    if len(data) > limits.max_bytes:
        raise Refused(f"over the cap of {limits.max_bytes} bytes per input file (it grew while read)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Refused(f"not UTF-8 text (byte {exc.start})") from None


def _check_inside(path: Path, roots: tuple[Path, ...]) -> None:
    try:
        target = path.resolve(strict=True)
    except RuntimeError:
        raise Refused("a symlink loop") from None
    except OSError as exc:
        raise Refused(f"a symlink to a missing file ({exc.strerror or exc})") from None
    if not roots or not any(target == root or root in target.parents for root in roots):
        raise Refused(f"a symlink to {target}, outside the paths given; pass --follow-symlinks to read it")


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory")):
        if test(mode):
            return name
    return "not a regular file"


def json_depth(text: str) -> int:
    """How deep brackets nest in JSON ``text`` (strings skipped); linear, no recursion."""
    brackets = _BRACKETS.findall(_JSON_STRING.sub("", text))
    steps = (1 if b in "[{" else -1 for b in brackets)
    return max(itertools.accumulate(steps, initial=0))


def check_json_depth(text: str) -> None:
    """Raise :class:`Refused` when JSON ``text`` nests deeper than :data:`MAX_DEPTH`."""
    depth = json_depth(text)
    if depth > MAX_DEPTH:
        raise Refused(f"JSON nested {depth} levels deep, over the cap of {MAX_DEPTH}")


def loads_json(text: str):
    """``json.loads`` after the depth check (raises :class:`Refused` or ``json.JSONDecodeError``)."""
    check_json_depth(text)
    return json.loads(text)


def check_yaml_depth(text: str) -> None:
    """Raise :class:`Refused` when YAML ``text`` nests deeper than :data:`MAX_DEPTH`. Counts
    libyaml's events (a stream, not a tree: no recursion); a syntax error is left for the loader
    to report with its position."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    depth = 0
    try:
        for event in yaml.parse(text, Loader=loader):
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                if depth > MAX_DEPTH:
                    raise Refused(f"YAML nested more than {MAX_DEPTH} levels deep")
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
    except yaml.YAMLError as exc:
        # libyaml stops at its own limit (1,000 flow levels) before yielding the deep events
        if "nesting depth" in str(getattr(exc, "problem", "") or ""):
            raise Refused(f"YAML nested more than {MAX_DEPTH} levels deep") from None
        return  # a syntax error: the loader reports it with its position
