"""A healthy fleet: every alert stays quiet, through the longest window in the spec. The sparse
XID field is absent on every GPU (C03: it only exists after an event) and nothing fires."""

from __future__ import annotations

from ..rules import all_rules
from ..spec import Spec
from . import fleet
from .fleet import add_gpu, add_target, steps
from .model import Scenario, test_step


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
    names = sorted({r.alert for r in all_rules(spec) if r.alert})
    for at in [hold + 2] + checks:
        sc.quiet(at, *names)
    return [sc]
