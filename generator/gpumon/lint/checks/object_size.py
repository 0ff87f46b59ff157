"""``object-too-large-to-apply``: a PrometheusRule, dashboard ConfigMap or GrafanaDashboard object too
big for ``kubectl apply``.

What: the object's ``kubectl.kubernetes.io/last-applied-configuration`` annotation (the whole object
as compact JSON, as client-side ``kubectl apply`` writes it) must stay within the configured size:
``gpumon lint --max-object-bytes``, by default 235,929 bytes, 90 % of the API server's 262,144-byte
limit on an object's annotations (kubernetes/apimachinery ``TotalAnnotationSizeLimitB``).
Why: over the limit, ``kubectl apply`` (and tools built on client-side apply) fails with
``metadata.annotations: Too long: must have at most 262144 bytes``; near it, one more field or
label tips it over. ``gpumon render`` renders one PrometheusRule per rule group for this reason,
splits a group over the budget into parts (``<group>``, ``<group>-2``, ...) and a dashboard whose
ConfigMap is over it into dashboards "(1 of N)", "(2 of N)", ... Split the object (rule groups into several PrometheusRules), or apply it server-side
(``kubectl apply --server-side`` keeps no such annotation).
Silence: ``# gpumon-lint: ignore-file object-too-large-to-apply`` in the file, or
``--disable object-too-large-to-apply``.
"""

from __future__ import annotations

from typing import Iterator

from ...applysize import ANNOTATION_LIMIT, share
from ...findings import Finding
from ._base import make

ID = "object-too-large-to-apply"
ORDER = 170
SEVERITY = "error"


def check(inputs, ctx) -> Iterator[Finding]:
    budget = ctx.max_object_bytes
    for obj in inputs.applied:
        if obj.size <= budget:
            continue
        over = "over the API server's limit" if obj.size > ANNOTATION_LIMIT else f"over the {budget:,}-byte budget"
        yield make(ID, SEVERITY, f"{obj.kind} {obj.namespace}/{obj.name}" if obj.namespace else f"{obj.kind} {obj.name}",
                   f"applied with `kubectl apply`, its last-applied annotation takes {obj.size:,} bytes "
                   f"({share(obj.size)} of {ANNOTATION_LIMIT:,}), {over}",
                   "split it (one PrometheusRule per rule group, one dashboard per ConfigMap) or apply it "
                   "with `kubectl apply --server-side`", obj.location)
