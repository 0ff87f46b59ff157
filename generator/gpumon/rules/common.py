"""Pieces every alert constructor shares: severity/extra labels and the runbook link."""

from __future__ import annotations

from ..durations import format_duration
from ..overrides import resolve
from ..spec import Spec
from ..texts import annotations
from . import names
from .model import Rule


def alert(spec: Spec, name: str, expr: str, *, severity: str, for_: float, kind: str,
          labels: dict[str, str] | None = None, own_namespace: bool = False, **context) -> Rule:
    """Build an alerting rule with severity, the ``namespace`` label (kube-prometheus-stack groups
    and inhibits by it), the spec's extra labels, annotation texts of ``kind``
    (templates/annotations.yaml) and, when the spec names a base, a ``runbook_url`` of
    ``<base>/<name>.md``. Alerts about a Kubernetes object pass ``own_namespace`` and keep its
    namespace instead.

    The spec's ``overrides`` for ``name`` (and the rule's ``dcgm_field``) then change severity,
    ``for``, labels and annotations; a disabled rule comes back with ``disabled`` set (the group
    builder drops it, the test generator leaves it out)."""
    # ``own_namespace``: the expression keeps the namespace of the object it is about (an exporter
    # pod or DaemonSet), which is the better routing key than the rule's
    all_labels = {"namespace": spec.alerts.namespace} if spec.alerts.namespace and not own_namespace else {}
    all_labels.update(spec.alerts.labels)
    all_labels.update(labels or {})
    all_labels["severity"] = severity
    override = resolve(spec.overrides, name, all_labels.get(names.FIELD_LABEL))
    if override is not None:
        all_labels.update(override.labels)
        all_labels["severity"] = override.severity or severity
        for_ = for_ if override.for_ is None else override.for_
    ctx = _base_context(spec)
    ctx.update(context)
    ctx.setdefault("for_", format_duration(for_))
    notes = annotations(kind, **ctx)
    if spec.alerts.runbook_url:
        notes += (("runbook_url", f"{spec.alerts.runbook_url}/{name}.md"),)
    if override is not None and override.annotations:
        extra = dict(override.annotations)
        notes = tuple((k, extra.pop(k, v)) for k, v in notes) + tuple(extra.items())
    return Rule(expr=expr.strip(), alert=name, for_=for_, labels=tuple(sorted(all_labels.items())),
                annotations=notes, kind=kind, disabled=bool(override and override.disable))


def record(name: str, expr: str, labels: dict[str, str] | None = None) -> Rule:
    """Build a recording rule (``level:metric:operations`` naming is the caller's job)."""
    return Rule(expr=expr.strip(), record=name, labels=tuple(sorted((labels or {}).items())))


def _base_context(spec: Spec) -> dict:
    lab = spec.exporter.labels
    return {"job": spec.exporter.job, "node": lab.node, "gpu": lab.gpu, "gpu_index": lab.gpu_index,
            "mig": lab.mig_instance}
