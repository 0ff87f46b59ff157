"""Reading a sparse recorded set as of its group's last evaluation, so a series left from before a
Prometheus restart does not hold a page.

Prometheus writes no staleness markers at shutdown, and after a restart a recording rule does not
know which series it wrote before: a series in a sparse set (a GPU missing a field) whose cause
ended during the restart is never marked stale and stays visible to every instant query for the
5 minute lookback, holding its alert (its ``for`` state restored from ``ALERTS_FOR_STATE``) that
long after the cause is gone.

The group that writes such sets ends with :func:`heartbeat`, a series written at every
evaluation; all rules of one evaluation share its timestamp. :func:`fresh` keeps a series of the
set only when it is not older than that heartbeat by more than :data:`WRITE_LAG`: a series the
last evaluation wrote has the heartbeat's timestamp (or a newer one, while the group is in the
middle of an evaluation: the heartbeat is its last rule), a leftover from before the restart an
older one. No evaluation interval needs to be known. Without any heartbeat (the group never
evaluated) nothing is dropped.
"""

from __future__ import annotations

from dataclasses import replace

from ..promqltext import literal_replacement, matcher, quote
from . import names
from .common import record
from .model import Rule


#: seconds a series of the set may be older than the heartbeat and still count as written by the
#: same evaluation. vmalert writes its results to the store by remote write and reads them back
#: from there: one evaluation's series arrive in several writes (``-remoteWrite.concurrency``
#: connections, flushed every ``-remoteWrite.flushInterval``), and VictoriaMetrics makes each
#: searchable a few seconds after it arrives, so the heartbeat of an evaluation can be visible while
#: the set it closes is visible only as of an earlier one (measured on vmalert 1.151 with 1 s
#: evaluations: the newest heartbeat visible was 6 s old, and GpuNodeMetricMissing ended for 4 s
#: and paged again). On Prometheus the set and the heartbeat are visible together and this changes
#: nothing; a series left from before a restart is dropped at most this long after it.
WRITE_LAG = 15


def inventory_group(spec) -> str:
    """The name of the group that records the inventory and the per-GPU missing sets."""
    return f"{spec.name}.inventory"


def coverage_group(spec) -> str:
    """The name of the group that records coverage and the unlabelled-series sets."""
    return f"{spec.name}.coverage"


def heartbeat(group: str) -> Rule:
    """:data:`names.EVALUATED` of rule group ``group`` (its full name): the last rule of the group."""
    return record(names.EVALUATED, "vector(time())", {names.GROUP_LABEL: group})


def fresh(sel: str, group: str) -> str:
    """``sel`` (a selector of a set recorded in group ``group``) without the series older than the
    group's last evaluation (:func:`heartbeat`) by more than :data:`WRITE_LAG`."""
    return f"({sel} unless timestamp({sel}) < on () group_left () ({_last_evaluation(group)} - {WRITE_LAG}))"


#: how long a group must have been evaluating before its sets' absence means anything: a reader
#: evaluated before the group's first results are visible (the groups start together; vmalert and a
#: Thanos Ruler read them back from the store, :data:`WRITE_LAG` later) must not take "no series
#: yet" for "nothing found"
SETTLE = "1m"


def settled(group: str) -> str:
    """A one-element vector (no labels) while group ``group`` (its first part, which holds the
    inventory and the per-node counts: :mod:`gpumon.rules.split`) has been evaluating for
    :data:`SETTLE`: its heartbeat as of that long ago. ``and on () settled(g)`` keeps a rule that
    fires on the *absence* of ``g``'s series quiet until ``g``'s results can be read."""
    return f"group({names.EVALUATED}{{{matcher(names.GROUP_LABEL, group)}}} offset {SETTLE})"


def mark(group: str) -> str:
    """The one series (no labels but :data:`names.GROUP_LABEL`) a rule of group ``group`` adds to
    its result (``<expr> or mark(group)``), so the record shows whether the rule's own query
    succeeded: a rule that fails to evaluate (a query limit, a store the query needs is down)
    writes nothing, and its record's series stay visible, unchanged, for the 5 minute lookback
    and then vanish -- from the outside the same as a rule that found nothing, but for this
    series. It has no ``job`` label, so every read of the record with the spec's ``job`` matcher
    (:mod:`gpumon.rules.scope`) leaves it out."""
    return f"label_replace(vector(1), {quote(names.GROUP_LABEL)}, {literal_replacement(group)}, \"\", \"\")"


def succeeded(record_name: str, group: str) -> str:
    """A one-element vector (no labels) while the rule recording ``record_name`` (with
    :func:`mark`) in group ``group`` succeeded at the group's last evaluation: its mark as of then
    (:func:`fresh`). ``and on () succeeded(r, g)`` keeps a rule that fires on the *absence* of
    ``r``'s series quiet while the rule that writes them fails: "nothing found" cannot be told
    from "could not look" otherwise, and the failure is the ruler's own alert (rule evaluation
    failures) and ``gpumon validate``'s finding, not a missing GPU metric."""
    sel = f"{record_name}{{{matcher('job', '')},{matcher(names.GROUP_LABEL, group)}}}"
    return f"group({fresh(sel, group)})"


def _last_evaluation(group: str) -> str:
    return f"max(timestamp({names.EVALUATED}{{{matcher(names.GROUP_LABEL, group)}}}))"


def _parts_evaluated(parts: list[str]) -> str:
    """The time by which every part of a split group evaluated last: the oldest of their heartbeats
    (each part writes its sets and its heartbeat at its own evaluation time, so a series a part
    wrote last is not older than this)."""
    names_re = "|".join(p.replace(".", "\\.") for p in parts)
    return f"min(timestamp({names.EVALUATED}{{{matcher(names.GROUP_LABEL, names_re, '=~')}}}))"


def retarget(rule: Rule, split: dict[str, list[str]]) -> Rule:
    """``rule`` with each :func:`fresh` guard on a group of ``split`` ({group: its parts' names},
    :mod:`gpumon.rules.split`) reading the oldest of the parts' heartbeats."""
    expr = rule.expr
    for group, parts in split.items():
        expr = expr.replace(_last_evaluation(group), _parts_evaluated(parts))
    return rule if expr == rule.expr else replace(rule, expr=expr)
