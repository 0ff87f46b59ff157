"""Positions in what the linter reads: ruamel.yaml's line/column marks of YAML keys and items, a
snippet of a YAML scalar mapped back to its file line, and a JSON pointer mapped to the line of the
key it ends at (JSON is YAML 1.2 flow syntax, so the same loader gives each key's line without a
hand-written JSON parser)."""

from __future__ import annotations

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError

from ..findings import Location

#: JSON dashboards up to this size get line/column positions (gpumon's largest is under 100 KB)
LOCATOR_MAX_CHARS = 2 << 20


def yaml_loader() -> YAML:
    yaml = YAML(typ="rt")
    yaml.allow_duplicate_keys = True
    return yaml


def pos(node, key) -> tuple[int, int]:
    """0-based (line, col) of ``node[key]``'s key (maps) or item (lists)."""
    try:
        if isinstance(node, CommentedMap):
            return node.lc.key(key)
        if isinstance(node, CommentedSeq):
            return node.lc.item(key)
    except (KeyError, TypeError, IndexError, AttributeError):
        pass
    return (node.lc.line, node.lc.col) if hasattr(node, "lc") else (0, 0)


def loc(name: str, pos: tuple[int, int]) -> Location:
    return Location(name, pos[0] + 1, pos[1] + 1)


def yaml_locator(name: str, lines: list[str], vline: int, vcol: int, text: str):
    """Map a snippet of a YAML scalar to its file position: exact for literal blocks (``|``) and
    single-line scalars, the scalar's start otherwise."""
    start = Location(name, vline + 1, vcol + 1)
    head = lines[vline][vcol:] if vline < len(lines) else ""

    def locate(snippet: str) -> Location:
        idx = text.find(snippet)
        if idx < 0:
            return start
        if head.startswith("|"):
            before = text[:idx]
            row = before.count("\n")
            col = idx - (before.rfind("\n") + 1)
            line_no = vline + 1 + row
            first = next((ln for ln in lines[vline + 1:] if ln.strip()), "")
            indent = len(first) - len(first.lstrip(" "))  # the block's indentation
            if line_no < len(lines):
                content = lines[line_no]
                if content[indent + col:indent + col + len(snippet)] == snippet:
                    return Location(name, line_no + 1, indent + col + 1)
            return start
        if "\n" in text:
            return start
        shift = 1 if head[:1] in ("'", '"') else 0
        if head[shift + idx:shift + idx + len(snippet)] == snippet:
            return Location(name, vline + 1, vcol + shift + idx + 1)
        return start

    return locate


def escape_pointer(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def json_locator(text: str, name: str, line_shift: int, col_shift: int):
    """``pointer -> Location`` for JSON ``text``: the line/column of the key (or list item) the
    pointer ends at, shifted by ``line_shift`` lines and ``col_shift`` columns."""
    cache: list = []

    def tree():
        if not cache:  # parsed on the first finding only: most dashboards have none
            try:
                # ruamel.yaml is pure Python: a 10 MB dashboard takes minutes and gigabytes, so
                # past LOCATOR_MAX_CHARS findings point at the JSON pointer on line 1 instead
                cache.append(yaml_loader().load(text) if len(text) <= LOCATOR_MAX_CHARS else None)
            except (YAMLError, RecursionError):
                cache.append(None)
        return cache[0]

    def locate(pointer: str) -> Location:
        node, pos = tree(), (0, 0)
        for token in [t.replace("~1", "/").replace("~0", "~") for t in pointer.split("/")[1:]]:
            if isinstance(node, CommentedMap) and token in node:
                pos = node.lc.key(token)
                node = node[token]
            elif isinstance(node, CommentedSeq) and token.isdigit() and int(token) < len(node):
                pos = node.lc.item(int(token))
                node = node[int(token)]
            else:
                break
        return Location(name, pos[0] + 1 + line_shift, pos[1] + 1 + col_shift, pointer or "/")

    return locate

