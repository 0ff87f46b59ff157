"""``rate-window-too-small``: a ``rate``/``irate``/``increase``/``delta``/``deriv`` window shorter
than 2 x max(scrape interval, collect interval).

What: range windows on dcgm-exporter series, against the spec's ``exporter.scrape_interval`` and
``exporter.collect_interval`` (DCGM_EXPORTER_INTERVAL, default 30 s). Error below 2x, warning
below 4x (prometheus/prometheus#1428). Grafana's ``$__rate_interval``/``$__interval`` and interval variables
are chosen at query time and not checked.
Why: these functions need two distinct samples in the window; dcgm-exporter repeats the same
reading until its next collection, so with a 30 s collect interval ``rate(x[1m])`` is often empty
or zero (prometheus/prometheus#1428, #3194).
Silence: ``# gpumon-lint: ignore rate-window-too-small`` on the rule, or ``--disable rate-window-too-small``.
"""

from __future__ import annotations

from typing import Iterator

from ...durations import format_duration
from ...findings import Finding
from ...readers import promql
from ...readers.model import MACRO_WINDOW
from ._base import make, parsed

ID = "rate-window-too-small"
ORDER = 90
SEVERITY = "error"


def check(inputs, ctx) -> Iterator[Finding]:
    sample = ctx.spec.exporter.sample_interval
    for query, ast in parsed(inputs):
        for node, _ in promql.nodes(ast):
            fn = promql.func_name(node)
            if fn not in promql.TWO_SAMPLE_FUNCS or not node.args:
                continue
            window = promql.range_seconds(node.args[0])
            if window is None or window == MACRO_WINDOW:
                continue
            names = [promql.metric_name(vs) for vs, _ in promql.selectors(node.args[0])]
            if not any(n and n.lower().startswith("dcgm") for n in names):
                continue
            if window < 2 * sample:
                severity, need = "error", 2 * sample
            elif window < 4 * sample:
                severity, need = "warning", 4 * sample
            else:
                continue
            yield make(ID, severity, query.subject,
                       f"{fn}() over [{format_duration(window)}] while a new reading arrives only every "
                       f"{format_duration(sample)} (max of scrape {format_duration(ctx.spec.exporter.scrape_interval)}"
                       f" and collect {format_duration(ctx.spec.exporter.collect_interval)} intervals)",
                       f"use a window of at least {format_duration(need)}", query.where(fn + "("))
