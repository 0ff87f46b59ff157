"""Scenarios for the value alerts: implausible readings (DCGM blank sentinel, NaN, outside the
spec range; NVIDIA/dcgm-exporter#460, grafana/grafana#13055), spec thresholds (firing, a single
spike as in intel/xpumanager#130, sentinel/NaN quiet), the XID identity change (NVIDIA/DCGM#227),
and frozen or reset counters (NVIDIA/dcgm-exporter#164, aitra-ai/aitra-meter#59)."""

from __future__ import annotations

import math

from collections import defaultdict

from ..rules import values
from ..rules.model import Rule
from ..spec import Metric, Spec, Threshold
from . import fleet
from .fleet import add_target, as_token, firing_value, gpu_ids, holds, steps
from .model import Firing, Scenario, test_step
from .series import NAN, STALE

#: a DCGM INT64 "not supported" code (0x7ffffffffffffff0 + 2; dcgm_structs.h) as exported
SENTINEL = 9223372036854775794
#: the one-scrape power spike of intel/xpumanager#130, watts
ABSURD_SPIKE = 3689342859416.54


def _by_alert(m: Metric) -> dict[str, list[Threshold]]:
    out: dict[str, list[Threshold]] = defaultdict(list)
    for t in m.thresholds:
        out[t.alert].append(t)
    return out


def _alert_label_values(m: Metric, value: float, healthy: bool) -> dict[str, str]:
    """Values for the metric's extra alert labels (``err_code``/``err_msg`` on XID; NVIDIA/DCGM#227)."""
    out = {}
    for name in m.alert_labels:
        if name == "err_code":
            out[name] = "0" if healthy else str(int(value))
        elif name == "err_msg":
            out[name] = "Unknown Error" if healthy else (
                "GPU has fallen off the bus" if value == 79 else "XID error")
        else:
            out[name] = "none" if healthy else "event"
    return out


def _severity(spec: Spec, m: Metric, t: Threshold) -> str:
    """The severity of ``t``'s rule: the threshold's, unless the spec's overrides change it."""
    return values.threshold(spec, m, t).label_map["severity"]


def _series(spec: Spec, gpu, m: Metric, extra: dict[str, str] | None = None) -> dict[str, str]:
    labels = fleet.series_labels(spec, gpu)
    labels.update(extra or {})
    return labels


#: every field's implausible scenarios share one test group per tier: the alerts carry the field
#: (``dcgm_field``) and the guards are per field, so the fields cannot meet, and promtool's work is per
#: group and per evaluation (one group per field took most of the values file's time)
ALL_FIELDS = "every spec'd field"


def _hold(rules: list[Rule], step: float) -> int:
    """Whole steps after which the slowest of ``rules`` fires for a condition true from step 0, plus two."""
    return max(steps(r.for_, step) for r in rules) + 2


def implausible(spec: Spec, metrics: list[Metric], step: float) -> Scenario:
    """One GPU per reason for each field of ``metrics``: sentinel, NaN, above and below the range
    (the bounds a field has). The implausible alert fires for each with its field and reason; no
    threshold alert fires, even after the longest ``for``. A fifth GPU reads plausible values of
    every field: these are per-GPU problems, not the node's or fleet's."""
    hold = max(_hold([values.implausible(spec, m)] + [values.threshold(spec, m, t) for t in m.thresholds], step)
               for m in metrics)
    sc = Scenario(f"{ALL_FIELDS}: sentinel {SENTINEL}, NaN and out-of-range readings are implausible; "
                  "no threshold alert fires", hold + 2, step)
    gpus = fleet.gpus(1, 5)
    add_target(sc, spec, gpus[0].instance)
    sibling = gpus[-1]
    quiet: set[str] = set()
    for m in metrics:
        rule = values.implausible(spec, m)
        cases = [("dcgm_blank", SENTINEL), ("nan", NAN), ("above_range", fleet.above_range(m)),
                 ("below_range", fleet.below_range(m))]
        ok = _alert_label_values(m, 0, healthy=True)
        sc.add(m.name, _series(spec, sibling, m, ok), sc.const(fleet.baseline(m)))
        firing = []
        for gpu, (reason, value) in zip(gpus, cases):
            if value is None:       # no such bound: a plausible reading on this GPU
                sc.add(m.name, _series(spec, gpu, m, ok), sc.const(fleet.baseline(m)))
                continue
            sc.add(m.name, _series(spec, gpu, m, ok), sc.const(value))
            ids = gpu_ids(spec, gpu, m)
            ids["reason"] = reason
            firing.append(Firing(rule, ids, float("nan") if value == NAN else float(value)))
        sc.expect(hold, rule.alert, firing)
        quiet.update(_by_alert(m))
    sc.quiet(hold, *sorted(quiet))
    return sc


def implausible_tiers(spec: Spec, metrics: list[Metric], step: float) -> list[Scenario]:
    """A DCGM blank of a field on every GPU of the fleet pages once (GpuFleetTelemetryImplausible),
    on every GPU of one node once for that node (GpuNodeTelemetryImplausible), never once per GPU
    (issue 11, item 2: 12 GpuTelemetryImplausible for one sentinel on DCGM_FI_DEV_MEMORY_TEMP):
    one page per field of ``metrics``, all blank at once."""
    # the three tiers' ``for`` differ when the spec's overrides change one of them (per alert or per field)
    hold = max(_hold([values.implausible(spec, m), values.node_implausible(spec, m), values.fleet_implausible(spec, m)],
                     step) for m in metrics)
    gpus = fleet.gpus(2, 2)
    everywhere = Scenario(f"{ALL_FIELDS}: a DCGM blank on every GPU of the fleet pages once per field for the fleet",
                          hold + 2, step)
    one_node = Scenario(f"{ALL_FIELDS}: a DCGM blank on every GPU of one node pages once per field for that node",
                        hold + 2, step)
    for sc in (everywhere, one_node):
        for inst in sorted({g.instance for g in gpus}):
            add_target(sc, spec, inst)
    quiet_everywhere: set[str] = set()
    quiet_one_node: set[str] = set()
    for m in metrics:
        impl, node_rule, fleet_rule = values.implausible(spec, m), values.node_implausible(spec, m), \
            values.fleet_implausible(spec, m)
        ok = _alert_label_values(m, 0, healthy=True)
        for g in gpus:
            everywhere.add(m.name, _series(spec, g, m, ok), everywhere.const(SENTINEL))
            bad = g.node == fleet.node_name(2)
            one_node.add(m.name, _series(spec, g, m, ok), one_node.const(SENTINEL if bad else fleet.baseline(m)))
        everywhere.expect(hold, fleet_rule.alert, [Firing(fleet_rule, {**fleet.fleet_labels(spec),
                                                                       "reason": "dcgm_blank"}, len(gpus))])
        quiet_everywhere.update((node_rule.alert, impl.alert))
        one_node.expect(hold, node_rule.alert, [Firing(node_rule, {**fleet.node_ids(spec, fleet.node_name(2)),
                                                                   "reason": "dcgm_blank"}, 2)])
        quiet_one_node.update((fleet_rule.alert, impl.alert))
    everywhere.quiet(hold, *sorted(quiet_everywhere))
    one_node.quiet(hold, *sorted(quiet_one_node))
    return [everywhere, one_node]


def threshold_fires(spec: Spec, m: Metric, t: Threshold, step: float) -> Scenario:
    """A plausible reading past ``t`` held for longer than ``for`` fires every rule of that alert
    name whose condition holds (e.g. 91 C fires the warning and the critical temperature rule)."""
    same = [x for x in m.thresholds if x.alert == t.alert]
    value = firing_value(m, t)
    # the rules' ``for``, which the spec's overrides may have changed from the thresholds'
    hold = max(steps(values.threshold(spec, m, x).for_, step) for x in same)
    start = 3
    sc = Scenario(f"{t.alert} ({_severity(spec, m, t)}): {m.name} {fleet.fmt_value(value)} {t.op} {fleet.fmt_value(t.value)} "
                  f"for longer than {fleet.fmt_seconds(values.threshold(spec, m, t).for_)} fires",
                  start + hold + 4, step)
    gpu = fleet.gpus(1, 1)[0]
    add_target(sc, spec, gpu.instance)
    base = fleet.baseline(m)
    healthy, faulty = _alert_label_values(m, base, True), _alert_label_values(m, value, False)
    if m.alert_labels and healthy != faulty:
        # NVIDIA/DCGM#227, a new XID changes the series identity (err_code "0" -> "79"); the old series goes stale.
        sc.add(m.name, _series(spec, gpu, m, healthy), [base] * start + [STALE])
        sc.add(m.name, _series(spec, gpu, m, faulty), ["_"] * start + [value] * (sc.length - start))
    elif m.alert_labels:
        # the firing reading keeps the healthy labels (err_code "0" for a reading below 1): one series
        sc.add(m.name, _series(spec, gpu, m, faulty), [base] * start + [value] * (sc.length - start))
    else:
        sc.add(m.name, _series(spec, gpu, m), [base] * start + [value] * (sc.length - start))
    sc.quiet(start - 1, t.alert)
    at = start + hold + 2
    firing = []
    for x in same:
        if holds(value, x):
            ids = gpu_ids(spec, gpu, m)
            ids.update(_alert_label_values(m, value, False))
            firing.append(Firing(values.threshold(spec, m, x), ids, value))
    sc.expect(at, t.alert, firing)
    sc.quiet(at, values.implausible(spec, m).alert)
    return sc


def rate_threshold_fires(spec: Spec, m: Metric, t: Threshold, step: float) -> Scenario:
    """A counter rising faster than ``t`` (per second, over ``t.rate``) on one GPU fires for that
    GPU only; a sibling whose counter resets (driver reload) stays quiet: rate() is reset safe
    (NVIDIA/DCGM#313: a correctable-ECC storm on one GPU of four)."""
    rule = values.threshold(spec, m, t)
    # a whole number of increments per second past the threshold: the rate Prometheus computes is then
    # exact, and so the value its annotation prints (2 x 1e-06 + 1 read back as 1.0000020000000007)
    per_s = float(math.floor(max(2 * t.value, t.value)) + 1) if t.op in (">", ">=") else 0.0
    inc = as_token(per_s * step)
    window, hold = steps(t.rate, step), steps(rule.for_, step)
    start = 2
    at = start + window + hold + 2
    sc = Scenario(f"{t.alert} ({_severity(spec, m, t)}): {m.name} rising {fleet.fmt_value(per_s)}/s on one GPU fires; "
                  "a counter reset on another does not", at + 2, step)
    storm, reset = fleet.gpus(1, 2)
    add_target(sc, spec, storm.instance)
    base = 1000
    sc.add(m.name, _series(spec, storm, m), [base] * start + [base + (i - start + 1) * inc for i in range(start, sc.length)])
    sc.add(m.name, _series(spec, reset, m), [base] * (start + 3) + [0] * (sc.length - start - 3))
    sc.quiet(start - 1, t.alert)
    sc.expect(at, t.alert, [Firing(rule, gpu_ids(spec, storm, m), per_s)])
    return sc


def threshold_spike(spec: Spec, m: Metric, t: Threshold, step: float) -> Scenario | None:
    """intel/xpumanager#130, one absurd (or merely high) sample does not fire a threshold with ``for``; an absurd
    one is reported as implausible at that step only. None when ``for`` is under two steps."""
    hold = steps(values.threshold(spec, m, t).for_, step)
    if hold < 2:
        return None
    impl = values.implausible(spec, m)
    absurd = m.range_max is not None and m.range_max < ABSURD_SPIKE
    spike = ABSURD_SPIKE if absurd else firing_value(m, t)
    base = fleet.baseline(m)
    at = 2
    sc = Scenario(f"{t.alert} ({_severity(spec, m, t)}): a single {fleet.fmt_value(spike)} spike of {m.name} does not fire",
                  at + hold + 4, step)
    gpu, sibling = fleet.gpus(1, 2)
    add_target(sc, spec, gpu.instance)
    sc.add(m.name, _series(spec, gpu, m, _alert_label_values(m, base, True)),
           [base] * at + [spike] + [base] * (sc.length - at - 1))
    sc.add(m.name, _series(spec, sibling, m, _alert_label_values(m, base, True)), sc.const(base))
    sc.quiet(at, t.alert)
    sc.quiet(at + hold + 2, t.alert)
    if absurd and impl.for_ <= step / 2:       # with implausible_for, one sample is not enough
        ids = gpu_ids(spec, gpu, m)
        ids["reason"] = "above_range"
        sc.expect(at, impl.alert, [Firing(impl, ids, spike)])
        sc.quiet(at + 1, impl.alert)
    return sc


def xid_policy(spec: Spec, m: Metric, step: float) -> list[Scenario]:
    """The spec's XID policy (issue 11, item 8): XID 79 pages critical, an unlisted code warning, an
    application XID (13) only informs; each resolves one policy window after the XID although the
    exporter keeps serving the code (NVIDIA/DCGM#227), where ``> 0`` stayed firing until a restart."""
    policy = m.xid
    window = steps(policy.window, step)
    start = 3
    sc = Scenario(f"{m.name}: XID policy by code; every XID alert resolves {fleet.fmt_seconds(policy.window)} "
                  "after the last new XID", start + window + 4, step)
    picks = {}
    for severity in ("critical", "warning", "info"):
        codes = policy.codes(severity)
        if policy.other == severity:
            listed = {c for lv in ("critical", "warning", "info", "ignore") for c in policy.codes(lv)}
            picks[severity] = next(c for c in range(62, 1000) if c not in listed)
        elif codes:
            picks[severity] = 79 if 79 in codes else codes[0]
    gpus = fleet.gpus(1, len(picks) + 1)
    add_target(sc, spec, gpus[0].instance)
    firing: dict[str, list[Firing]] = {}
    for gpu, (severity, code) in zip(gpus, picks.items()):
        rule = values.xid(spec, m, severity)
        healthy = _alert_label_values(m, 0, healthy=True)
        event = {**_alert_label_values(m, code, healthy=False), "err_code": str(code)} \
            if "err_code" in m.alert_labels else {}
        if event:
            sc.add(m.name, _series(spec, gpu, m, healthy), [0] * start + [STALE])
            sc.add(m.name, _series(spec, gpu, m, event), ["_"] * start + [code] * (sc.length - start))
        else:
            sc.add(m.name, _series(spec, gpu, m), [0] * start + [code] * (sc.length - start))
        ids = gpu_ids(spec, gpu, m)
        ids.update({k: v for k, v in event.items() if k in m.alert_labels})
        firing[rule.alert] = [Firing(rule, ids, code)]
    quiet_gpu = gpus[-1]            # err_code 0 all along: never an XID alert
    sc.add(m.name, _series(spec, quiet_gpu, m, _alert_label_values(m, 0, healthy=True)), sc.const(0))
    for name, f in firing.items():
        sc.quiet(start - 1, name)
        sc.expect(start + 1, name, f)
        sc.quiet(start + window + 2, name)
    return [sc]


def frozen(spec: Spec, m: Metric, step: float) -> list[Scenario]:
    """NVIDIA/dcgm-exporter#164, the counter stops increasing while the target is up -> frozen alert after window +
    ``for``; aitra-ai/aitra-meter#59, a counter reset (driver reload) is not frozen."""
    rule = values.frozen(spec, m)
    window = steps(max(spec.alerts.frozen_window, 10 * spec.exporter.collect_interval), step)
    hold = steps(rule.for_, step)
    inc = fleet.counter_increment(m, step) or 1.0
    flat_at = 5
    length = flat_at + window + hold + 4
    sc = Scenario(f"{m.name} constant while the target is up: frozen telemetry", length, step)
    gpu = fleet.gpus(1, 1)[0]
    add_target(sc, spec, gpu.instance)
    samples = [fleet.as_token(i * inc) for i in range(flat_at)] + [fleet.as_token(flat_at * inc)] * (length - flat_at)
    sc.add(m.name, _series(spec, gpu, m), samples)
    sc.quiet(flat_at + window // 2, rule.alert)
    at = flat_at + window + hold + 2
    sc.expect(at, rule.alert, [Firing(rule, gpu_ids(spec, gpu, m), 0)])

    reset_at = 6
    rlen = reset_at + window + hold + 4
    reset = Scenario(f"{m.name} resets (driver reload): no frozen alert", rlen, step)
    add_target(reset, spec, gpu.instance)
    post = [fleet.as_token(1000 + i * inc) for i in range(rlen - reset_at)]
    reset.add(m.name, _series(spec, gpu, m), [fleet.as_token(i * inc) for i in range(reset_at)] + post)
    for at in (reset_at + 1, reset_at + window // 2, reset_at + window + 1, rlen - 2):
        reset.quiet(at, rule.alert)
    return [sc, reset]


def profiling_stuck(spec: Spec, step: float) -> list[Scenario]:
    """NVIDIA/dcgm-exporter#164, a GPU busy by GPU_UTIL while PROF_GR_ENGINE_ACTIVE reads 0 fires after ``for``; the
    same utilisation with engine activity above 0 stays quiet."""
    rule = values.profiling_stuck(spec)
    if rule is None:
        return []
    busy_name, level, prof_name = values.PROFILING_PAIR
    busy, prof = spec.metric(busy_name), spec.metric(prof_name)
    hold = steps(rule.for_, step)
    out = []
    for active, fires in ((0, True), (0.8, False)):
        verdict = "fires" if fires else "stays quiet"
        sc = Scenario(f"{busy.name} {level + 5} with {prof.name} {fleet.fmt_value(active)}: profiling-stuck alert "
                      f"{verdict}", hold + 6, step)
        gpu = fleet.gpus(1, 1)[0]
        add_target(sc, spec, gpu.instance)
        sc.add(busy.name, _series(spec, gpu, busy), sc.const(level + 5))
        sc.add(prof.name, _series(spec, gpu, prof), sc.const(active))
        sc.quiet(2, rule.alert)
        if fires:
            sc.expect(hold + 3, rule.alert, [Firing(rule, gpu_ids(spec, gpu, busy), level + 5)])
        else:
            sc.quiet(hold + 3, rule.alert)
        out.append(sc)
    return out


def scenarios(spec: Spec, rules: list[Rule]) -> list[Scenario]:
    """Every value scenario for ``spec``: implausible per metric, thresholds, frozen counters, and
    the profiling-stuck divergence."""
    step = test_step(spec)
    out: list[Scenario] = []
    out.append(implausible(spec, list(spec.metrics), step))
    out += implausible_tiers(spec, list(spec.metrics), step)
    for m in spec.metrics:
        for t in m.thresholds:
            if t.rate is not None:
                out.append(rate_threshold_fires(spec, m, t, step))
                continue
            out.append(threshold_fires(spec, m, t, step))
            spike = threshold_spike(spec, m, t, step)
            if spike:
                out.append(spike)
        if m.frozen_check:
            out += frozen(spec, m, step)
        if m.xid is not None:
            out += xid_policy(spec, m, step)
    return out + profiling_stuck(spec, step)
