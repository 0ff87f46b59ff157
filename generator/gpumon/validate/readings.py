"""What a good reading of a spec'd metric is, as PromQL over its latest samples: the values check
reports the bad ones (:mod:`.values`), and the inventory counts each metric's GPUs with the same
read that tells whether any of them reads badly (:func:`plausible`, :mod:`.inventoryqueries`), so
a healthy fleet's readings are read once, not once to count them and once to judge them.

A reading is bad when it is NaN, a DCGM blank code (>= 2^47, ``DCGM_BLANK_MIN``: the blank and
not-supported codes of NVIDIA/DCGM dcgmlib/dcgm_structs.h), or outside the metric's ``range``
(inclusive): :func:`gpumon.validate.values.reason` says which.
"""

from __future__ import annotations

from ..durations import format_duration
from ..rules.promql import num
from ..spec import DCGM_BLANK_MIN, Metric

#: the label of a ``count_values`` row of :func:`plausible` readings: "1" good, "0" bad
PLAUSIBLE = "gpumon_plausible"


def latest(ctx, m: Metric, *more: str) -> str:
    """``last_over_time(M{job, more}[3 scrapes])``: each series' latest sample now.

    Why the last 3 scrapes, not the instant vector ``M``: on a big fleet every selection reads
    every GPU's series, and an instant selector reads the server's whole lookback delta (5
    minutes; across blocks after a restart, a compaction or a backfill), 3 scrapes only the
    head. A series whose latest sample is older than 3 scrapes is not carried now: the presence
    check reports it (missing, gone or lost), and its last value is not a reading now."""
    return f"last_over_time({ctx.sel(m.name, *more)}[{recent_window(ctx)}])"


def recent_window(ctx) -> str:
    """"Now" as a PromQL range: the last 3 scrape intervals. One scrape that missed a field is an
    intermittent gap (the continuity check's job), not a missing series."""
    return format_duration(3 * max(1.0, ctx.scrape_interval))


def plausible(m: Metric, vector: str) -> str | None:
    """``1`` per series of ``vector`` whose reading of ``m`` is good, ``0`` per bad one, in one
    read and one comparison (a ``bool`` comparison is false for NaN, so NaN reads 0):

    * no range: ``x < bool 2^47``;
    * an upper bound only: ``x <= bool hi`` (the blank codes are above it);
    * both bounds, :func:`folded`: ``abs(x - mid) <= bool half``;
    * None otherwise (a lower bound only: the low side and the blank codes are two
      comparisons): the values check reads such a metric with :func:`exact`.

    A range's bounds are below the blank codes (the spec bounds them to 1e12).

    Measured at 8,000 GPUs (Prometheus 3.16 / 2.42): one read of a metric's last 3 scrapes
    costs 20 / 45 ms, :func:`exact` 55 / 105-160 ms."""
    lo, hi = m.range_min, m.range_max
    if lo is None:
        return f"{vector} <= bool {num(hi)}" if hi is not None else f"{vector} < bool {DCGM_BLANK_MIN}"
    if folded(m):
        return f"abs({vector} - {num((lo + hi) / 2)}) <= bool {num((hi - lo) / 2)}"
    return None


def judged(m: Metric) -> bool:
    """Whether :func:`plausible` tells ``m``'s good readings (one comparison)."""
    return plausible(m, "x") is not None


def folded(m: Metric) -> bool:
    """Whether ``m``'s range is told by one comparison of the distance from its middle: both
    bounds set, and the middle and half-width exact in float64, with both bounds exactly the
    half-width away (a reading on a bound is good). A reading outside the range by less than
    half a float64 step of the half-width (7e-15 for 0..100) reads as on the bound."""
    lo, hi = m.range_min, m.range_max
    if lo is None or hi is None or not lo < hi:
        return False
    mid, half = (lo + hi) / 2, (hi - lo) / 2
    return abs(hi - mid) == half and abs(lo - mid) == half and mid - half == lo and mid + half == hi


def exact(m: Metric, vector: str) -> str:
    """The bad readings of ``vector``, as read: ``x unless x >= lo <= hi < 2^47`` (two reads)."""
    keep = "".join(f" {op} {num(v)}" for op, v in ((">=", m.range_min), ("<=", m.range_max)) if v is not None)
    return f"{vector} unless {vector}{keep} < {DCGM_BLANK_MIN}"
