"""Open what ``gpumon lint``, ``gpumon diff`` and ``gpumon validate --dashboards`` read, bounded.

Those commands read files a pull request controls, so each file is read only when it is:

- a regular file: devices (``/dev/zero`` never ends), FIFOs (an open blocks) and sockets are
  refused; the check is ``fstat`` on the opened descriptor, so a swap after the check is caught;
- inside the tree being read: a symlink whose target resolves outside every path named on the
  command line is refused unless ``--follow-symlinks`` is given (a path named itself counts as
  the folder it is in);
- not version-control metadata reached through a symlink: a target with a ``.git``, ``.hg``,
  ``.svn`` or ``.bzr`` folder on its path is refused unless ``--follow-symlinks`` is given, even
  inside the tree (``gpumon lint .`` at a repository root), since ``.git/config`` holds CI
  tokens (actions/checkout's ``extraheader``, GitLab's ``gitlab-ci-token`` remote URL);
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
import math
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError as RuamelYAMLError

#: bytes per input file (16 MiB: the largest Grafana dashboard JSON and rule files seen in the wild
#: are well under 2 MiB; a generous cap still stops /dev/zero-like inputs long before memory does)
MAX_FILE_BYTES = 16 << 20
#: nesting levels of a YAML or JSON document (Grafana dashboards nest about 10 deep)
MAX_DEPTH = 100
#: folders of version-control metadata: never read through a symlink without ``--follow-symlinks``
VCS_DIRS = frozenset({".git", ".hg", ".svn", ".bzr"})
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_BRACKETS = re.compile(r"[\[\]{}]")


class Refused(Exception):
    """A file gpumon will not read; ``str()`` says why (without the file name), ``line`` and
    ``column`` where (1, 1 when the whole file is refused)."""

    def __init__(self, message: str, line: int = 1, column: int = 1):
        super().__init__(message)
        self.line, self.column = line, column


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
        Refused: not a regular file, a symlink leading out of the tree or into version-control
            metadata, too large, not UTF-8.
        OSError: the file cannot be opened or read (permissions, vanished).
    """
    if not limits.follow_symlinks:
        if path.is_symlink():
            _check_inside(path, limits.roots)
        # a symlinked folder on the way counts too (a path named on the command line may go
        # through one): what matters is where the bytes come from
        check_not_vcs(path)
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


def vcs_folder(path: Path) -> Path | None:
    """The version-control folder (:data:`VCS_DIRS`) on ``path``'s way, or None."""
    for at, part in enumerate(path.parts):
        if part in VCS_DIRS:
            return Path(*path.parts[:at + 1])
    return None


def check_not_vcs(path: Path) -> None:
    """Raise :class:`Refused` when ``path`` leads, through a symlink (its own or a folder's on
    the way), into version-control metadata: ``.git/config`` holds CI tokens, and a pull request
    can add such a link anywhere. A path that names the metadata folder itself is the caller's
    choice and is read."""
    target = vcs_folder(Path(os.path.realpath(path)))
    if target is not None and target != vcs_folder(Path(os.path.abspath(path))):
        raise Refused(f"a symlink into {target} (version-control metadata, which can hold credentials "
                      f"such as a CI token); pass --follow-symlinks to read it")


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
    """``json.loads`` after the depth check, numbers bounded (raises :class:`Refused` or
    ``json.JSONDecodeError``): see :func:`decode_json`."""
    check_json_depth(text)
    return decode_json(text)


def decode_json(text: str):
    """``json.loads`` of ``text`` (its depth already checked) refusing, with their line and
    column, a number longer than :data:`MAX_NUMBER_CHARS` characters (Python converts integers
    of up to 4,300 digits) and numbers that are not finite (``NaN``, ``Infinity``, ``1e999``:
    not JSON, and no position or size is infinite).

    Raises:
        Refused: such a number.
        json.JSONDecodeError: a syntax error.
    """
    try:
        return json.loads(text, parse_int=_json_int, parse_float=_json_float, parse_constant=_json_constant)
    except _BadNumber as exc:
        line, column = _position_outside_strings(text, exc.token)
        shown = exc.token if len(exc.token) <= 20 else f"{exc.token[:12]}… ({len(exc.token)} characters)"
        raise Refused(f"the number {shown} {exc.why}", line, column) from None


class _BadNumber(Exception):
    def __init__(self, token: str, why: str):
        super().__init__(token)
        self.token, self.why = token, why


def _json_int(token: str) -> int:
    if len(token) > MAX_NUMBER_CHARS:
        raise _BadNumber(token, f"is longer than {MAX_NUMBER_CHARS} characters")
    return int(token)


def _json_float(token: str) -> float:
    if len(token) > MAX_NUMBER_CHARS:
        raise _BadNumber(token, f"is longer than {MAX_NUMBER_CHARS} characters")
    value = float(token)
    if not math.isfinite(value):
        raise _BadNumber(token, "is out of range (not a finite number)")
    return value


def _json_constant(token: str):
    raise _BadNumber(token, "is not JSON (NaN and Infinity have no place in a dashboard)")


def _position_outside_strings(text: str, token: str) -> tuple[int, int]:
    """1-based (line, column) of the first ``token`` outside JSON strings, (1, 1) if none."""
    blanked = _JSON_STRING.sub(lambda m: "\"" + " " * (len(m.group()) - 2) + "\"", text)
    at = blanked.find(token)
    if at < 0:
        return 1, 1
    return blanked.count("\n", 0, at) + 1, at - (blanked.rfind("\n", 0, at) + 1) + 1


def check_yaml(text: str, max_depth: int = MAX_DEPTH) -> None:
    """The bounds every YAML document gpumon reads is held to before it is loaded (rule files,
    PrometheusRule/ConfigMap/GrafanaDashboard objects, specs, fault files). Raise
    :class:`Refused` (with the line and column) when the text

    - nests deeper than ``max_depth`` levels: parsers and the checks that walk the result recurse;
    - has aliases that expand to more than :data:`MAX_NODES` values in all: an alias bomb (each
      anchor a list of nine aliases of the one before) is a few hundred bytes that expand to
      billions of values once anything walks, copies or prints the document;
    - holds a plain number longer than :data:`MAX_NUMBER_CHARS` characters: Python refuses to
      convert integers of more than 4,300 digits, and no setting needs such a number.

    Counts libyaml's events (a stream, not a tree: no recursion). Where libyaml stops at a syntax
    error, ruamel.yaml's parser (the loader's, which reads some YAML 1.2 that libyaml does not)
    counts the events again; its own syntax errors are left for the loader to report."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        _scan(yaml.parse(text, Loader=loader), max_depth)
    except yaml.YAMLError as exc:
        # libyaml stops at its own limit (1,000 flow levels) before yielding the deep events
        if "nesting depth" in str(getattr(exc, "problem", "") or ""):
            raise Refused(f"YAML nested more than {max_depth} levels deep") from None
        try:
            _scan(YAML(typ="rt").parse(text), max_depth)
        except (RuamelYAMLError, RecursionError):
            return  # a syntax error: the loader reports it with its position


def _scan(events, max_depth: int) -> None:
    """Raise :class:`Refused` at the first event of ``events`` (PyYAML's or ruamel.yaml's, whose
    classes share names and fields) past a bound of :func:`check_yaml`."""
    depth = total = expanded = 0
    sizes: dict = {}
    open_anchors: list[tuple] = []
    for event in events:
        kind = type(event).__name__
        if kind in ("MappingStartEvent", "SequenceStartEvent"):
            depth += 1
            total += 1
            if depth > max_depth:
                raise _refused(event, f"YAML nested more than {max_depth} levels deep")
            open_anchors.append((event.anchor, total - 1))
        elif kind in ("MappingEndEvent", "SequenceEndEvent"):
            depth -= 1
            anchor, before = open_anchors.pop()
            if anchor is not None:
                sizes[anchor] = total - before
        elif kind == "ScalarEvent":
            total += 1
            if event.anchor is not None:
                sizes[event.anchor] = 1
            if _long_number(event):
                raise _refused(event, f"a number of {len(event.value)} characters, over the cap of {MAX_NUMBER_CHARS}")
        elif kind == "AliasEvent":
            size = sizes.get(event.anchor, 1)
            total += size
            expanded += size
            if expanded > MAX_NODES:
                raise _refused(event, f"YAML aliases expand to more than {MAX_NODES} values (an alias bomb?); "
                                      "write the values out")


#: aliases in one YAML document expand to at most this many values (the spec's bound too)
MAX_NODES = 50_000
#: characters of one plain YAML number or JSON number (Python converts integers of up to 4,300
#: digits; 1,000 hexadecimal digits are about 1,200 decimal ones)
MAX_NUMBER_CHARS = 1000
_NUMBERISH = re.compile(r"[-+]?\.?[0-9][0-9a-fA-FxXoObB_:.eE+-]*")


def _long_number(event) -> bool:
    return (not event.style and event.implicit[0] and len(event.value) > MAX_NUMBER_CHARS
            and _NUMBERISH.fullmatch(event.value) is not None)


def _refused(event, message: str) -> "Refused":
    mark = event.start_mark
    return Refused(message, mark.line + 1, mark.column + 1)
