"""Rule generation: spec -> ordered rule groups.

Each alert shape is a small constructor in its own module (exporter targets, inventory and
coverage, presence, values, gaps); :func:`build_groups` lists the groups in a fixed order so
rendering is deterministic.
"""

from __future__ import annotations

from dataclasses import replace

from .. import overrides
from ..applysize import BUDGET
from ..spec import Problem, Spec, SpecError
from . import exporter, fresh, gaps, inventory, kubernetes, lost, names, presence, scope, sources, split, values
from .model import Rule, RuleGroup

#: the most bytes one group may take in a PrometheusRule's last-applied annotation: the object's
#: budget less room for its metadata (name, namespace, labels; generator/gpumon/rules/output.py)
GROUP_BUDGET = BUDGET - 16 * 1024

__all__ = ["Rule", "RuleGroup", "build_groups", "all_rules", "rules_of", "alert_catalogue"]


def build_groups(spec: Spec) -> list[RuleGroup]:
    """All rule groups for ``spec``, in evaluation-friendly order (recording rules first).

    Built anew on every call: build them once (``gpumon render``, ``lint``, ``validate`` do) and
    pass the list to whatever reads them.

    Raises:
        SpecError: the spec's ``overrides`` name an alert (or a field of one) the spec does not
            generate; each problem lists the valid names.
    Returns:
        groups named ``<spec name>.<part>`` (``.kubernetes`` only when the spec has that section,
        after the exporter group); the coverage, kubernetes and plausibility groups evaluate
        every ``alerts.slow_group_interval`` (1m), the gaps group every
        ``alerts.gaps_group_interval`` (3m): they scan every presence series, every raw reading or
        long windows and feed dashboards and slow-moving or data-quality alerts. A
        group over :data:`GROUP_BUDGET` is split into parts ``<group>``, ``<group>-2``, ... in its
        place (:mod:`gpumon.rules.split`).
    """
    check_overrides(spec)
    return _build(spec)


def _build(spec: Spec) -> list[RuleGroup]:
    p = spec.name
    slow = spec.alerts.slow_group_interval
    groups = [
        # the normalized readings (issue 13; none without sources) before the inventory that reads them
        RuleGroup(fresh.inventory_group(spec), tuple(sources.recording(spec) + inventory.inventory(spec)
                                          + inventory.node_counts(spec)
                                          + inventory.target_node(spec) + lost.rules(spec)
                                          + inventory.field_missing(spec, spec.required_metrics)
                                          + inventory.aggregates(spec) + [fresh.heartbeat(fresh.inventory_group(spec))])),
        # optional fields' missing sets feed coverage only: evaluated with it, each after the
        # nodes where no GPU serves the field (which it leaves out). The unlabelled-series sets
        # too: an empty-label matcher walks every series of the field, and a renamed label is a
        # deploy-time fault that need not be seen within 30 s; the heartbeat closes them
        RuleGroup(fresh.coverage_group(spec), tuple(inventory.field_absent(spec, spec.optional_metrics)
                                         + inventory.field_missing(spec, spec.optional_metrics)
                                         + inventory.counts(spec) + inventory.coverage(spec)
                                         + inventory.unlabelled(spec)
                                         + [fresh.heartbeat(fresh.coverage_group(spec))]), interval=slow),
        RuleGroup(f"{p}.exporter", tuple(exporter.rules(spec))),
        RuleGroup(f"{p}.presence", tuple(presence.rules(spec))),
        RuleGroup(f"{p}.values", tuple(values.rules(spec))),
        # every raw field read two or three times for a data-quality page: the costliest rules on
        # a large fleet, so they run with the slow groups
        RuleGroup(f"{p}.plausibility", tuple(values.plausibility_rules(spec)), interval=slow),
        # gap_window (30m) of samples of every required series per evaluation: the costliest read
        # of all, for a share that moves little in a few minutes
        RuleGroup(f"{p}.gaps", tuple(gaps.rules(spec)), interval=spec.alerts.gaps_group_interval),
    ]
    kube = kubernetes.rules(spec)  # only with a `kubernetes` section in the spec
    if kube:
        # after the exporter group; node-level and slow-moving (1h alert windows, kube-state-metrics
        # scraped every 30-60 s), so it runs with the slow groups
        groups.insert(3, RuleGroup(f"{p}.kubernetes", tuple(kube), interval=slow))
    # rules the spec's overrides switch off are left out here, once for every writer; reads of
    # gpumon's records are scoped to the spec's job (two specs in one Prometheus stay apart,
    # rules/scope.py); a group too big for one object is split into parts, the same for every
    # writer (rules/split.py)
    kept = [RuleGroup(g.name, _inhibitors_first([r for r in g.rules if not r.disabled]), g.interval) for g in groups]
    return split.split_groups(scope.scope_groups(kept, spec.exporter.job), GROUP_BUDGET)


#: severities in the order a group's alerting rules are evaluated: the ones that mute others first
SEVERITY_FIRST = ("critical", "warning", "info")


def _inhibitors_first(rules: list[Rule]) -> tuple[Rule, ...]:
    """``rules`` with the alerting rules, among themselves, critical first, then warning, then
    the rest (stable); recording rules keep their places (a rule reading a record of its group
    still comes after it).

    Why: Prometheus and vmalert send each alerting rule's alerts as soon as that rule has been
    evaluated, in the group's order, and Alertmanager mutes a warning (gpumon's inhibition: a
    critical alert mutes the warning of the same GPU, node or target and field) only if the
    critical alert has arrived when the warning's notification group is flushed. With the
    warning first, a slow evaluation of the critical rule let the warning out under a short
    ``group_wait``."""
    alerts = sorted((r for r in rules if r.alert), key=lambda r: _rank(r.label_map.get("severity")))
    it = iter(alerts)
    return tuple(next(it) if r.alert else r for r in rules)


def _rank(severity: str | None) -> int:
    return SEVERITY_FIRST.index(severity) if severity in SEVERITY_FIRST else len(SEVERITY_FIRST)


def alert_catalogue(spec: Spec) -> dict[str, list[str]]:
    """{alert name: the fields its rules are about (``dcgm_field``), sorted} of every alert built for
    ``spec`` without its overrides: the names the ``overrides`` section may use."""
    out: dict[str, set[str]] = {}
    for group in _build(replace(spec, overrides=())):
        for rule in (r for r in group.rules if r.alert):
            fields = out.setdefault(rule.alert, set())
            if rule.label_map.get(names.FIELD_LABEL):
                fields.add(rule.label_map[names.FIELD_LABEL])
    return {name: sorted(fields) for name, fields in sorted(out.items())}


def check_overrides(spec: Spec) -> None:
    """What :func:`build_groups` checks before building: the spec's ``overrides`` name alerts (and
    fields of them) the spec generates.

    Raises:
        SpecError: one problem per unknown name, each listing the valid names."""
    if not spec.overrides:
        return
    found = overrides.name_problems(spec.overrides, alert_catalogue(spec))
    if found:
        raise SpecError([Problem(spec.path, *item.position(field),
                                 ".".join(["overrides", item.alert] + (["fields", field] if field else [])), message)
                         for item, field, message in found])


def all_rules(spec: Spec) -> list[Rule]:
    """Every rule of every group built for ``spec`` (built anew), flattened in group order; with the
    groups at hand use :func:`rules_of`."""
    return rules_of(build_groups(spec))


def rules_of(groups: list[RuleGroup]) -> list[Rule]:
    """Every rule of ``groups``, flattened in group order."""
    return [r for g in groups for r in g.rules]
