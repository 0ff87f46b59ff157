"""Small PromQL builders shared by the rule constructors (strings only; validity is checked by
tests with promql-parser and promtool). Values go into PromQL only through
:func:`gpumon.promqltext.quote`."""

from __future__ import annotations

import math

from .. import promqltext
from ..durations import format_duration
from ..spec import DCGM_BLANK_MIN, Metric, Spec


def selector(metric: str, **matchers: str) -> str:
    """``metric{k="v",...}`` with equality matchers in the given order; values are escaped."""
    inner = promqltext.matchers(matchers)
    return promqltext.series(metric, inner, bare=True)


def by(labels: tuple[str, ...] | list[str]) -> str:
    """``job, Hostname, UUID`` for ``by (...)`` / ``on (...)`` clauses."""
    return ", ".join(labels)


def dur(seconds: float) -> str:
    """A PromQL range/offset duration for ``seconds`` (``1800`` -> ``30m``)."""
    return format_duration(seconds)


def num(value: float) -> str:
    """A number as PromQL writes it: ``83`` not ``83.0``."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def fields_sel(spec: Spec, metrics, *more: str) -> str:
    """``(A{job="<exporter job>"<,more>} or B{...} ...)``: the series of several fields in one
    expression, for a ``group by`` that only needs their labels (``or`` keeps one series per label
    set, so a GPU reporting several of the fields appears once). One selector per name, no regex
    on metric names (the rules' convention, ``tests/test_render.py``); ``more`` are matcher
    strings such as ``'Hostname=""'``."""
    extra = "".join(f",{x}" for x in more)
    job = promqltext.matcher("job", spec.exporter.job)
    return "(" + " or ".join(promqltext.series(m.name, f"{job}{extra}") for m in metrics) + ")"


def named(spec: Spec, expr: str, labels: tuple[str, ...] | None = None) -> str:
    """``expr`` (a per-GPU set) without its series that lack the node or the GPU label
    (``labels``: default both): the only ones the inventory, and every set built on it, may hold.
    A series without them (an exporter writing ``hostname`` after 4.8.2, a relabelling that drops
    ``Hostname``) is :func:`gpumon.rules.inventory.unlabelled`'s, paged once per target as
    GpuIdentityLabelMissing. In the inventory it made one GPU set of a node named "", which the
    known set held for ever: once the label came back, every GPU of it paged GpuLost without a
    node, never ending.

    ``unless on (<label>) vector(1)`` drops exactly the series where the label is empty (the one
    sample of ``vector(1)`` has it empty), after the set is built, from its few series; a
    ``label!=""`` matcher on the selectors instead merges the index postings of every value of the
    label (every UUID) once per selector and evaluation (:func:`gpumon.rules.inventory.unlabelled`)."""
    lab = spec.exporter.labels
    return f"{expr}" + "".join(f"\nunless on ({label}) vector(1)" for label in (labels or (lab.node, lab.gpu)))


def job_sel(spec: Spec, metric: str) -> str:
    """``metric{job="<exporter job>"}``."""
    return selector(metric, job=spec.exporter.job)


def gpu_ids(spec: Spec, metric: Metric | None = None) -> tuple[str, ...]:
    """Labels that identify the entity a metric's value belongs to, job first.

    Device-wide fields on MIG (``mig: device``) are repeated on every MIG instance, so their
    entity is the GPU (the MIG instance label is left out, which de-duplicates by UUID).
    """
    labels = spec.exporter.labels
    ids = labels.identity
    if metric is not None and metric.mig == "device":
        ids = tuple(x for x in ids if x != labels.mig_instance)
    return ("job",) + ids


def fleet_ids(spec: Spec) -> tuple[str, ...]:
    """``job`` plus the cluster label when the spec has one: the level of fleet-wide aggregates."""
    cluster = spec.exporter.labels.cluster
    return ("job",) + ((cluster,) if cluster else ())


def node_ids(spec: Spec) -> tuple[str, ...]:
    """``job`` plus the labels that identify a node."""
    return ("job",) + spec.exporter.labels.node_identity


def plausible_filter(metric: Metric) -> str:
    """Comparison filters keeping plausible readings only: inside the spec range, below the DCGM
    blank sentinels (dcgm_structs.h) and not NaN (every comparison with NaN is false).
    Returns e.g. `` >= 5 <= 110``, to append to a selector."""
    out = ""
    if metric.range_min is not None:
        out += f" >= {num(metric.range_min)}"
    if metric.range_max is not None:   # below the blank codes: the spec bounds a range to 1e12
        out += f" <= {num(metric.range_max)}"
    else:
        out += f" < {DCGM_BLANK_MIN}"
    return out


def implausible_ceiling(metric: Metric) -> float | None:
    """The largest plausible reading of ``metric`` when its plausible readings are exactly those
    ``<=`` it (no lower bound): the spec's upper bound, or, without one, the float64 just below
    the first DCGM blank code (2^47 - 2^-6: no float lies between the two, so ``x <= it`` is
    ``x < 2^47``, as :func:`plausible_filter`). ``None`` when a lower bound makes the plausible
    set two-sided.

    ``clamp_min(x, c) != c`` then keeps exactly the implausible readings, as read, in one read of
    the series: a reading above ``c`` unchanged, NaN as NaN (``clamp_min`` is Go's ``math.Max``,
    NaN when either side is, and NaN compares unequal), everything else lands on ``c`` and is
    dropped."""
    if metric.range_min is not None:
        return None
    if metric.range_max is not None:
        return float(metric.range_max)
    return math.nextafter(float(DCGM_BLANK_MIN), 0.0)


def reading_sel(spec: Spec, metric: Metric) -> str:
    """Where rules read ``metric``'s values: its series of the exporter job, or, when the spec
    lists ``sources`` for it, its normalized per-GPU series (``generator/gpumon/rules/sources.py``;
    label ``source`` added, ``instance`` and workload labels gone)."""
    if not metric.sources:
        return job_sel(spec, metric.name)
    from . import names   # names imports nothing; kept local so this module's imports stay as they were
    return selector(names.NORMALIZED, job=spec.exporter.job, **{names.FIELD_LABEL: metric.name})


def valid_values(spec: Spec, metric: Metric) -> str:
    """The metric's readings (:func:`reading_sel`) filtered by :func:`plausible_filter`."""
    return reading_sel(spec, metric) + plausible_filter(metric)
