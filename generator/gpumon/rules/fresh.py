"""Reading a sparse recorded set as of its group's last evaluation, so a series left from before a
Prometheus restart does not hold a page.

Prometheus writes no staleness markers at shutdown, and after a restart a recording rule does not
know which series it wrote before: a series in a sparse set (a GPU missing a field) whose cause
ended during the restart is never marked stale and stays visible to every instant query for the
5 minute lookback, holding its alert (its ``for`` state restored from ``ALERTS_FOR_STATE``) that
long after the cause is gone.

The group that writes such sets ends with :func:`heartbeat`, a series written at every
evaluation; all rules of one evaluation share its timestamp. :func:`fresh` keeps a series of the
set only when it is not older than that heartbeat: a series the last evaluation wrote has the
heartbeat's timestamp (or a newer one, while the group is in the middle of an evaluation: the
heartbeat is its last rule), a leftover from before the restart an older one. No evaluation
interval needs to be known. Without any heartbeat (the group never evaluated) nothing is dropped.
"""

from __future__ import annotations

from ..promqltext import matcher
from . import names
from .common import record
from .model import Rule


def inventory_group(spec) -> str:
    """The name of the group that records the inventory and the per-GPU missing sets."""
    return f"{spec.name}.inventory"


def heartbeat(group: str) -> Rule:
    """:data:`names.EVALUATED` of rule group ``group`` (its full name): the last rule of the group."""
    return record(names.EVALUATED, "vector(time())", {names.GROUP_LABEL: group})


def fresh(sel: str, group: str) -> str:
    """``sel`` (a selector of a set recorded in group ``group``) without the series older than the
    group's last evaluation (:func:`heartbeat`)."""
    beat = f"{names.EVALUATED}{{{matcher(names.GROUP_LABEL, group)}}}"
    return f"({sel} unless timestamp({sel}) < on () group_left () max(timestamp({beat})))"
