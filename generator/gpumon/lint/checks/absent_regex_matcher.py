"""``absent-regex-matcher``: regex (``=~``/``!~``) matchers on the job or identity labels inside
``absent()``/``absent_over_time()``.

What: e.g. ``absent_over_time(DCGM_FI_DEV_GPU_TEMP{job="dcgm-exporter",Hostname=~"gpu-1|gpu-2"}[5m])``.
Why: absent() keeps only equality-matched labels: the alert fires only when *all* matched
entities are gone, and then without the label that says which (prometheus/prometheus#9407;
VictoriaMetrics/VictoriaMetrics#3732). Write one absent per entity with ``=``.
Silence: ``# gpumon-lint: ignore absent-regex-matcher`` on the rule, or ``--disable absent-regex-matcher``.
"""

from __future__ import annotations

from typing import Iterator

import promql_parser as pp

from ...findings import Finding
from ...readers import promql
from ._base import make
from .absent_no_selector import absent_calls

ID = "absent-regex-matcher"
ORDER = 70
SEVERITY = "warning"


def check(inputs, ctx) -> Iterator[Finding]:
    wanted = {"job", *ctx.identity_labels}
    for query, fn, vs in absent_calls(inputs):
        if vs is None:
            continue
        for m in promql.matchers(vs):
            if m.name in wanted and m.op in (pp.MatchOp.Re, pp.MatchOp.NotRe):
                op = "=~" if m.op == pp.MatchOp.Re else "!~"
                yield make(ID, SEVERITY, query.subject,
                           f"{fn}() with {m.name}{op}\"{m.value}\": it fires only when every matched {m.name} is "
                           f"gone, and its alert has no {m.name} label",
                           f"write one {fn}() per {m.name} with {m.name}=\"...\"", query.where(m.name),
                           label=m.name)
