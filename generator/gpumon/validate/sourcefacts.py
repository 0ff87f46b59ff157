"""Which source serves each GPU of every metric with ``sources``: a fact the sources and presence
checks read (``ctx.sources``, :mod:`gpumon.validate.facts`), computed once per run. Does not import
the run context; ``ctx`` below is it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..promapi import Answer, PromError


@dataclass(frozen=True)
class Sources:
    """Which source serves each GPU's reading of every metric with ``sources`` (issue 13), from
    the normalized expression the rules record (``generator/gpumon/rules/sources.py``), queried as is so
    it works before the rules are loaded. ``served[metric]`` maps (cluster, UUID) to (node,
    source label); ``answers[metric]`` keeps the answer (or PromError) per metric."""

    served: dict[str, dict[tuple[str, str], tuple[str, str]]]
    answers: dict[str, "Answer | PromError"]

    def fallback(self, metric: str) -> set[tuple[str, str]]:
        """(cluster, UUID) of the GPUs a fallback (not the primary) serves for ``metric``."""
        from ..spec.presets import PRIMARY
        return {k for k, (_, src) in self.served.get(metric, {}).items() if src != PRIMARY}


def sources(ctx) -> Sources:
    """One instant query per metric with sources: ``group by (cluster, node, UUID, source)`` of
    its normalized expression."""
    from ..rules import sources as rule_sources
    from ..rules.names import SOURCE_LABEL
    lab = ctx.spec.exporter.labels
    keep = ", ".join(((lab.cluster,) if lab.cluster else ()) + (lab.node, lab.gpu, SOURCE_LABEL))
    exprs = {m.name: f"group by ({keep}) (\n{rule_sources.normalized(ctx.spec, m).expr}\n)"
             for m in ctx.spec.metrics if m.sources}
    answers = ctx.queries_at_now(exprs) if exprs else {}
    served: dict[str, dict[tuple[str, str], tuple[str, str]]] = {}
    for name, ans in answers.items():
        if isinstance(ans, PromError):
            continue
        for item in ans.data:
            labels = item["metric"]
            key = (labels.get(lab.cluster, "") if lab.cluster else "", labels.get(lab.gpu, ""))
            served.setdefault(name, {})[key] = (labels.get(lab.node, ""), labels.get(SOURCE_LABEL, ""))
    return Sources(served, answers)
