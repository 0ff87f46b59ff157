"""How two PromQL expressions differ, said the way a reviewer reads it."""

from __future__ import annotations

import re

from .comment import code as _c

_REGEX_MATCHER = re.compile(r'(\w+)(=~|!~)"((?:[^"\\]|\\.)*)"')


def regex_list_changes(old: str, new: str) -> list[str] | None:
    """When two expressions differ only in the alternatives of ``label=~"a|b|c"`` matchers (a
    field list losing one field), one line per matcher naming what left and what joined; else None."""
    if _REGEX_MATCHER.sub(r'\1\2"§"', old) != _REGEX_MATCHER.sub(r'\1\2"§"', new):
        return None
    out = []
    for a, b in zip(_REGEX_MATCHER.finditer(old), _REGEX_MATCHER.finditer(new)):
        if a.group(3) == b.group(3):
            continue
        if "(" in a.group(3) + b.group(3):
            return None  # not a flat list of alternatives
        xa, xb = a.group(3).split("|"), b.group(3).split("|")
        gone = [x for x in xa if x not in xb]
        came = [x for x in xb if x not in xa]
        what = "; ".join(p for p in (f"removed {', '.join(_c(x) for x in gone)}" if gone else "",
                                     f"added {', '.join(_c(x) for x in came)}" if came else "") if p)
        line = f"{_c(a.group(1) + a.group(2))} list: {what or 'reordered'}"
        if line not in out:
            out.append(line)
    return out or None
