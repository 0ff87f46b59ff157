"""Scenarios for intermittent gaps: a field present only half the time fires; one missed
scrape, or a GPU that appeared recently (short history), does not."""

from __future__ import annotations

import math

from ..rules import gaps, presence
from ..rules.model import Rule
from ..spec import Spec
from . import fleet
from .fleet import add_gpu, add_target, gpu_ids, steps
from .model import Firing, Scenario, test_step, window_value
from .series import MISSING, STALE


def intermittent(spec: Spec, step: float) -> list[Scenario]:
    """One field present in every other scrape of one GPU fires (value = share of scrapes); a single
    missed scrape and a GPU that appeared half way through the window do not."""
    rule = gaps.intermittent(spec)
    if not spec.required_metrics:
        return []
    m = spec.required_metrics[0]
    window = steps(spec.alerts.gap_window, step)
    hold = steps(rule.for_, step)
    length = window + hold + 4
    sc = Scenario(f"{m.name} present in half the scrapes of one GPU: gap alert; one missed scrape "
                  "or a new GPU: none", length, step)
    g_half, g_once, g_new = fleet.gpus(1, 3)
    healthy = fleet.healthy(m, length, step)
    half = [s if i % 2 == 0 else STALE for i, s in enumerate(healthy)]
    once = list(healthy)
    once[length - hold - 3] = STALE               # one missed scrape inside the window
    add_target(sc, spec, g_half.instance)
    add_gpu(sc, spec, g_half, spec.required_metrics, {m.name: half})
    add_gpu(sc, spec, g_once, spec.required_metrics, {m.name: once})
    born = window // 2                             # appears half way through the window
    add_gpu(sc, spec, g_new, spec.required_metrics,
            {x.name: ["_"] * born + fleet.healthy(x, length, step)[born:] for x in spec.required_metrics})
    at = length - 2
    seen = window_value(half, at, window)
    scrapes = window_value(sc.const(1), at, window)
    ids = gpu_ids(spec, g_half)
    ids["dcgm_field"] = m.name
    sc.expect(at, rule.alert, [Firing(rule, ids, len(seen) / len(scrapes))])
    return [sc]


def whole_gpu_intermittent(spec: Spec, step: float) -> list[Scenario]:
    """Every field of one GPU present in half the scrapes (the exporter drops the GPU now and
    then): the GPU flickers in and out of the inventory, and the gap alert still fires, once per
    required field."""
    rule = gaps.intermittent(spec)
    if not spec.required_metrics:
        return []
    window = steps(spec.alerts.gap_window, step)
    hold = steps(rule.for_, step)
    length = window + hold + 4
    sc = Scenario("every field of one GPU present in half the scrapes: one gap alert per required field",
                  length, step)
    g_half, g_ok = fleet.gpus(1, 2)
    add_target(sc, spec, g_half.instance)
    halves = {m.name: [s if i % 2 == 0 else STALE for i, s in enumerate(fleet.healthy(m, length, step))]
              for m in spec.required_metrics}
    add_gpu(sc, spec, g_half, spec.required_metrics, halves)
    add_gpu(sc, spec, g_ok, spec.required_metrics)
    at = length - 2
    scrapes = window_value(sc.const(1), at, window)
    firing = []
    for m in spec.required_metrics:
        ids = gpu_ids(spec, g_half)
        ids["dcgm_field"] = m.name
        firing.append(Firing(rule, ids, len(window_value(halves[m.name], at, window)) / len(scrapes)))
    sc.expect(at, rule.alert, firing)
    return [sc]


def dropped_for_good(spec: Spec, step: float) -> list[Scenario]:
    """A field dropped for good on one GPU, and another dropped fleet-wide, after a full gap window
    of history: their sample ratios fall below the minimum, but the fields are missing *now*, which
    is the presence tiers' case (GpuMetricMissing, GpuMetricAbsent). GpuMetricIntermittent stays
    quiet (issue 11, item 1: it paged once per GPU from ~11 to ~30 min after the drop)."""
    rule = gaps.intermittent(spec)
    req = spec.required_metrics
    if len(req) < 3:                  # one field per GPU, one fleet-wide, and one left for the inventory
        return []
    m_gpu, m_fleet = req[0], req[1]
    window = steps(spec.alerts.gap_window, step)
    hold = steps(rule.for_, step)
    drop = window + 1                 # a whole window of history first
    # the ratio is below the minimum from about (1 - min) x window after the drop, then ``for``;
    # and GpuMetricMissing's own ``for`` is over (the spec's overrides may make it the longer one)
    gpu_rule = presence.gpu_metric_missing(spec, m_gpu)
    at = max(drop + math.ceil((1 - spec.alerts.gap_min_ratio) * window) + hold,
             drop + steps(gpu_rule.for_, step)) + 2
    if at >= drop + window - 1:       # the ratio series ends one window after the drop
        return []
    sc = Scenario(f"{m_gpu.name} dropped for good on one GPU and {m_fleet.name} fleet-wide: presence alerts, "
                  "no gap alert", at + 2, step)
    gpus = fleet.gpus(2, 2)
    victim = gpus[1]
    add_target(sc, spec, fleet.instance_of(1))
    add_target(sc, spec, fleet.instance_of(2))
    for g in gpus:
        over = {m_fleet.name: fleet.lost_from(fleet.healthy(m_fleet, sc.length, step), drop)}
        if g == victim:
            over[m_gpu.name] = fleet.lost_from(fleet.healthy(m_gpu, sc.length, step), drop)
        add_gpu(sc, spec, g, req, over)
    sc.quiet(at, rule.alert)
    sc.expect(at, gpu_rule.alert, [Firing(gpu_rule, fleet.gpu_ids(spec, victim), 1)])
    absent = presence.metric_absent(spec, m_fleet)
    if at >= drop + steps(absent.for_, step) + 1:
        sc.expect(at, absent.alert, [Firing(absent, fleet.fleet_labels(spec), 1)])
    return [sc]


def outage_then_back(spec: Spec, step: float) -> list[Scenario]:
    """One field missing on one GPU, and every field of another GPU, for longer than ``for`` after
    a full gap window of history, then back: GpuMetricMissing and GpuLost page during the outage.
    Their sample ratios stay below the minimum for most of a gap window after it, and
    GpuMetricIntermittent stays quiet then: one cause, one page (it paged once per field and GPU
    after the outage; the gap alert leaves what a presence alert paged, ``gaps.explained_by``)."""
    rule = gaps.intermittent(spec)
    req = spec.required_metrics
    if not req:
        return []
    m = req[0]
    window = steps(spec.alerts.gap_window, step)
    hold = steps(rule.for_, step)
    recent = steps(presence.lost_window(spec), step)
    missing, lost = presence.gpu_metric_missing(spec, m), presence.gpu_lost(spec)
    if lost.disabled:
        return []       # nothing pages the lost GPU: its gaps afterwards are the only page, rightly
    # the presence alerts' ``for`` (the spec's overrides may change them from the gap alert's)
    miss_hold, lost_hold = steps(missing.for_, step), steps(lost.for_, step)
    start = window + 1                                  # a whole window of history first
    # long enough for GpuLost and GpuMetricMissing, and to push the ratio below the minimum
    out = max(max(hold, miss_hold, lost_hold) + recent + 3, math.ceil((1 - spec.alerts.gap_min_ratio) * window) + 2)
    back = start + out
    checks = sorted({back + hold + 2, back + max(hold + 2, window // 2)})
    sc = Scenario(f"{m.name} missing on one GPU and every field of another for longer than for, then back: "
                  "presence alerts during the outage, no gap alert after it", checks[-1] + 2, step)
    g_field, g_lost, _ = gpus = fleet.gpus(1, 3)
    if len(req) < 2 or missing.disabled:
        # the only required field gone is the GPU gone (GpuLost's case); or the spec's overrides
        # switch GpuMetricMissing off, and the gap the outage leaves is then the one page about it
        g_field = None

    def outage(samples: list) -> list:
        return samples[:start] + [STALE] + [MISSING] * (out - 1) + samples[back:]

    add_target(sc, spec, g_lost.instance)
    for g in gpus:
        over = {}
        if g == g_field:
            over[m.name] = outage(fleet.healthy(m, sc.length, step))
        elif g == g_lost:
            over = {x.name: outage(fleet.healthy(x, sc.length, step)) for x in req}
        add_gpu(sc, spec, g, req, over)
    if g_field is not None:
        sc.expect(start + miss_hold + 2, missing.alert, [Firing(missing, fleet.gpu_ids(spec, g_field), 1)])
    sc.expect(start + recent + lost_hold + 1, lost.alert, [Firing(lost, fleet.gpu_ids(spec, g_lost), 1)])
    for k in checks:
        sc.quiet(k, rule.alert)
    return [sc]


def scenarios(spec: Spec, rules: list[Rule]) -> list[Scenario]:
    """Every gap scenario for ``spec``."""
    step = test_step(spec)
    return (intermittent(spec, step) + whole_gpu_intermittent(spec, step) + dropped_for_good(spec, step)
            + outage_then_back(spec, step))
