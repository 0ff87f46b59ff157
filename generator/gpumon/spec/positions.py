"""Where in the spec file a problem is: line and column of a YAML node or error, and the
JSON path of a key."""

from __future__ import annotations

from typing import Any

from ruamel.yaml.comments import CommentedMap, CommentedSeq


def _yaml_error_position(exc: Exception, text: str) -> tuple[int, int]:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    if mark is not None:
        return mark.line + 1, mark.column + 1
    pos = getattr(exc, "position", None)
    if isinstance(pos, int):
        return text.count("\n", 0, pos) + 1, pos - (text.rfind("\n", 0, pos) + 1) + 1
    return 1, 1


def _position(doc: Any, path: list, key_of_last: bool = False) -> tuple[int, int]:
    """1-based (line, column) of the node at ``path``; of the key itself when ``key_of_last``."""
    node, line, col = doc, 0, 0
    for i, step in enumerate(path):
        last = i == len(path) - 1
        try:
            if isinstance(node, CommentedMap) and step in node:
                line, col = node.lc.key(step) if (last and key_of_last) else node.lc.value(step)
                node = node[step]
            elif isinstance(node, CommentedSeq) and isinstance(step, int) and step < len(node):
                line, col = node.lc.item(step)
                node = node[step]
            else:
                break
        except (KeyError, TypeError, AttributeError):
            break
    else:
        if isinstance(node, (CommentedMap, CommentedSeq)) and not path:
            line, col = 0, 0
    return line + 1, col + 1


def _format_path(path: list) -> str:
    out = ""
    for step in path:
        out += f"[{step}]" if isinstance(step, int) else (f".{step}" if out else str(step))
    return out
