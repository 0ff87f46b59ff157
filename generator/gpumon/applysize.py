"""How big a Kubernetes object is for ``kubectl apply`` (client-side), and the budget gpumon keeps.

Client-side apply stores the whole object, as JSON, in the ``kubectl.kubernetes.io/last-applied-configuration``
annotation; the API server refuses an object whose annotations (keys and values) add up to more than
256 KiB (``TotalAnnotationSizeLimitB`` in kubernetes/apimachinery ``pkg/api/validation/objectmeta.go``),
so ``kubectl apply`` of a bigger PrometheusRule or dashboard ConfigMap fails with
``metadata.annotations: Too long: must have at most 262144 bytes``. gpumon renders every object at
most :data:`BUDGET` bytes, a 10 % margin for labels and annotations added by other tools.
"""

from __future__ import annotations

import json

#: bytes the API server allows for all annotations of one object together
ANNOTATION_LIMIT = 262_144
#: the last-applied annotation's key, counted in the limit
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
#: share of the limit gpumon leaves free
MARGIN = 0.10
#: the most bytes gpumon lets an object's last-applied annotation take (key and value)
BUDGET = int(ANNOTATION_LIMIT * (1 - MARGIN))

# Go's encoding/json (which kubectl's unstructured encoder uses) escapes these for HTML safety:
# ``>`` in every PromQL comparison takes 6 bytes, not 1.
_GO_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def applied_size(obj: dict) -> int:
    """Bytes the last-applied annotation of ``obj`` takes (its key plus the object as compact JSON
    the way kubectl writes it, HTML characters escaped as Go's encoder does), UTF-8.

    Args:
        obj: a Kubernetes object as plain dicts/lists/strings/numbers (as YAML loads it).
    """
    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    for char, escaped in _GO_ESCAPES.items():
        text = text.replace(char, escaped)
    return len(LAST_APPLIED) + len(text.encode("utf-8"))


def share(size: int) -> str:
    """``size`` as a share of :data:`ANNOTATION_LIMIT`, e.g. ``87.3 %``."""
    return f"{100 * size / ANNOTATION_LIMIT:.1f} %"
