"""What a Prometheus restart leaves behind, for the fault matrix (tests/matrix.py).

Prometheus writes no staleness markers at shutdown, and after a restart its rule manager does not
know which series its rules wrote before, so a recorded series that was there at the last
evaluation before the restart and is not any more stays visible to every instant query for the
5 minute lookback. promtool's rule engine cannot restart in the middle of a test group, so the
matrix models the leftover: a first promtool run reads every recorded series (``a:b`` names) at
the last step before each restart; the scenario's group then gets each of them as an input series
with one sample at that step and nothing after it (no marker), unless the rules write the same
series again at the first evaluation after the restart (then it gets new samples and lingers not),
under an extra label
``restarted="before"`` that the live rule engine never writes (its own copy, with a marker when
it ends, would otherwise hide it). A rule reading that recorded series sees the leftover exactly
as it would after a real restart.
"""

from __future__ import annotations

import re
from pathlib import Path

from gpumon.ruletests.series import MISSING, compress
from gpumon.spec import Spec

#: the label the leftover series carry (see the module docstring)
LEFTOVER = ("restarted", "before")
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


def _query(index: int, restart: int) -> str:
    # a matcher that is always true names the case and restart in promtool's report
    return f'{{__name__=~".+:.+",gpumon_case!="{index}-{restart}"}}'


def lingering(promtool: str, folder: Path, spec: Spec, cases: dict) -> dict[int, list[dict]]:
    """The leftover recorded series of each case with restarts.

    Args:
        promtool: the promtool binary; folder: a scratch folder; spec: the matrix spec.
        cases: case index -> :class:`~tests.matrix.Case`.
    Returns:
        case index -> promtool input series (``{"series": ..., "values": ...}``).
    """
    from tests.matrix import STEP, promtool_group, _promtool
    chosen = {i: c for i, c in cases.items() if c.restarts}
    if not chosen:
        return {}
    groups = []
    for i, c in chosen.items():
        group = promtool_group(c, spec, i)
        # the last evaluation before the restart, and the first after it (encoded as -r)
        group["promql_expr_test"] = [{"expr": _query(i, k), "eval_time": f"{s * STEP + STEP // 2}s", "exp_samples": []}
                                     for r in c.restarts for k, s in ((r, r - 1), (-r, r + c.down))]
        groups.append(group)
    sub = folder / "restarts"
    sub.mkdir(exist_ok=True)
    report = _promtool(promtool, sub, spec, groups)
    out: dict[int, list[dict]] = {}
    found = _report(report)
    for (i, restart), samples in found.items():
        if restart < 0:
            continue
        steps = chosen[i].steps
        # a series the rules write again after the restart gets new samples: only the others linger
        again = {tuple(sorted(labels.items())) for labels, _ in found.get((i, -restart), [])}
        for labels, value in samples:
            if tuple(sorted(labels.items())) in again:
                continue
            row = [MISSING] * steps
            row[restart - 1] = value
            name = labels.pop("__name__")
            inner = ",".join(f'{k}="{v}"' for k, v in sorted({**labels, LEFTOVER[0]: LEFTOVER[1]}.items()))
            out.setdefault(i, []).append({"series": f"{name}{{{inner}}}", "values": compress(row)})
    return out


def _report(text: str) -> dict[tuple[int, int], list[tuple[dict, float]]]:
    """(case index, restart step) -> [(labels, value)] from promtool's failure report."""
    out: dict = {}
    key = None
    in_got = False
    for line in text.splitlines():
        m = re.search(r'gpumon_case!=\\?"(\d+)-(-?\d+)\\?"', line)
        if m:
            key, in_got = (int(m.group(1)), int(m.group(2))), False
            out.setdefault(key, [])
            continue
        stripped = line.strip()
        if stripped.startswith("got:"):
            in_got, stripped = True, stripped[4:].strip()
        elif stripped.startswith("exp:") or not stripped:
            in_got = False
        if in_got and key is not None:
            for labels, value in re.findall(r"(\{[^}]*\})\s+([^\s,]+)", stripped):
                out[key].append((dict(_LABEL.findall(labels)), float(value)))
    return out
