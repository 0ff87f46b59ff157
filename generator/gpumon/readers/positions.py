"""Positions in what the linter reads: ruamel.yaml's line/column marks of YAML keys and items, a
snippet of a YAML scalar mapped back to its file line, and a JSON pointer mapped to the line of the
key it ends at (one regex pass over the JSON tokens: json.loads keeps no positions, and
ruamel.yaml, which reads JSON as YAML flow syntax, took a minute for a 1.6 MB dashboard)."""

from __future__ import annotations

import json
import re

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq

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
        if not cache:  # scanned on the first finding only: most dashboards have none
            try:
                cache.append(_json_positions(text) if len(text) <= LOCATOR_MAX_CHARS else None)
            except (ValueError, IndexError, RecursionError):
                cache.append(None)
        return cache[0]

    def locate(pointer: str) -> Location:
        node, offset = tree(), -1
        for token in [t.replace("~1", "/").replace("~0", "~") for t in pointer.split("/")[1:]]:
            entry = node.get(token) if isinstance(node, dict) else None
            if entry is None:
                break
            offset, node = entry
        if offset < 0:
            return Location(name, 1 + line_shift, 1 + col_shift, pointer or "/")
        line = text.count("\n", 0, offset)
        col = offset - (text.rfind("\n", 0, offset) + 1)
        return Location(name, line + 1 + line_shift, col + 1 + col_shift, pointer or "/")

    return locate


#: JSON tokens: strings, punctuation, and the bare words between them (numbers, true, null)
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}:,]|[^\s\[\]{}:,"]+')


def _json_positions(text: str) -> dict:
    """Where each key and list item of JSON ``text`` starts: nested ``{key: (offset, children)}``
    (list items keyed by their index as a string; children None for scalars; the first of
    duplicate keys). One regex pass without recursion: a 1.6 MB dashboard takes about a second
    (ruamel.yaml, which gave these positions before, took about a minute)."""
    holder: dict = {}
    pending: tuple | None = ("", 0, holder)  # (key, offset, where) of the value about to start
    stack: list[list] = []  # per open container: [children, is_list, next index, key, expecting a key]
    for match in _JSON_TOKEN.finditer(text):
        tok, at = match.group(), match.start()
        top = stack[-1] if stack else None
        if top is not None and top[1] and pending is None and tok not in ("]", ","):
            pending = (str(top[2]), at, top[0])  # a list item starts
        if top is not None and not top[1] and top[4]:
            if tok.startswith('"'):
                top[3], top[4] = (json.loads(tok), at), False
            elif tok == "}":
                stack.pop()
            continue
        if tok in ("{", "["):
            children: dict = {}
            if pending is not None:
                pending[2].setdefault(pending[0], (pending[1], children))
            stack.append([children, tok == "[", 0, None, tok == "{"])
            pending = None
        elif tok in ("}", "]"):
            stack.pop()
            pending = None
        elif tok == ",":
            if top is not None and top[1]:
                top[2] += 1
            elif top is not None:
                top[4] = True
            pending = None
        elif tok == ":":
            if top is not None and top[3] is not None:
                pending = (top[3][0], top[3][1], top[0])
        else:  # a scalar value
            if pending is not None:
                pending[2].setdefault(pending[0], (pending[1], None))
            pending = None
    root = holder.get("")
    return root[1] if root and isinstance(root[1], dict) else {}
