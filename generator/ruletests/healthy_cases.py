"""A healthy fleet: every alert stays quiet, through the longest window in the spec. The sparse
XID field is absent on every GPU (C03: it only exists after an event) and nothing fires."""

from __future__ import annotations

from ..rules import all_rules, kubernetes, names
from ..spec import Spec
from . import fleet
from .fleet import Gpu, add_gpu, add_target, steps
from .model import Scenario, selector, test_step
from .series import STALE


def checked_alerts(spec: Spec) -> list[str]:
    """Alert names a healthy fleet asserts quiet: all but the kubernetes group's, whose inputs
    (kube-state-metrics series) these scenarios do not model yet."""
    kube = {r.alert for r in kubernetes.rules(spec) if r.alert}
    return sorted({r.alert for r in all_rules(spec) if r.alert} - kube)


def scenarios(spec: Spec) -> list[Scenario]:
    """One scenario: 2 nodes x 2 GPUs with every required and optional field, no sparse field."""
    step = test_step(spec)
    a = spec.alerts
    hold = max([steps(r.for_ or 0, step) for r in all_rules(spec) if r.alert] + [0])
    checks = sorted({steps(w, step) + hold + 2 for w in (a.gap_window, a.inventory_lookback,
                                                         a.flapping_window, a.frozen_window)})
    sc = Scenario("healthy fleet, sparse XID absent on every GPU: no alert fires", checks[-1] + 2, step)
    gpus = fleet.gpus(2, 2)
    for inst in sorted({g.instance for g in gpus}):
        add_target(sc, spec, inst)
    for g in gpus:
        add_gpu(sc, spec, g, spec.tracked_metrics)
    names = checked_alerts(spec)
    for at in [hold + 2] + checks:
        sc.quiet(at, *names)
    return [sc] + pod_replaced(spec)


def pod_replaced(spec: Spec) -> list[Scenario]:
    """A DaemonSet rolling update: node 2's exporter pod is replaced and comes back under a new
    address (``instance``); old and new pod are both scraped for two steps. Nothing fires, and
    field coverage stays 1 (each GPU counted once) during the overlap."""
    step = test_step(spec)
    a = spec.alerts
    hold = max([steps(r.for_ or 0, step) for r in all_rules(spec) if r.alert] + [0])
    swap = 4
    length = swap + steps(a.gap_window, step) + hold + 4
    sc = Scenario("exporter pod replaced (new instance, two steps of overlap): no alert, coverage stays 1",
                  length, step)
    old_gpus, new_gpus = fleet.gpus(2, 2), []
    for g in old_gpus:
        if g.node == fleet.node_name(2):
            new_gpus.append(Gpu(g.node, g.index, g.uuid, "10.0.1.2:9400"))
    for inst in sorted({g.instance for g in old_gpus}):
        up = sc.const(1) if inst != fleet.instance_of(2) else [1] * (swap + 2) + [STALE]
        add_target(sc, spec, inst, up=up)
    add_target(sc, spec, new_gpus[0].instance, up=["_"] * swap + [1] * (length - swap))
    for g in old_gpus:
        over = None
        if g.instance == fleet.instance_of(2):
            over = {m.name: fleet.lost_from(fleet.healthy(m, length, step), swap + 2) for m in spec.tracked_metrics}
        add_gpu(sc, spec, g, spec.tracked_metrics, over)
    for g in new_gpus:
        add_gpu(sc, spec, g, spec.tracked_metrics,
                {m.name: ["_"] * swap + fleet.healthy(m, length, step)[swap:] for m in spec.tracked_metrics})
    names_ = checked_alerts(spec)
    for at in sorted({swap + 1, swap + 3, swap + hold + 2, length - 2}):
        sc.quiet(at, *names_)
    if spec.required_metrics:
        m = spec.required_metrics[0]
        job = fleet.fleet_labels(spec)
        cov = f'{names.COVERAGE}{{{names.FIELD_LABEL}="{m.name}"}}'
        sc.expect_expr(swap + 1, cov, [(selector(names.COVERAGE, {**job, names.FIELD_LABEL: m.name}), 1)])
    return [sc]
