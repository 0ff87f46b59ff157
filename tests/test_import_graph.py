"""The ``gpumon`` package has no import cycles: data flows one way (spec -> model -> renderers
-> writer; validate -> client -> checks -> findings -> reporters), and the CLI sits on top.

Imports are read with ``ast`` from every module (module level and inside functions; a lazy import
in a function still makes two modules depend on each other), and those under ``if TYPE_CHECKING:``
too: they never run, but a type hint that needs the other module is a dependency all the same
(a section model that names the spec it sits in is not a separate concept).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "generator" / "gpumon"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imports(tree: ast.AST):
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        yield from _imports(node)


def edges(known: dict[str, Path]) -> dict[str, set[str]]:
    """module -> gpumon modules it imports. ``from pkg import name`` points at ``pkg.name`` when
    that is a module, else at ``pkg``."""
    out: dict[str, set[str]] = {}
    for name, path in known.items():
        is_pkg = path.name == "__init__.py"
        deps = out.setdefault(name, set())
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                deps.update(a.name for a in node.names if a.name in known)
                continue
            if node.level:
                base = name.split(".") if is_pkg else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target not in known:
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                deps.add(sub if sub in known else target)
        deps.discard(name)
    return out


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as [a, b, ..., a], or None (iterative depth-first search)."""
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    for start in sorted(graph):
        if state.get(start):
            continue
        stack = [(start, iter(sorted(graph[start])))]
        path = [start]
        state[start] = 1
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                state[node] = 2
                stack.pop()
                path.pop()
            elif state.get(child) == 1:
                return path[path.index(child):] + [child]
            elif not state.get(child):
                state[child] = 1
                stack.append((child, iter(sorted(graph.get(child, ())))))
                path.append(child)
    return None


def test_the_finder_sees_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_the_reader_resolves_relative_imports():
    graph = edges(modules())
    assert "gpumon.spec" in graph["gpumon.rules"]
    assert "gpumon.durations" in graph["gpumon.spec.build"]


def test_the_reader_sees_type_checking_imports(tmp_path):
    """An import only a type checker runs is an edge too (``spec`` <-> ``sidecar`` was one)."""
    (tmp_path / "a.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import B\n")
    (tmp_path / "b.py").write_text("from .a import A\n")
    known = {"pkg.a": tmp_path / "a.py", "pkg.b": tmp_path / "b.py"}
    assert find_cycle(edges(known)) == ["pkg.a", "pkg.b", "pkg.a"]


@pytest.mark.parametrize("package", ["gpumon"])
def test_generator_imports_form_no_cycle(package):
    cycle = find_cycle(edges(modules()))
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_help_imports_no_heavy_library():
    """`gpumon --help` (and every command's --help) loads click and gpumon's command modules only:
    the dashboard SDK, the HTTP client, JSON Schema and rich load when a command runs."""
    import subprocess
    import sys

    code = ("import sys\nfrom click.testing import CliRunner\nfrom gpumon.cli import cli\n"
            "for args in (['--help'], ['render', '--help'], ['validate', '--help'], ['lint', '--help'], "
            "['diff', '--help'], ['init', '--help'], ['preview', '--help']):\n"
            "    assert CliRunner().invoke(cli, args).exit_code == 0, args\n"
            "print(' '.join(sorted(m for m in sys.modules)))")
    loaded = set(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                cwd=PACKAGE.parent).stdout.split())
    heavy = {"grafana_foundation_sdk", "httpx", "jsonschema", "rich", "ruamel", "jinja2", "promql_parser", "yaml"}
    assert not {m.split(".")[0] for m in loaded} & heavy
    assert "gpumon.cli" in loaded


def test_exit_codes_are_defined_in_one_module():
    """Every ``EXIT_*`` constant is assigned in :mod:`gpumon.exitcodes` only (the CLI and
    validate once each had their own copy); the others import it."""
    owners = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
            names = [t.id for tgt in targets for t in ast.walk(tgt) if isinstance(t, ast.Name)]
            if any(n.startswith("EXIT_") for n in names):
                owners.add(path.relative_to(PACKAGE).as_posix())
    assert owners == {"exitcodes.py"}, owners


#: modules still over the size a reader takes in at once, each waiting for a clean seam; the list
#: only shrinks (a module that grows past the limit, or a new one, fails)
LONG_MODULES: set[str] = set()
MAX_LINES = 400


def test_no_module_grows_past_400_lines():
    long = {str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
            if len(p.read_text("utf-8").splitlines()) > MAX_LINES}
    assert long <= LONG_MODULES, f"over {MAX_LINES} lines: {sorted(long - LONG_MODULES)}"
