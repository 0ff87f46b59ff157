"""Per-step page accounting for the fault matrix (tests/matrix.py): the pages firing at every
evaluation step of a scenario, each page's firing intervals, and the checks of a whole timeline
against a :class:`~tests.matrix.Case`.

promtool reports a failed ``promql_expr_test`` with the samples it got. The matrix asks for *no*
page at every step, so promtool's report lists every step at which some page fired, with the
pages; a step it does not list had none. One promtool run per spec then gives the exact timeline
of every scenario, evaluated by Prometheus' own rule engine in virtual time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpumon.durations import parse_duration

#: step -> pages firing at that step (steps with none are left out)
Timeline = dict[int, frozenset]
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


def page_of(text: str, page_type):
    """The page of one sample ``{alertname="...", Hostname="...", ...}`` of promtool's report."""
    labels = dict(_LABEL.findall(text))
    gpu = labels.get("gpu")
    return page_type(labels["alertname"], labels.get("Hostname"), None if gpu is None else int(gpu),
                     labels.get("dcgm_field"), labels.get("cluster"))


def parse_report(text: str, step: int, page_type) -> dict[int, Timeline]:
    """promtool's failure report -> case index -> timeline.

    Args:
        text: promtool's stdout and stderr; each failed expression test starts with
            ``expr: "...alertname!=\\"case-N\\"...", time: 1m5s,`` and lists what it got on ``got:``
            and the lines after it.
        step: seconds per step (eval times are ``step * k + step / 2``).
        page_type: the :class:`~tests.matrix.Page` class.
    """
    pages: dict[int, dict[int, set]] = {}
    case = at = None
    in_got = False
    for line in text.splitlines():
        m = re.search(r'alertname!=\\?"case-(\d+)\\?".*time: ([0-9hms]+),', line)
        if m:
            case, at, in_got = int(m.group(1)), int(parse_duration(m.group(2)) // step), False
            pages.setdefault(case, {}).setdefault(at, set())
            continue
        stripped = line.strip()
        if stripped.startswith("got:"):
            in_got, stripped = True, stripped[4:]
        elif stripped.startswith("exp:") or not stripped:
            in_got = False
        if in_got and case is not None:
            # a sample without alertname is not a page (promtool quoting a rule's error)
            pages[case][at] |= {page_of(s, page_type) for s in re.findall(r"\{[^}]*\}", stripped)
                                if "alertname=" in s}
    return {c: {s: frozenset(p) for s, p in steps.items() if p} for c, steps in pages.items()}


def intervals(timeline: Timeline) -> dict:
    """page -> [(first step, last step)] of each run of consecutive steps it fired in: a page that
    flips off and on has two."""
    out: dict = {}
    for s in sorted(timeline):
        for p in timeline[s]:
            runs = out.setdefault(p, [])
            if runs and runs[-1][1] == s - 1:
                runs[-1] = (runs[-1][0], s)
            else:
                runs.append((s, s))
    return out


@dataclass
class Verdict:
    """A scenario's timeline and what is wrong with it (empty: it pages exactly as expected)."""

    timeline: Timeline
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def judge(case, timeline: Timeline, step_seconds: int, pages=None, bound=None, end=None) -> Verdict:
    """Check a whole timeline against ``case`` (``pages``/``bound``/``end`` override the case's,
    for an engine where they differ).

    Rules: before the faults (step < ``case.at``) only ``case.before`` may fire, and all of them
    just before; each expected page fires in exactly one run, starting within ``bound`` steps of the
    faults (a page of ``before`` may have started earlier); no other page fires at any step; the
    pages firing at the last step are ``end``; with ``case.clear``, every page has ended within
    ``case.resolve`` steps after the faults clear.
    """
    pages = case.pages if pages is None else pages
    bound = case.bound if bound is None else bound
    end = (case.end if case.end is not None else pages) if end is None else end
    last = case.steps - 1
    v = Verdict(timeline)
    runs = intervals(timeline)

    def t(s: int) -> str:
        return f"t={s * step_seconds}s"
    allowed = set(pages) | set(case.before) | set(end)
    for p, r in sorted(runs.items(), key=lambda x: x[1]):
        if p not in allowed:
            v.problems.append(f"{p.text()} fired, not expected ({_runs(r, step_seconds)})")
            continue
        if len(r) > 1:
            v.problems.append(f"{p.text()} fired {len(r)} times ({_runs(r, step_seconds)})")
        first = r[0][0]
        if first < case.at and p not in case.before:
            v.problems.append(f"{p.text()} fired before the fault ({t(first)})")
        if p in pages and p not in case.before and first > case.at + bound:
            v.problems.append(f"{p.text()} started at {t(first)}, later than {t(case.at + bound)}")
        if case.clear is not None and r[-1][1] >= case.clear + case.resolve:
            v.problems.append(f"{p.text()} still fired at {t(r[-1][1])}, {case.resolve * step_seconds}s "
                              f"after the fault cleared at {t(case.clear)}")
    for p in set(pages) - set(runs):
        v.problems.append(f"{p.text()} never fired")
    before = timeline.get(case.at - 1, frozenset())
    if set(before) != set(case.before):
        v.problems.append(f"just before the fault: {_names(before)}, expected {_names(case.before)}")
    final = timeline.get(last, frozenset())
    if set(final) != set(end):
        v.problems.append(f"at the end ({t(last)}): {_names(final)}, expected {_names(end)}")
    return v


def _names(pages) -> str:
    return ", ".join(sorted(p.text() for p in pages)) or "nothing"


def _runs(runs, step_seconds: int) -> str:
    return ", ".join(f"{a * step_seconds}-{b * step_seconds}s" for a, b in runs)


def describe(timeline: Timeline, step_seconds: int, last: int) -> str:
    """Each page with its firing runs, ``start-end s`` (``start s-`` when still firing at the
    last step); ``nothing`` when no page fired at any step."""
    out = []
    for p, runs in sorted(intervals(timeline).items(), key=lambda x: (x[1], x[0].text())):
        spans = ", ".join(f"{a * step_seconds}s-" if b == last else f"{a * step_seconds}-{b * step_seconds}s"
                          for a, b in runs)
        out.append(f"{p.text()}: {spans}")
    return "<br>".join(out) or "nothing"
