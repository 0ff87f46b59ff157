"""``prometheusrule-selector-labels``: a PrometheusRule object without the labels the spec's rule
selector requires.

What: every ``prometheus_rule.labels`` pair of the spec (what the Prometheus ``ruleSelector``
matches, e.g. ``release: kube-prometheus-stack``) must be in the object's ``metadata.labels``.
Why: the Prometheus Operator loads only PrometheusRule objects whose metadata labels match the
selector — all of them. A missing label means the object is applied, ``kubectl get`` shows it,
and no rule is ever evaluated (prometheus-operator#3767, #2878; helm-charts#3648).
Silence: ``# gpumon-lint: ignore-file prometheusrule-selector-labels`` in the file, or
``--disable prometheusrule-selector-labels``.
"""

from __future__ import annotations

from typing import Iterator

from ...findings import Finding
from ._base import make

ID = "prometheusrule-selector-labels"
ORDER = 160
SEVERITY = "error"


def check(inputs, ctx) -> Iterator[Finding]:
    wanted = dict(ctx.spec.prometheus_rule.labels)
    for obj in inputs.objects:
        for key, value in sorted(wanted.items()):
            have = obj.labels.get(key)
            if have == str(value):
                continue
            what = f"has {key}={have!r}" if have is not None else f"lacks label {key}"
            yield make(ID, SEVERITY, f"PrometheusRule {obj.namespace}/{obj.name}",
                       f"metadata.labels {what}; the spec's rule selector needs {key}={value!r}, so Prometheus "
                       "never loads these rules", f"add `{key}: {value}` under metadata.labels",
                       obj.labels_location or obj.location, label=key)
