"""A made-up GPU fleet for rule tests: nodes, GPUs (optionally MIG instances), the labels
dcgm-exporter puts on their series, and plausible readings derived from the spec.

Label names all come from the spec (``exporter.labels``), so a spec that renames ``Hostname``
to ``hostname`` or adds a ``cluster`` label gets tests with those names.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..durations import format_duration
from ..spec import Metric, Spec, Threshold
from .model import Scenario
from .series import STALE, Token, fmt

#: dcgm-exporter's default port (source: dcgm-exporter ``--address`` default ``:9400``)
EXPORTER_PORT = 9400
#: label values tests use for the cluster label when the spec names one
CLUSTER = "gpu-cluster-a"
#: a second cluster's label value, for scenarios with two clusters behind one (global) ruler
CLUSTER_B = "gpu-cluster-b"
#: the MIG profile label dcgm-exporter writes next to GPU_I_ID
MIG_PROFILE_LABEL = "GPU_I_PROFILE"
#: a steady power draw the energy counter is built from (watts)
ENERGY_WATTS = 300.0


@dataclass(frozen=True)
class Gpu:
    """One GPU, or one MIG instance (``mig`` set) of it, behind exporter target ``instance``."""

    node: str
    index: int
    uuid: str
    instance: str
    mig: str | None = None


def node_name(n: int) -> str:
    """Node name ``gpu-node-<n>``."""
    return f"gpu-node-{n}"


def instance_of(n: int) -> str:
    """Exporter target address of node ``n`` (``10.0.0.<n>:9400``)."""
    return f"10.0.0.{n}:{EXPORTER_PORT}"


def gpus(nodes: int = 2, per_node: int = 2, first_node: int = 1) -> list[Gpu]:
    """``nodes`` x ``per_node`` plain GPUs (UUIDs are stable and unique per node and index)."""
    return [Gpu(node_name(n), i, f"GPU-{n:08x}-0000-4000-8000-{i:012x}", instance_of(n))
            for n in range(first_node, first_node + nodes) for i in range(per_node)]


def mig_instances(node: int, index: int = 0, count: int = 4) -> list[Gpu]:
    """``count`` MIG instances (GPU_I_ID 1..count) of GPU ``index`` on node ``node``."""
    uuid = f"GPU-{node:08x}-0000-4000-8000-{index:012x}"
    return [Gpu(node_name(node), index, uuid, instance_of(node), mig=str(i)) for i in range(1, count + 1)]


def target_labels(spec: Spec, instance: str) -> dict[str, str]:
    """Labels of a target's ``up`` / ``scrape_*`` series (and of exporter alerts)."""
    out = {"job": spec.exporter.job, "instance": instance}
    if spec.exporter.labels.cluster:
        out[spec.exporter.labels.cluster] = CLUSTER
    return out


def series_labels(spec: Spec, gpu: Gpu, node_label: str | None = None) -> dict[str, str]:
    """Labels dcgm-exporter (plus the scrape) puts on a GPU series. ``node_label`` overrides the
    node label's name (to model an exporter that writes ``hostname``)."""
    lab = spec.exporter.labels
    out = target_labels(spec, gpu.instance)
    own = {lab.node, lab.gpu, lab.gpu_index, lab.mig_instance, lab.model, lab.cluster}
    # (name, value, the spec's own label): dcgm-exporter's labels beside the spec's (the device file,
    # the MIG profile) are left out where the spec names one of them as its own (gpu_index: device)
    labels = [(lab.gpu_index, str(gpu.index), True), (lab.gpu, gpu.uuid, True),
              ("device", f"nvidia{gpu.index}", False), (lab.model, "NVIDIA H100 80GB HBM3", True),
              (node_label or lab.node, gpu.node, True)]
    if gpu.mig is not None:
        labels += [(lab.mig_instance, gpu.mig, True), (MIG_PROFILE_LABEL, "1g.10gb", False)]
    out.update((name, value) for name, value, spec_label in labels if spec_label or name not in own)
    return out


def gpu_ids(spec: Spec, gpu: Gpu, metric: Metric | None = None, instance: bool = False) -> dict[str, str]:
    """The identity labels an aggregated per-GPU result keeps (job first), mirroring
    ``gpumon.rules.promql.gpu_ids``: device-wide fields drop the MIG instance label; an
    empty label (plain GPU without MIG) is not a label at all."""
    lab = spec.exporter.labels
    out = {"job": spec.exporter.job}
    if instance:
        out["instance"] = gpu.instance
    if lab.cluster:
        out[lab.cluster] = CLUSTER
    out.update({lab.node: gpu.node, lab.gpu: gpu.uuid, lab.gpu_index: str(gpu.index)})
    if gpu.mig is not None and (metric is None or metric.mig != "device"):
        out[lab.mig_instance] = gpu.mig
    return out


def fleet_labels(spec: Spec) -> dict[str, str]:
    """Labels of job-level aggregates: ``job`` plus the cluster label when the spec names one
    (mirrors ``gpumon.rules.promql.fleet_ids``)."""
    out = {"job": spec.exporter.job}
    if spec.exporter.labels.cluster:
        out[spec.exporter.labels.cluster] = CLUSTER
    return out


def node_ids(spec: Spec, node: str) -> dict[str, str]:
    """``job`` plus the node identity labels."""
    out = {"job": spec.exporter.job}
    if spec.exporter.labels.cluster:
        out[spec.exporter.labels.cluster] = CLUSTER
    out[spec.exporter.labels.node] = node
    return out


# --------------------------------------------------------------------------- values


def holds(value: float, t: Threshold) -> bool:
    """Whether ``value <op> threshold`` is true."""
    return {">": value > t.value, ">=": value >= t.value, "<": value < t.value,
            "<=": value <= t.value, "==": value == t.value, "!=": value != t.value}[t.op]


def _bounds(m: Metric) -> tuple[float, float]:
    """The span healthy readings are picked from: the spec range, an open end 0 (below) or 100
    above the other end, widened past every threshold on an open end (a gauge without a maximum
    and ``< 331`` took 100 as its healthy reading, which the threshold pages on: found by the
    spec fuzzer)."""
    # healthy readings lie above the low thresholds (`<`) and below the high ones (`>`)
    low = [t.value for t in m.thresholds if t.rate is None and t.op in ("<", "<=")]
    high = [t.value for t in m.thresholds if t.rate is None and t.op in (">", ">=")]
    lo = m.range_min if m.range_min is not None else min([0.0] + [v - 100.0 for v in high if v <= 0])
    top = max(lo, 0.0) + 100.0
    hi = m.range_max if m.range_max is not None else max([top] + [v + 100.0 for v in low if v >= top])
    return float(lo), float(hi)


def baseline(m: Metric) -> float:
    """A plausible reading of gauge ``m`` that trips no threshold: the middle of the spec range
    narrowed by the thresholds (e.g. GPU_TEMP [5, 110] with ``> 83`` -> 44)."""
    lo, hi = _bounds(m)
    for t in m.thresholds:
        if t.op in (">", ">="):
            hi = min(hi, t.value)
        elif t.op in ("<", "<="):
            lo = max(lo, t.value)
    mid = (lo + hi) / 2
    value = float(math.floor(mid)) if hi - lo >= 2 else mid
    if any(holds(value, t) for t in m.thresholds):
        value = lo if not any(holds(lo, t) for t in m.thresholds) else hi
    return value


def firing_value(m: Metric, t: Threshold) -> float:
    """A plausible reading of ``m`` that trips threshold ``t``: one unit past it, or the range bound
    when that is closer (``> 0`` on range [0, 1] -> 1; ``>= 110`` on [5, 110] -> 110, the bound
    itself). A threshold beyond the bound (or ``>`` on it) can never fire: the spec refuses it."""
    up = t.op in (">", ">=")
    bound = m.range_max if up else m.range_min
    delta = 1.0
    if bound is not None and abs(bound - t.value) < 1:
        delta = abs(bound - t.value) or (0.0 if t.op in (">=", "<=") else 1.0)
    if m.alert_labels and up and holds(79.0, t) and (bound is None or 79.0 <= bound):
        return 79.0                     # XID 79, "GPU has fallen off the bus" (NVIDIA/DCGM#227)
    return t.value + delta if up else t.value - delta


def above_range(m: Metric) -> float | None:
    """An implausibly high reading (below the DCGM blank range), or None without a maximum."""
    if m.range_max is None:
        return None
    return m.range_max + max(1.0, abs(m.range_max))


def below_range(m: Metric) -> float | None:
    """An implausibly low reading (e.g. 0 C / 0 W for ranges starting at 5 / 1), or None."""
    if m.range_min is None:
        return None
    return m.range_min - max(1.0, abs(m.range_min)) if m.range_min <= 0 else 0.0


def counter_increment(m: Metric, step: float) -> float:
    """Per-step increase of a healthy counter: ENERGY_WATTS for energy in millijoules
    (300 W x 60 s = 18,000,000 mJ per minute, aitra-ai/aitra-meter#59), else 0 (error counters stay
    flat on a healthy GPU) or 1 when the spec checks the counter for freezing."""
    if m.unit == "millijoules":
        return ENERGY_WATTS * step * 1000
    return 1.0 if m.frozen_check else 0.0


def healthy_increment(m: Metric, step: float) -> float:
    """Per-step increase of counter ``m`` on a healthy GPU: :func:`counter_increment`, or half the
    lowest ``>``/``>=`` rate threshold when that rise would cross it (e.g. ``> 100000`` mJ/s on
    the energy counter, which 300 W passes): a healthy GPU trips no threshold, as
    :func:`baseline` keeps gauges below theirs."""
    inc = counter_increment(m, step)
    caps = [t.value for t in m.thresholds if t.rate is not None and t.op in (">", ">=")]
    if inc and caps and inc / step >= min(caps):
        inc = min(caps) / 2 * step
    return inc


def healthy(m: Metric, length: int, step: float) -> list[Token]:
    """``length`` healthy samples of ``m``."""
    if m.kind == "counter":
        inc = healthy_increment(m, step)
        return [as_token(i * inc) for i in range(length)]
    return [as_token(baseline(m))] * length


def as_token(v: float) -> Token:
    """``v`` as a series token: an int when whole (exact in the values string)."""
    return int(v) if float(v).is_integer() and abs(v) < 2**53 else v


def lost_from(samples: list[Token], at: int) -> list[Token]:
    """``samples`` until step ``at``, where the series goes stale (vanishes from the scrape)."""
    return samples[:at] + [STALE]


def add_gpu(sc: Scenario, spec: Spec, gpu: Gpu, metrics: tuple[Metric, ...] | list[Metric],
            overrides: dict[str, list[Token]] | None = None, node_label: str | None = None,
            extra: dict[str, str] | None = None) -> None:
    """Add healthy series of ``metrics`` for ``gpu``; ``overrides`` replaces a metric's samples
    by name; ``extra`` adds labels (e.g. the exporter pod's ``pod``/``namespace`` target labels).
    On a MIG instance, fields the spec marks ``mig: unsupported`` are not exported."""
    overrides = overrides or {}
    for m in metrics:
        if gpu.mig is not None and m.mig == "unsupported":
            continue
        samples = overrides.get(m.name, healthy(m, sc.length, sc.step))
        sc.add(m.name, {**series_labels(spec, gpu, node_label), **(extra or {})}, samples)


def add_target(sc: Scenario, spec: Spec, instance: str, up: list[Token] | None = None,
               samples_scraped: list[Token] | None = None, duration: list[Token] | None = None,
               extra: dict[str, str] | None = None) -> None:
    """Add a target's ``up``, ``scrape_samples_scraped`` and ``scrape_duration_seconds``
    (healthy by default: up, 120 samples, 10% of the scrape timeout); ``extra`` adds target labels."""
    labels = {**target_labels(spec, instance), **(extra or {})}
    up = up if up is not None else sc.const(1)
    if samples_scraped is None:
        samples_scraped = [120 if u == 1 else 0 for u in up]
    if duration is None:
        duration = sc.const(as_token(round(spec.exporter.scrape_timeout * 0.1, 3)))
    if STALE in up:                     # a removed target: all its series go stale together
        gone = up.index(STALE)
        samples_scraped, duration = lost_from(samples_scraped, gone), lost_from(duration, gone)
    sc.add("up", labels, up)
    sc.add("scrape_samples_scraped", labels, samples_scraped)
    sc.add("scrape_duration_seconds", labels, duration)


def down_from(sc: Scenario, at: int) -> list[Token]:
    """``up`` samples of a target that fails every scrape from step ``at``."""
    return [1] * at + [0] * (sc.length - at)


def pending_step(start: int, for_s: float, step: float) -> int | None:
    """A step at which a condition true from step ``start`` is still pending (``for_s`` not over,
    at least half a step from the transition), or None when ``for`` is under two steps. The
    condition is first seen at the evaluation on ``start``; at step k (+ half a step) it has
    lasted (k + 0.5 - start) steps."""
    k = start + steps(for_s, step) - 2
    return k if k >= start else None


def steps(seconds: float, step: float) -> int:
    """Whole steps covering ``seconds``."""
    return int(math.ceil(seconds / step))


def fmt_value(value: float) -> str:
    """A reading for scenario names: ``91`` not ``91.0``."""
    return fmt(as_token(value) if isinstance(value, float) else value)


def fmt_seconds(seconds: float) -> str:
    """A duration for scenario names (``5m``)."""
    return format_duration(seconds)
