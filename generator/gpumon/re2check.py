"""Is a regex one Prometheus accepts? Prometheus compiles ``=~`` matchers and ``label_replace``
regexes with Go's RE2 syntax, which has no lookarounds, backreferences, possessive or atomic
groups, and no ``\\Z`` (issue #15, finding 7). A spec regex Python's ``re`` accepts but RE2 does
not renders rules promtool rejects, so the spec refuses it.

With the ``google-re2`` package (a gpumon dependency) the check is RE2 itself; without it (a
platform with no wheel) a documented subset is refused: the constructs above, then Python's
``re`` decides the rest.
"""

from __future__ import annotations

import re

try:  # pragma: no cover - which branch runs depends on the platform
    import re2 as _re2
except ImportError:  # pragma: no cover
    _re2 = None

#: constructs Python's ``re`` accepts and RE2 refuses (used without google-re2)
_NOT_RE2 = [
    (re.compile(r"\(\?[=!]|\(\?<[=!]"), "lookarounds ((?=, (?!, (?<=, (?<!)"),
    (re.compile(r"\\[1-9]|\(\?P=|\\g<"), "backreferences (\\1, (?P=name))"),
    (re.compile(r"(?<!\\)(?:[*+?}])\+"), "possessive quantifiers (a++, a*+)"),
    (re.compile(r"\(\?>"), "atomic groups ((?>...))"),
    (re.compile(r"\\Z"), "\\Z (use $, or \\z)"),
    (re.compile(r"\(\?\("), "conditionals ((?(1)...))"),
]
MAX_LENGTH = 4096
#: ``(?<name>...)``: RE2 and Go 1.22+ take it, but Prometheus builds on older Go (Debian's 2.42:
#: "invalid or unsupported Perl syntax: `(?<`") and Python's ``re`` refuse it; ``(?P<name>`` works
#: everywhere. Lookbehinds ``(?<=``/``(?<!`` are not RE2 at all.
_ANGLE_GROUP = re.compile(r"(?<!\\)\(\?<(?![=!])")


def problem(regex: str) -> str | None:
    """Why ``regex`` is not valid RE2 (a message), or None when Prometheus would accept it."""
    if len(regex) > MAX_LENGTH:
        return f"regex longer than {MAX_LENGTH} characters"
    if _ANGLE_GROUP.search(regex):
        return ("named groups written (?<name>...) are refused by Prometheus builds on Go before 1.22 "
                "(e.g. 2.42); write (?P<name>...)")
    if _re2 is not None:
        try:
            options = _re2.Options()
            options.log_errors = False  # the message is ours to report, not RE2's to log on stderr
            _re2.compile(regex, options=options)
        except Exception as exc:  # noqa: BLE001 - re2.error and its relatives (bytes messages)
            detail = exc.args[0] if exc.args else exc
            if isinstance(detail, bytes):
                detail = detail.decode("utf-8", "replace")
            return f"not a valid RE2 regex (the syntax Prometheus uses): {detail}"
        return None
    for pattern, what in _NOT_RE2:
        if pattern.search(regex):
            return f"not a valid RE2 regex (the syntax Prometheus uses): RE2 has no {what}"
    try:
        re.compile(regex)
    except re.error as exc:
        return f"not a valid regex: {exc}"
    return None


def fullmatch(regex: str, text: str) -> bool:
    """Does ``regex`` match all of ``text``, as Prometheus' anchored ``=~`` would? With the engine
    the spec check uses (RE2 when installed), so a regex the check accepted never meets another
    engine's syntax. ``regex`` must have passed :func:`problem`."""
    if _re2 is not None:
        options = _re2.Options()
        options.log_errors = False
        return _re2.compile(regex, options=options).fullmatch(text) is not None
    return re.fullmatch(regex, text) is not None
