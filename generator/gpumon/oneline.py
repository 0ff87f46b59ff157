"""Input text on one line of output: the one escaper of every text report and error message.

Rule and record names, panel titles, file names, server label values and the text of an error
a runbook template raised come from a pull request or a server. CI runners read the log as
commands: GitHub Actions runs a line that starts with ``::`` (after leading blanks) as a workflow
command (``::add-mask::``, ``::error file=...::``, ``::stop-commands::``) and its older syntax
``##[command]`` anywhere in a line. So such text is printed through :func:`one_line`: line
breaks and other control characters (C0, DEL, C1, U+2028/U+2029) as Python-style escapes
(``\\n``, ``\\x1b``, ``\\u2028``), ``##[`` as ``#\\x23[``; a value then never ends a line, so no
line it is part of starts with its text. ``--format github`` escapes for the annotation syntax
instead (:func:`gpumon.reporters.github`).
"""

from __future__ import annotations

import re

#: what :func:`one_line` escapes: every character Python calls unprintable (line breaks, other control
#: characters, bidirectional overrides, separators but the space), and the legacy command prefix
_UNSAFE = re.compile(r"[^\x20-\x7e]|##\[")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match) -> str:
    char = match.group()
    if char == "##[":
        return "#\\x23["
    if char.isprintable():          # the regex is coarse: printable non-ASCII text stays as it is
        return char
    code = ord(char)
    return _NAMED.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000
                                else f"\\U{code:08x}")


def one_line(value, limit: int | None = None) -> str:
    """``str(value)`` with line breaks and control characters escaped (module docstring); past
    ``limit`` characters (of the escaped text) cut, saying how long it was."""
    text = _UNSAFE.sub(_escape, str(value))
    if limit is not None and len(text) > limit:
        text = f"{text[:limit]}… ({len(text)} characters)"
    return text


def path_start(path) -> str:
    """A relative file name to begin a line with: ``./`` before one that starts with a blank or
    ``:`` (a pull request may add a file named ``::error::x.yaml``; the runner strips leading
    Unicode blanks before looking for ``::``), escaped as :func:`one_line`."""
    text = one_line(path)
    return f"./{text}" if text[:1] == ":" or text[:1].isspace() else text
