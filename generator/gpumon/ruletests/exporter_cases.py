"""Scenarios for the exporter-target alerts: target missing, down, flapping, empty scrapes and
slow scrapes (both in NVIDIA/dcgm-exporter#607)."""

from __future__ import annotations

from ..rules import exporter
from ..rules.model import Rule
from ..spec import Spec
from . import fleet
from .fleet import add_target, steps, target_labels
from .model import Firing, Scenario, test_step, window_value


def target_missing(spec: Spec, step: float) -> list[Scenario]:
    """The job has no ``up`` series at all, or its last target is removed: one alert ``{job}``."""
    rule = exporter.target_missing(spec)
    hold = steps(rule.for_, step)
    job = {"job": spec.exporter.job}
    # The job never had a target (scrape config or ServiceMonitor selects nothing).
    never = Scenario("exporter target missing: no up series for the job at all", hold + 4, step)
    never.add("up", {"job": "node-exporter", "instance": "10.0.0.1:9100"}, never.const(1))
    cluster = spec.exporter.labels.cluster
    never.expect(hold + 2, rule.alert, [Firing(rule, {**job, cluster: exporter.NO_CLUSTER} if cluster else job, 1)])
    # The only target is removed (DaemonSet deleted): up goes stale.
    gone_at = 3
    removed = Scenario("exporter target missing: the last target is removed", gone_at + hold + 4, step)
    add_target(removed, spec, fleet.instance_of(1), up=[1] * gone_at + ["stale"])
    removed.quiet(gone_at - 1, rule.alert)
    # with a cluster label the alert names the cluster that lost its targets
    removed.expect(gone_at + hold + 2, rule.alert, [Firing(rule, fleet.fleet_labels(spec), 1)])
    out = [never, removed]
    if cluster:
        # issue 11, item 4: one cluster's targets all vanish while another cluster's stay (a global ruler)
        lost = Scenario("exporter target missing: every target of one cluster vanishes, another cluster stays",
                        gone_at + hold + 4, step)
        add_target(lost, spec, fleet.instance_of(1))
        add_target(lost, spec, fleet.instance_of(3), up=[1] * gone_at + ["stale"], extra={cluster: fleet.CLUSTER_B})
        lost.quiet(gone_at - 1, rule.alert)
        lost.expect(gone_at + hold + 2, rule.alert, [Firing(rule, {**job, cluster: fleet.CLUSTER_B}, 1)])
        out.append(lost)
    return out


def down(spec: Spec, step: float) -> list[Scenario]:
    """One of two targets fails every scrape: pending during ``for``, then one alert for that instance."""
    rule = exporter.down(spec)
    hold = steps(rule.for_, step)
    at = 2
    sc = Scenario("exporter down: one of two targets fails every scrape", at + hold + 4, step)
    add_target(sc, spec, fleet.instance_of(1))
    add_target(sc, spec, fleet.instance_of(2), up=fleet.down_from(sc, at))
    pending = fleet.pending_step(at, rule.for_, step)
    if pending is not None:
        sc.quiet(pending, rule.alert)             # condition true, ``for`` not yet over
    sc.expect(at + hold + 2, rule.alert, [Firing(rule, target_labels(spec, fleet.instance_of(2)), 0)])
    return [sc]


def flapping(spec: Spec, step: float) -> list[Scenario]:
    """NVIDIA/dcgm-exporter#607, ``up`` alternating 1 0 1 0 keeps resetting ``for`` of the down alert; the flapping
    alert fires. One clean outage is not flapping."""
    rule, down_rule = exporter.flapping(spec), exporter.down(spec)
    window = steps(spec.alerts.flapping_window, step)
    hold = steps(rule.for_, step)
    length = window + hold + 4
    # one success every `period` scrapes: a share of 1/period, below the spec's flapping_min_up_ratio
    # (0.9 gives 1 0 1 0; the spec refuses a ratio so low that no pattern flaps within the window)
    period = int(1 / spec.alerts.flapping_min_up_ratio) + 1
    pattern = "alternates 1 0 1 0" if period == 2 else f"succeeds once every {period} scrapes"
    sc = Scenario(f"exporter flapping: up {pattern}; the down alert's for never completes", length, step)
    up = [1 if i % period == 0 else 0 for i in range(length)]
    add_target(sc, spec, fleet.instance_of(1))
    add_target(sc, spec, fleet.instance_of(5), up=up)
    at = length - 2
    seen = window_value(up, at, window)
    sc.expect(at, rule.alert, [Firing(rule, target_labels(spec, fleet.instance_of(5)), sum(seen) / len(seen))])
    sc.quiet(at, down_rule.alert)

    down_hold = steps(down_rule.for_, step)
    clean_len = window + down_hold + 4
    clean = Scenario("exporter flapping: one clean outage is down, not flapping", clean_len, step)
    add_target(clean, spec, fleet.instance_of(5), up=fleet.down_from(clean, window))
    at = window + down_hold + 2
    clean.quiet(at, rule.alert)
    clean.expect(at, down_rule.alert, [Firing(down_rule, target_labels(spec, fleet.instance_of(5)), 0)])
    return [sc, clean]


def empty(spec: Spec, step: float) -> list[Scenario]:
    """A target that is up with zero samples fires; a target whose scrapes fail (also zero samples) does not."""
    rule = exporter.empty(spec)
    hold = steps(rule.for_, step)
    at = 2
    sc = Scenario("exporter empty: up but zero samples (DCGM not readable); a failing target is not empty",
                  at + hold + 4, step)
    add_target(sc, spec, fleet.instance_of(1))
    add_target(sc, spec, fleet.instance_of(2), samples_scraped=[120] * at + [0] * (sc.length - at))
    add_target(sc, spec, fleet.instance_of(3), up=fleet.down_from(sc, at))
    sc.expect(at + hold + 2, rule.alert, [Firing(rule, target_labels(spec, fleet.instance_of(2)), 0)])
    return [sc]


def scrape_slow(spec: Spec, step: float) -> list[Scenario]:
    """NVIDIA/dcgm-exporter#607, scrape duration above the spec's share of the timeout for ``for``; one slow scrape
    does not fire."""
    rule = exporter.scrape_slow(spec)
    hold = steps(rule.for_, step)
    limit = spec.alerts.scrape_slow_ratio * spec.exporter.scrape_timeout
    slow = round((limit + spec.exporter.scrape_timeout) / 2, 3)
    length = hold + 4
    sc = Scenario("exporter scrape slow: sustained slow scrapes fire, a single slow scrape does not",
                  length, step)
    fast = round(spec.exporter.scrape_timeout * 0.1, 3)
    add_target(sc, spec, fleet.instance_of(1))
    add_target(sc, spec, fleet.instance_of(2), duration=sc.const(slow))
    add_target(sc, spec, fleet.instance_of(3), duration=[fast, slow] + [fast] * (length - 2))
    sc.expect(hold + 2, rule.alert, [Firing(rule, target_labels(spec, fleet.instance_of(2)), slow)])
    # issue 11, item 6: Prometheus' own scrape_timeout_seconds (extra-scrape-metrics) wins over the
    # spec: slow for a 2 s timeout although far below the spec's; not slow for a longer timeout
    own = Scenario("exporter scrape slow: the target's own scrape_timeout_seconds wins over the spec's timeout",
                   length, step)
    short = round(spec.exporter.scrape_timeout / 5, 3)
    long = round(spec.exporter.scrape_timeout * 2, 3)
    near_short = round(short * (spec.alerts.scrape_slow_ratio + 1) / 2, 3)
    add_target(own, spec, fleet.instance_of(4), duration=own.const(near_short))
    own.add("scrape_timeout_seconds", target_labels(spec, fleet.instance_of(4)), own.const(short))
    add_target(own, spec, fleet.instance_of(5), duration=own.const(slow))
    own.add("scrape_timeout_seconds", target_labels(spec, fleet.instance_of(5)), own.const(long))
    own.expect(hold + 2, rule.alert, [Firing(rule, target_labels(spec, fleet.instance_of(4)), near_short)])
    return [sc, own]


def legacy_names(spec: Spec, step: float) -> list[Scenario]:
    """A node whose exporter serves 1.x names (dcgm_gpu_temp, label uuid) pages once, for its target
    (issue 11, item 3: it fired nothing); the node serving current names pages nothing."""
    rule = exporter.legacy_names(spec)
    if rule is None:
        return []
    hold = steps(rule.for_, step)
    sc = Scenario("exporter legacy names: a node serving dcgm-exporter 1.x names pages once for its target",
                  hold + 4, step)
    current, old = fleet.gpus(1, 2), fleet.gpus(1, 2, first_node=2)
    add_target(sc, spec, current[0].instance)
    add_target(sc, spec, old[0].instance)
    for g in current:
        fleet.add_gpu(sc, spec, g, spec.required_metrics)
    lab = spec.exporter.labels
    for g in old:
        labels = fleet.series_labels(spec, g)
        labels["uuid"] = labels.pop(lab.gpu)
        for m in spec.required_metrics:
            for name in m.legacy_names:
                sc.add(name, labels, fleet.healthy(m, sc.length, step))
    want = {**target_labels(spec, old[0].instance), lab.node: old[0].node}
    sc.expect(hold + 2, rule.alert, [Firing(rule, want, 1)])
    return [sc]


def scenarios(spec: Spec, rules: list[Rule]) -> list[Scenario]:
    """Every exporter-target scenario for ``spec``."""
    step = test_step(spec)
    out: list[Scenario] = []
    for build in (target_missing, down, flapping, empty, scrape_slow, legacy_names):
        out += build(spec, step)
    return out
