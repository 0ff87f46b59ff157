"""``recording-rule-high-cardinality``: a recording rule over GPU series that keeps every label
of its input.

What: a recording rule whose expression reads DCGM fields and whose result is not narrowed by an
aggregation ``by (...)`` (a plain copy such as ``record: gpu_util expr: DCGM_FI_DEV_GPU_UTIL``,
arithmetic on raw series, or ``max without (...)``), as worked out from the AST.
Why: dcgm-exporter series carry pod, namespace and container labels (``--kubernetes`` mode), pod
labels (``enablePodLabels``, dcgm-exporter#585: over Mimir's 30-label limit), ``err_msg`` texts
and driver versions; a copy multiplies every such series and each pod restart creates new ones
(NVIDIA/dcgm-exporter#585). Aggregate ``by`` the identity labels (job, node, UUID, gpu, GPU_I_ID, cluster).
Silence: ``# gpumon-lint: ignore recording-rule-high-cardinality`` on the rule, or
``--disable recording-rule-high-cardinality``.
"""

from __future__ import annotations

from typing import Iterator

from ...findings import Finding
from ...readers import promql
from ._base import make

ID = "recording-rule-high-cardinality"
ORDER = 120
SEVERITY = "warning"


def check(inputs, ctx) -> Iterator[Finding]:
    for rule in inputs.rules:
        if rule.kind != "record" or rule.expr is None or rule.expr.ast is None:
            continue
        ast = rule.expr.ast
        reads = [promql.metric_name(vs) for vs, _ in promql.selectors(ast)]
        if not any(n and n.lower().startswith("dcgm") for n in reads):
            continue
        labels = promql.output_labels(ast, ctx.record_labels)
        if labels.open:
            keep = ", ".join(("job",) + ctx.identity_labels)
            yield make(ID, SEVERITY, rule.subject,
                       "the result keeps every label of the dcgm-exporter series it reads (pod, container, "
                       "err_msg, driver version ...): one recorded series per input series, new ones on every "
                       "pod restart", f"aggregate by the identity labels, e.g. max by ({keep}) (...)",
                       rule.expr.location)
