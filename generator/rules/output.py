"""Writers for rule groups: a plain Prometheus rule file and a PrometheusRule object."""

from __future__ import annotations

from ..durations import format_duration
from ..spec import Spec
from ..yamlout import dump, generated_header
from . import build_groups
from .model import Rule, RuleGroup

PLAIN_PATH = "rules/{name}.rules.yaml"
CRD_PATH = "kubernetes/{name}-prometheusrule.yaml"


def rule_dict(rule: Rule) -> dict:
    """One rule as Prometheus' rule-file format writes it (key order: alert/record, expr, for,
    labels, annotations)."""
    out: dict = {"alert": rule.alert} if rule.alert else {"record": rule.record}
    out["expr"] = rule.expr + ("\n" if "\n" in rule.expr else "")
    if rule.alert and rule.for_ is not None:
        out["for"] = format_duration(rule.for_)
    if rule.labels:
        out["labels"] = dict(rule.labels)
    if rule.annotations:
        out["annotations"] = dict(rule.annotations)
    return out


def group_dict(group: RuleGroup) -> dict:
    """One rule group as a dict (``interval`` only when the group sets one)."""
    out: dict = {"name": group.name}
    if group.interval:
        out["interval"] = format_duration(group.interval)
    out["rules"] = [rule_dict(r) for r in group.rules]
    return out


def _header(spec: Spec) -> str:
    return generated_header(spec.path)


def plain_rule_file(spec: Spec, groups: list[RuleGroup]) -> str:
    """The ``groups:`` rule file for Prometheus, Thanos/Mimir/Cortex rulers and vmalert."""
    return dump({"groups": [group_dict(g) for g in groups]}, header=_header(spec))


def prometheus_rule(spec: Spec, groups: list[RuleGroup]) -> str:
    """A monitoring.coreos.com/v1 PrometheusRule carrying the same groups. Its metadata labels
    must match the Prometheus ``ruleSelector`` (kube-prometheus-stack: ``release: <release>``)."""
    meta = spec.prometheus_rule
    doc = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {
            "name": meta.name,
            "namespace": meta.namespace,
            "labels": {"app.kubernetes.io/managed-by": "gpumon", **dict(meta.labels)},
        },
        "spec": {"groups": [group_dict(g) for g in groups]},
    }
    return dump(doc, header=_header(spec))


def files(spec: Spec, groups: list[RuleGroup] | None = None) -> dict[str, str]:
    """Rendered rule files keyed by path relative to the output folder; ``groups`` default to
    :func:`build_groups` of ``spec``."""
    groups = build_groups(spec) if groups is None else groups
    return {
        PLAIN_PATH.format(name=spec.name): plain_rule_file(spec, groups),
        CRD_PATH.format(name=spec.name): prometheus_rule(spec, groups),
    }
