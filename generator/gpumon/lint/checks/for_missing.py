"""``for-missing``: a threshold alert without ``for``.

What: an alerting rule whose expression compares series with a number (``x > 700``) and that
has no ``for`` key. An explicit ``for: 0s`` is taken as deliberate (event alerts such as an XID
or a row-remap failure, gpumon's implausible-value alert) and is not reported.
Why: one odd sample pages someone: a one-scrape 3.7e12 W spike (intel/xpumanager#130,
intel/xpumanager#130) or a flapping target. ``for`` makes the condition hold for a while.
Silence: write ``for: 0s`` to say it is deliberate, ``# gpumon-lint: ignore for-missing`` on the
rule, or ``--disable for-missing``.
"""

from __future__ import annotations

from typing import Iterator

import promql_parser as pp

from ...findings import Finding
from ...readers import promql
from ._base import make

ID = "for-missing"
ORDER = 80
SEVERITY = "warning"


def is_threshold(ast) -> bool:
    """True when the expression compares series with a number (no ``bool`` modifier)."""
    for node, _ in promql.nodes(ast):
        if isinstance(node, pp.BinaryExpr) and str(node.op) in promql.COMPARISONS:
            if node.modifier is not None and node.modifier.return_bool:
                continue
            if promql.is_scalar(node.lhs) != promql.is_scalar(node.rhs):
                return True
    return False


def check(inputs, ctx) -> Iterator[Finding]:
    for rule in inputs.rules:
        if rule.kind != "alert" or rule.for_ is not None or rule.expr is None or rule.expr.ast is None:
            continue
        if is_threshold(rule.expr.ast):
            yield make(ID, SEVERITY, rule.subject, "threshold alert without `for`: a single odd sample fires it",
                       f"add e.g. `for: {int(ctx.spec.alerts.for_ // 60)}m` (or `for: 0s` if one sample must page)",
                       rule.location)
