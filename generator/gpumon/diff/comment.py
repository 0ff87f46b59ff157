"""The diff as a GitHub PR comment that always fits: GitHub rejects comments over 65,536
characters. Summary first, each section collapsed in ``<details>``, and when the whole does not
fit, sections are cut at item boundaries (never inside a code block) with a note of what was cut."""

from __future__ import annotations

import re

# Every value a pull request controls (rule and group names, labels, titles, queries, file names)
# reaches the comment through code(), text() or fence(): the comment is posted with the bot's
# voice, so a value must not end a <details>, start a heading, mention a team, link or embed.

#: line breaks and other control characters: shown as ⏎ / U+FFFD so a value stays on its line
_BREAKS = re.compile(r"\r\n|[\n\r\x0b\x0c\x85\u2028\u2029]")
_CONTROLS = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")
#: Markdown punctuation that can start markup mid-line, escaped with a backslash in text()
#: (a value never starts a line: each follows a bullet's words, so ``-``, ``+``, ``.`` stay)
_PUNCT = re.compile(r"([\\`*_\[\]#!|~])")


def _one_line(value) -> str:
    return _CONTROLS.sub("\ufffd", _BREAKS.sub("⏎", str(value)))


def code(value) -> str:
    """``value`` as Markdown inline code on one line: a code span shows its content literally
    (no HTML, links, mentions or emphasis); its backtick fence is longer than any run inside."""
    body = _one_line(value)
    ticks = "`" * (max((len(run) for run in re.findall(r"`+", body)), default=0) + 1)
    pad = " " if body.startswith("`") or body.endswith("`") or not body.strip() else ""
    return f"{ticks}{pad}{body}{pad}{ticks}"


def text(value) -> str:
    """``value`` as plain Markdown text on one line: punctuation backslash-escaped (no emphasis,
    links, images, headings), ``&``/``<``/``>`` as entities (no HTML: no ``</details>``, no
    ``<!--``), ``@`` followed by a zero-width space (no mention)."""
    body = _PUNCT.sub(r"\\\1", _one_line(value))
    body = body.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return body.replace("@", "@&#8203;")


def fence(lines: list[str], lang: str = "", indent: str = "") -> list[str]:
    """``lines`` as a fenced code block (indented by ``indent``), the fence longer than any
    backtick run inside so no line of the value ends the block early."""
    body = [_CONTROLS.sub("\ufffd", ln) for line in lines for ln in _BREAKS.split(str(line))]
    longest = max((len(run) for ln in body for run in re.findall(r"`+", ln)), default=0)
    ticks = "`" * max(3, longest + 1)
    return [f"{indent}{ticks}{lang}"] + [f"{indent}{ln}" for ln in body] + [f"{indent}{ticks}"]


def quoted(value) -> str:
    """``value`` as Markdown inline code (:func:`code`), ``none`` for None."""
    return "none" if value is None else code(value)


#: GitHub's maximum comment body (characters)
GITHUB_LIMIT = 65536
_NOTE = ("\n_… {n} more change(s) not shown here: the comment is capped at {limit:,} characters{why}. "
         "Run `gpumon diff` locally for everything._\n")


def items(lines: list[str]) -> list[list[str]]:
    """Group section lines into items: a bullet (top-level, or one level in: a dashboard's
    changes are items of their own) and its indented continuation (code blocks stay whole)."""
    out: list[list[str]] = []
    fence = ""  # the open code block's fence (fence() makes it longer than any backtick run inside)
    for ln in lines:
        if not fence and (ln.startswith("- ") or ln.startswith("  - ") or not out):
            out.append([ln])
        else:
            out[-1].append(ln)
        stripped = ln.strip()
        if not fence and stripped.startswith("```"):
            fence = stripped[:len(stripped) - len(stripped.lstrip("`"))]
        elif fence and stripped.startswith(fence) and not stripped.strip("`"):
            fence = ""
    return out


def details(title: str, body: list[str], count: int) -> str:
    return f"<details><summary>{title} ({count})</summary>\n\n" + "\n".join(body) + "\n\n</details>\n"


def render(head: str, sections: list[tuple[str, list[str]]], limit: int = GITHUB_LIMIT) -> str:
    """``head`` (title, summary), then each non-empty section as ``<details>``, within ``limit``."""
    out = head
    cut = 0
    why = " (GitHub's limit)" if limit == GITHUB_LIMIT else ""
    reserve = len(_NOTE.format(n=10 ** 6, limit=limit, why=why)) + 200
    for title, lines in sections:
        if not lines:
            continue
        groups = items(lines)
        count = sum(1 for ln in lines if ln.startswith("- "))
        block = details(title, [ln for g in groups for ln in g], count)
        if len(out) + len(block) + reserve <= limit:
            out += "\n" + block
            continue
        kept: list[list[str]] = []
        for g in groups:
            trial = details(title, [ln for k in kept + [g] for ln in k], count)
            if len(out) + len(trial) + reserve > limit:
                break
            kept.append(g)
        if kept and len(kept) < len(groups) and kept[-1][0].startswith("- ") and not groups[len(kept)][0].startswith("- "):
            kept.pop()  # a heading whose details would all be cut: cut it too
        # count what was cut as top-level changes (a dashboard's change list may be cut inside)
        tops = [i for i, g in enumerate(groups) if g[0].startswith("- ")]
        first_cut = len(kept)
        cut += sum(1 for i, start in enumerate(tops)
                   if (tops[i + 1] if i + 1 < len(tops) else len(groups)) > first_cut)
        if kept:
            out += "\n" + details(title, [ln for k in kept for ln in k], count)
    if cut:
        out += _NOTE.format(n=cut, limit=limit, why=why)
    return out
