"""The lint and validate checks, found in their folders rather than listed by hand.

One protocol for both tools. A check is a module (or a package) in its tool's folder
(:data:`LINT`: ``gpumon/lint/checks/``, :data:`VALIDATE`: ``gpumon/validate/``) that declares at
module level, as literals:

* its id: ``ID`` (lint) or ``CHECK`` (validate), e.g. ``"for-missing"``, ``"targets"``;
* ``ORDER``: an int placing it in reports and runs (lower first; two checks may not share one);
* optionally ``SEVERITY`` (lint: the default severity of its findings), ``APPLIES`` (when it runs,
  for help text: ``"only with the spec's kubernetes section"``) and ``SELECTABLE = False``
  (validate: runs by itself, not through ``--checks``: reachability, dashboards);
* validate only: ``FINDINGS``, the finding ids it reports (its own id among them when a failed or
  partial query leaves it inconclusive); ``LOOKS_AT``, what it looks at, for the checks table of
  docs/validate.md; optionally ``FINDING_NOTES``, {finding id: severity other than error} for
  that table;

and has a docstring the docs pages are generated from (:func:`sections`): what it checks (lint:
a summary, then ``What:``; validate: the text), ``Why:`` and ``Silence:`` paragraphs; and the
tool's entry point (``check(inputs, ctx)`` for lint, ``run(ctx)`` for validate). Helpers
in the same folder (``_base.py``, ``facts.py``, ``hints.py`` ...) declare no id and are skipped.

Finding reads the sources with :mod:`ast` and imports nothing, so ``--help`` text and the docs
tables come from the same place as the checks without loading them; :func:`modules` imports them.
A new check is one new module (plus its test and its example): nothing else lists it.
"""

from __future__ import annotations

import ast
import importlib
import re
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

_HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Tool:
    """Where a tool's checks live and what they declare."""

    name: str           #: ``lint`` or ``validate``
    package: str        #: the dotted package holding the check modules
    id_attr: str        #: the module constant holding the check id
    entry: str          #: the function the tool calls

    @property
    def folder(self) -> Path:
        return _HERE.joinpath(*self.package.split(".")[1:])


LINT = Tool("lint", "gpumon.lint.checks", "ID", "check")
VALIDATE = Tool("validate", "gpumon.validate", "CHECK", "run")


@dataclass(frozen=True)
class CheckInfo:
    """What a check says about itself (read from its source, not imported)."""

    tool: str
    id: str
    order: int
    module: str                 #: dotted module name, e.g. ``gpumon.lint.checks.for_missing``
    path: Path                  #: its source file (``__init__.py`` for a package)
    doc: str                    #: the module docstring
    severity: str | None = None
    applies: str = ""
    selectable: bool = True

    @property
    def source(self) -> str:
        """The source path relative to the repository (``generator/gpumon/...``), for docs."""
        return "generator/" + self.path.relative_to(_HERE.parent).as_posix()


def sections(doc: str) -> dict[str, str]:
    """A check docstring split into ``summary`` (the text before ``What:``, without the leading
    id prefix), ``what``, ``why`` and ``silence`` (``What:`` / ``Why:`` / ``Silence:``
    paragraphs), each joined into one line. Missing sections are empty strings (a validate
    check's docstring has no ``What:``: its text before ``Why:`` is the summary)."""
    out = {"summary": [], "what": [], "why": [], "silence": []}
    current = "summary"
    for line in doc.strip().splitlines():
        marker = re.match(r"^(What|Why|Silence):\s*", line)
        if marker:
            current = marker.group(1).lower()
            line = line[marker.end():]
        out[current].append(line.strip())
    joined = {k: " ".join(v for v in lines if v) for k, lines in out.items()}
    joined["summary"] = re.sub(r"^``[\w-]+``:\s*", "", joined["summary"])
    return joined


class CheckError(ValueError):
    """A check module breaks the protocol (two checks with one id or one ``ORDER``)."""


def _constants(tree: ast.Module) -> dict[str, object]:
    out: dict[str, object] = {}
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else \
            node.target if isinstance(node, ast.AnnAssign) and node.value is not None else None
        if isinstance(target, ast.Name) and target.id.isupper():
            try:
                out[target.id] = ast.literal_eval(node.value)
            except ValueError:
                continue        # computed at import: not part of the protocol
    return out


def _functions(tree: ast.Module) -> set[str]:
    return {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _candidates(tool: Tool):
    for path in sorted(tool.folder.iterdir()):
        if path.name.startswith(("_", ".")):
            continue
        if path.suffix == ".py":
            yield path, f"{tool.package}.{path.stem}"
        elif (path / "__init__.py").is_file():
            yield path / "__init__.py", f"{tool.package}.{path.name}"


def find(tool: Tool) -> list[CheckInfo]:
    """Every check of ``tool``, in ``ORDER``.

    Raises:
        CheckError: two checks declare one id or one ``ORDER``.
    """
    found: list[CheckInfo] = []
    for path, module in _candidates(tool):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        consts = _constants(tree)
        cid, order = consts.get(tool.id_attr), consts.get("ORDER")
        if not isinstance(cid, str) or not isinstance(order, int) or tool.entry not in _functions(tree):
            continue
        found.append(CheckInfo(tool.name, cid, order, module, path, ast.get_docstring(tree) or "",
                               consts.get("SEVERITY"), consts.get("APPLIES", ""), consts.get("SELECTABLE", True)))
    for attr in ("id", "order"):
        seen: dict = {}
        for info in found:
            other = seen.setdefault(getattr(info, attr), info)
            if other is not info:
                raise CheckError(f"{tool.name} checks {other.module} and {info.module} share "
                                 f"{'the id' if attr == 'id' else 'ORDER'} {getattr(info, attr)!r}")
    return sorted(found, key=lambda i: i.order)


def modules(tool: Tool, selectable_only: bool = False) -> list[ModuleType]:
    """The check modules of ``tool``, imported, in ``ORDER`` (only those ``--checks`` may pick with
    ``selectable_only``)."""
    return [importlib.import_module(i.module) for i in find(tool) if i.selectable or not selectable_only]


def ids(tool: Tool, selectable_only: bool = False) -> list[str]:
    """The check ids of ``tool`` in ``ORDER``, without importing the checks."""
    return [i.id for i in find(tool) if i.selectable or not selectable_only]
