"""The diff as a GitHub PR comment that always fits: GitHub rejects comments over 65,536
characters. Summary first, each section collapsed in ``<details>``, and when the whole does not
fit, sections are cut at item boundaries (never inside a code block) with a note of what was cut."""

from __future__ import annotations

def quoted(value) -> str:
    """``value`` as Markdown inline code, ``none`` for None."""
    return "none" if value is None else f"`{value}`"


#: GitHub's maximum comment body (characters)
GITHUB_LIMIT = 65536
_NOTE = ("\n_… {n} more change(s) not shown here: the comment is capped at {limit:,} characters{why}. "
         "Run `gpumon diff` locally for everything._\n")


def items(lines: list[str]) -> list[list[str]]:
    """Group section lines into items: a bullet (top-level, or one level in: a dashboard's
    changes are items of their own) and its indented continuation (code blocks stay whole)."""
    out: list[list[str]] = []
    fence = False
    for ln in lines:
        if not fence and (ln.startswith("- ") or ln.startswith("  - ") or not out):
            out.append([ln])
        else:
            out[-1].append(ln)
        if ln.strip().startswith("```"):
            fence = not fence
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
