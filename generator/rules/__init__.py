"""Rule generation: spec -> ordered rule groups.

Each alert shape is a small constructor in its own module (exporter targets, inventory and
coverage, presence, values, gaps); :func:`build_groups` lists the groups in a fixed order so
rendering is deterministic.
"""

from __future__ import annotations

from functools import lru_cache

from ..spec import Spec
from . import exporter, gaps, inventory, kubernetes, lost, presence, sources, values
from .model import Rule, RuleGroup

__all__ = ["Rule", "RuleGroup", "build_groups", "all_rules"]


def build_groups(spec: Spec) -> list[RuleGroup]:
    """All rule groups for ``spec``, in evaluation-friendly order (recording rules first).

    Built once per spec: a :class:`Spec` is frozen and compares by every section, so the groups
    are kept for the specs seen last (render, lint and validate ask for them many times).

    Returns:
        groups named ``<spec name>.<part>`` (``.kubernetes`` only when the spec has that section,
        after the exporter group); the coverage, kubernetes and gaps groups evaluate every
        ``alerts.slow_group_interval`` (1m): they scan every presence series or long windows and
        feed dashboards and slow-moving alerts.
    """
    return list(_build_groups(spec))


@lru_cache(maxsize=8)
def _build_groups(spec: Spec) -> tuple[RuleGroup, ...]:
    p = spec.name
    slow = spec.alerts.slow_group_interval
    groups = [
        # the normalized readings (issue 13; none without sources) before the inventory that reads them
        RuleGroup(f"{p}.inventory", tuple(sources.recording(spec) + inventory.inventory(spec) + lost.rules(spec)
                                          + inventory.field_missing(spec, spec.required_metrics)
                                          + inventory.target_node(spec) + inventory.unlabelled(spec)
                                          + inventory.aggregates(spec))),
        # optional fields' missing sets feed coverage only: evaluated with it, each after the
        # nodes where no GPU serves the field (which it leaves out)
        RuleGroup(f"{p}.coverage", tuple(inventory.field_absent(spec, spec.optional_metrics)
                                         + inventory.field_missing(spec, spec.optional_metrics)
                                         + inventory.counts(spec) + inventory.coverage(spec)), interval=slow),
        RuleGroup(f"{p}.exporter", tuple(exporter.rules(spec))),
        RuleGroup(f"{p}.presence", tuple(presence.rules(spec))),
        RuleGroup(f"{p}.values", tuple(values.rules(spec))),
        RuleGroup(f"{p}.gaps", tuple(gaps.rules(spec)), interval=slow),
    ]
    kube = kubernetes.rules(spec)  # only with a `kubernetes` section in the spec
    if kube:
        # after the exporter group; node-level and slow-moving (1h alert windows, kube-state-metrics
        # scraped every 30-60 s), so it runs with the slow groups
        groups.insert(3, RuleGroup(f"{p}.kubernetes", tuple(kube), interval=slow))
    return tuple(groups)


def all_rules(spec: Spec) -> list[Rule]:
    """Every rule of every group, flattened in group order."""
    return [r for g in _build_groups(spec) for r in g.rules]
