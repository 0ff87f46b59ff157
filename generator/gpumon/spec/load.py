"""Loading a spec: read the file within its bounds, parse YAML keeping positions, check it
against the JSON Schema and the semantic rules, then build the model."""

from __future__ import annotations

import dataclasses
import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from ..fields import known_fields
from ..readers import files as inputfiles
from .. import overrides as alert_overrides
from .build import _build
from .model import Spec
from .positions import _format_path, _position, _yaml_error_position
from .problems import Problem, SpecError
from .schemacheck import _dedupe, _schema_problems
from .semantic import _semantic_problems


#: bounds on the document itself (issue #15, finding 5): a spec is a few hundred lines; these stop
#: a YAML alias bomb (aliases expanding to millions of nodes) or deep nesting before they cost much
MAX_SPEC_BYTES = 1 << 20


#: values after YAML aliases are expanded: the bound every YAML input is held to (readers.files)
MAX_NODES = inputfiles.MAX_NODES


MAX_DEPTH = 32


def default_spec_path() -> Path:
    """Path of the bundled default spec: ``gpumon.yaml`` at the repository root in a checkout,
    ``gpumon/default/gpumon.yaml`` when installed from a wheel (pyproject force-includes it).

    Raises:
        FileNotFoundError: neither exists (a broken installation).
    """
    here = Path(__file__).resolve().parent.parent  # the gpumon package
    for candidate in (here.parent.parent / "gpumon.yaml", here / "default" / "gpumon.yaml"):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError("gpumon's bundled default spec is missing from the installation")


def load_spec(path: str | Path) -> Spec:
    """Load, validate and model a spec file.

    Args:
        path: the YAML file.
    Returns:
        the :class:`Spec`.
    Raises:
        SpecError: with every problem found (unreadable file, YAML syntax, schema, semantics),
            each with file, line, column and JSON path.
    """
    name = str(path)
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_SPEC_BYTES + 1)
    except OSError as exc:
        raise SpecError([Problem(name, 1, 1, "", f"cannot read spec: {exc.strerror or exc}")]) from None
    if len(raw) > MAX_SPEC_BYTES:
        raise SpecError([Problem(name, 1, 1, "", f"spec larger than {MAX_SPEC_BYTES >> 20} MiB")])
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        col = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise SpecError([Problem(name, line, col, "", f"not UTF-8 text (byte 0x{raw[exc.start]:02x}); save the "
                                 "spec as UTF-8")]) from None
    return parse_spec(text, name)


def parse_spec(text: str, name: str = "<spec>") -> Spec:
    """Like :func:`load_spec` on a string; ``name`` is used in error positions."""
    deep = _flow_too_deep(text) or _block_too_deep(text)
    if deep:
        raise SpecError([Problem(name, deep[0], deep[1], "", f"nested more than {MAX_DEPTH} levels deep")])
    try:  # the bounds of every YAML input: alias expansion, number length
        inputfiles.check_yaml(text)
    except inputfiles.Refused as exc:
        raise SpecError([Problem(name, exc.line, exc.column, "", str(exc))]) from None
    yaml = YAML(typ="rt")
    try:
        doc = yaml.load(text)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        raise SpecError([Problem(name, line, col, "", f"YAML syntax error: {exc.problem or exc}")]) from None
    except YAMLError as exc:  # the reader's errors (control characters) carry a position too
        line, col = _yaml_error_position(exc, text)
        raise SpecError([Problem(name, line, col, "", f"YAML error: {' '.join(str(exc).split())[:200]}")]) from None
    except RecursionError:
        raise SpecError([Problem(name, 1, 1, "", f"nested too deeply (at most {MAX_DEPTH} levels)")]) from None
    if not isinstance(doc, CommentedMap):
        raise SpecError([Problem(name, 1, 1, "", "the spec must be a YAML mapping (see gpumon.yaml)")])
    try:
        plain = _to_plain(doc, _Budget())
    except _TooBig as exc:
        raise SpecError([Problem(name, exc.line, exc.column, _format_path(exc.path), str(exc))]) from None
    except _WrongType as exc:
        raise SpecError([Problem(name, *_position(doc, exc.path), _format_path(exc.path), str(exc))]) from None
    # Report schema and semantic problems together, so a user fixes everything in one round.
    problems = _schema_problems(doc, plain, name) + _semantic_problems(doc, plain, name)
    warnings = _field_warnings(doc, plain, name)
    if problems:
        raise SpecError(_dedupe(problems), warnings)
    spec = _build(plain, name, lambda path: _position(doc, path, key_of_last=True))
    late: list[Problem] = []
    alert_overrides.label_problems(spec.overrides, spec.exporter.labels, lambda path, msg: late.append(
        Problem(name, *_position(doc, path, key_of_last=True), _format_path(path), msg)))
    if late:
        raise SpecError(late, warnings)
    # override names are checked when the rules are built (gpumon.rules.build_groups)
    return dataclasses.replace(spec, warnings=tuple(warnings))


def _field_warnings(doc: CommentedMap, plain: dict, name: str) -> list[Problem]:
    """A ``DCGM_*`` metric outside gpumon's field catalogue (:mod:`gpumon.fields`) is rendered
    with the spec's own ``kind:`` and ``unit:`` (both required), but may be a typo: warn, naming
    the closest catalogued field."""
    out = []
    known = known_fields()
    metrics = plain.get("metrics")
    for i, metric in enumerate(metrics if isinstance(metrics, list) else []):
        mname = metric.get("name") if isinstance(metric, dict) else None
        if not isinstance(mname, str) or not mname.startswith("DCGM_") or mname in known:
            continue
        hint = difflib.get_close_matches(mname, list(known), n=1, cutoff=0.8)
        line, col = _position(doc, ["metrics", i, "name"])
        out.append(Problem(name, line, col, f"metrics[{i}].name",
                           f"warning: {mname!r} is not in gpumon's DCGM field catalogue (DCGM 2.4.7 to 4.6.0, "
                           f"dcgm-exporter 2.4.7 to 4.8.2); its kind: {metric.get('kind')} and unit: "
                           f"{metric.get('unit')} are taken as written" + (f"; did you mean {hint[0]!r}?" if hint else "")))
    return out


class _TooBig(Exception):
    def __init__(self, message: str, path: list, line: int, column: int):
        super().__init__(message)
        self.path, self.line, self.column = path, line, column


class _WrongType(Exception):
    """A YAML value of a type no spec key takes (``!!binary``, a timestamp, a set)."""

    def __init__(self, message: str, path: list):
        super().__init__(message)
        self.path = path


#: YAML types the loader would otherwise turn into text nobody wrote (``b'dcgm'``, an ISO date)
_YAML_TYPES = {"bytes": "binary value (!!binary)", "TimeStamp": "timestamp", "datetime": "timestamp",
               "date": "date", "CommentedSet": "set (!!set)"}


def _wrong_type(node: Any, path: list) -> _WrongType:
    kind = _YAML_TYPES.get(type(node).__name__, f"{type(node).__name__} value")
    return _WrongType(f"a YAML {kind}, but spec values are strings, numbers, booleans, lists and mappings; "
                      "quote it if you mean the text", path)


@dataclass
class _Budget:
    nodes: int = 0


def _flow_too_deep(text: str) -> tuple[int, int] | None:
    """(line, column) where ``[``/``{`` flow collections nest past :data:`MAX_DEPTH`, or None.
    The YAML parser recurses once per level and takes seconds on thousands of them, so this is
    checked on the text first (quoted scalars skipped; a bare scalar with 32 open brackets is not
    a plausible spec value)."""
    depth, quote, line, col = 0, "", 1, 0
    for ch in text:
        col += 1
        if ch == "\n":
            line, col = line + 1, 0
            if quote == "'":
                continue
        if quote:
            if ch == quote:
                quote = ""
            continue
        if ch in "'\"" and depth:
            quote = ch
        elif ch in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return line, col
        elif ch in "]}":
            depth = max(0, depth - 1)
    return None


#: block-style levels the text scan allows (a multi-line string indents freely, so it is looser
#: than MAX_DEPTH, which the loaded document is held to with the key's position)
_BLOCK_SCAN_DEPTH = 4 * MAX_DEPTH


def _block_too_deep(text: str) -> tuple[int, int] | None:
    """(line, column) where block-style YAML (indentation and ``- `` entries) nests past
    :data:`_BLOCK_SCAN_DEPTH` levels, or None: the parser recurses per level and thousands of
    them exhaust Python's stack, an error that carries no position. Each line closes the open
    levels indented at or beyond it and opens one, plus one per leading ``- ``."""
    stack: list[int] = []
    for number, line in enumerate(text.split("\n"), 1):
        body = line.lstrip(" ")
        if not body or body.startswith("#"):
            continue
        col = len(line) - len(body)
        while stack and stack[-1] >= col:
            stack.pop()
        stack.append(col)
        while len(stack) <= _BLOCK_SCAN_DEPTH and (body.startswith("- ") or body == "-"):
            rest = body[2:].lstrip(" ")
            col += len(body) - len(rest)
            body = rest
            stack.append(col)
        if len(stack) > _BLOCK_SCAN_DEPTH:
            return number, col + 1
    return None


def _to_plain(node: Any, budget: _Budget, path: list | None = None, depth: int = 0) -> Any:
    """Plain dicts/lists/scalars; raises :class:`_TooBig` past :data:`MAX_DEPTH` levels or
    :data:`MAX_NODES` nodes (aliases count each time they are expanded)."""
    path = path or []
    budget.nodes += 1
    if budget.nodes > MAX_NODES or depth > MAX_DEPTH:
        too = (f"more than {MAX_NODES} values (YAML aliases expand to copies)" if budget.nodes > MAX_NODES
               else f"nested more than {MAX_DEPTH} levels deep")
        lc = getattr(node, "lc", None)
        line, col = (lc.line + 1, lc.col + 1) if lc is not None and lc.line is not None else (1, 1)
        raise _TooBig(f"the spec is {too}", path, line, col)
    if isinstance(node, dict):
        for key in node:
            if not (key is None or isinstance(key, (bool, int, float, str))):
                raise _wrong_type(key, path)      # str() of it is not what the file says
        return {str(k): _to_plain(v, budget, path + [str(k)], depth + 1) for k, v in node.items()}
    if isinstance(node, list):
        return [_to_plain(v, budget, path + [i], depth + 1) for i, v in enumerate(node)]
    if isinstance(node, bool) or node is None or isinstance(node, (int, float, str)):
        return node
    # the schema must see the YAML's real type: str() of bytes or a timestamp is text nobody wrote
    raise _wrong_type(node, path)
