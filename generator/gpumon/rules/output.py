"""Writers for rule groups: a plain Prometheus rule file and PrometheusRule objects.

The PrometheusRule file holds one object per rule group (``<prometheus_rule.name>-<group>``, e.g.
``gpumon-values``): client-side ``kubectl apply`` stores each object whole in an annotation the API
server caps at 262,144 bytes (:mod:`gpumon.applysize`), which one object with every group neared
for the bundled spec. A group keeps its object as the spec changes, so applying never moves a group
between objects. A group that alone would be too big is split into parts before it gets here
(:mod:`gpumon.rules.split`): each part is a group of its own, in the plain file and as an object.
"""

from __future__ import annotations

from ..spec import Spec
from ..yamlout import dump, dump_all, generated_header
from .model import RuleGroup, group_dict

PLAIN_PATH = "rules/{name}.rules.yaml"
CRD_PATH = "kubernetes/{name}-prometheusrule.yaml"


def _header(spec: Spec) -> str:
    return generated_header(spec.path)


def plain_rule_file(spec: Spec, groups: list[RuleGroup]) -> str:
    """The ``groups:`` rule file for Prometheus, Thanos/Mimir/Cortex rulers and vmalert."""
    return dump({"groups": [group_dict(g) for g in groups]}, header=_header(spec))


def object_name(spec: Spec, group: RuleGroup) -> str:
    """The PrometheusRule object carrying ``group``: ``<prometheus_rule.name>-<part>``, where
    ``<spec name>.<part>`` is the group's name (dots become dashes)."""
    part = group.name.removeprefix(f"{spec.name}.")
    return f"{spec.prometheus_rule.name}-{part.replace('.', '-')}"


def prometheus_rules(spec: Spec, groups: list[RuleGroup]) -> list[dict]:
    """monitoring.coreos.com/v1 PrometheusRule objects, one per group, in group order. Their metadata
    labels must match the Prometheus ``ruleSelector`` (kube-prometheus-stack: ``release: <release>``)."""
    meta = spec.prometheus_rule
    return [{
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {
            "name": object_name(spec, g),
            "namespace": meta.namespace,
            "labels": {"app.kubernetes.io/managed-by": "gpumon", **dict(meta.labels)},
        },
        "spec": {"groups": [group_dict(g)]},
    } for g in groups]


def prometheus_rule(spec: Spec, groups: list[RuleGroup]) -> str:
    """The PrometheusRule file: :func:`prometheus_rules` as YAML documents."""
    return dump_all(prometheus_rules(spec, groups), header=_header(spec))


def files(spec: Spec, groups: list[RuleGroup]) -> dict[str, str]:
    """Rendered rule files keyed by path relative to the output folder, for the ``groups`` built
    from ``spec`` (:func:`gpumon.rules.build_groups`)."""
    return {
        PLAIN_PATH.format(name=spec.name): plain_rule_file(spec, groups),
        CRD_PATH.format(name=spec.name): prometheus_rule(spec, groups),
    }
