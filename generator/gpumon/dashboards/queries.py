"""PromQL for dashboard panels: selectors narrowed by template variables, MIG-aware per-GPU
values, and the "missing now" and target-to-node expressions.

Queries only read the spec's metrics, gpumon's recording rules (``gpumon.rules.names``),
``up`` / ``scrape_*`` and ``ALERTS``; tests parse every query with promql-parser to keep it so.
"""

from __future__ import annotations

from ..promqltext import matcher, quote, series
from dataclasses import dataclass

from ..rules import RuleGroup, lost as lost_rules, names
from ..rules.promql import by, dur, gpu_ids, plausible_filter
from ..spec.presets import PRIMARY
from ..spec import Metric, Spec
from .units import plot

#: Grafana's rate window: at least 4 x the datasource's scrape interval (prometheus/prometheus#1428)
RATE_WINDOW = "$__rate_interval"


@dataclass(frozen=True)
class Scope:
    """Which template variables narrow a query: cluster (when the spec has a cluster label),
    node and GPU (the detail dashboard)."""

    node: bool = False
    gpu: bool = False


FLEET = Scope()
DETAIL = Scope(node=True, gpu=True)
NODE = Scope(node=True)


def matchers(spec: Spec, scope: Scope, job: bool = True) -> str:
    """``job="dcgm-exporter",cluster=~"$cluster",Hostname=~"$node",UUID=~"$gpu"`` for ``scope``."""
    lab = spec.exporter.labels
    out = [matcher("job", spec.exporter.job)] if job else []
    if lab.cluster:
        out.append(f'{lab.cluster}=~"$cluster"')
    if scope.node:
        out.append(f'{lab.node}=~"$node"')
    if scope.gpu:
        out.append(f'{lab.gpu}=~"$gpu"')
    return ",".join(out)


def sel(spec: Spec, metric: str, scope: Scope, *more: str, **equal: str) -> str:
    """``metric{<scope matchers>,<more matchers>,k="v"...}``; ``more`` are matcher strings such
    as ``'dcgm_field=~"A|B"'``, ``equal`` label values (quoted here)."""
    extra = "".join(f",{m}" for m in more) + "".join(f",{matcher(k, v)}" for k, v in equal.items())
    return series(metric, f"{matchers(spec, scope)}{extra}")


def target_sel(spec: Spec) -> str:
    """Matchers for per-target series (``up``, ``scrape_*``): only ``job`` is certain to be on
    them; the cluster label is added when the spec has one (an external or target label)."""
    lab = spec.exporter.labels
    out = matcher("job", spec.exporter.job)
    return out + (f',{lab.cluster}=~"$cluster"' if lab.cluster else "")


def normalized(m: Metric) -> bool:
    """Whether panels read ``m`` from its normalized series (issue 13): a gauge with ``sources``.
    Counters stay on the primary series: a rate over readings that switch source would jump."""
    return bool(m.sources) and not plot(m).rate


def reading(spec: Spec, m: Metric, scope: Scope) -> str:
    """Where panels read ``m``: its own series, or for :func:`normalized` metrics the recorded
    ``job_gpu:dcgm_field_value:normalized{dcgm_field=...}`` (primary where it exists, else the
    first fallback source, label ``source``)."""
    if normalized(m):
        return sel(spec, names.NORMALIZED, scope, **{names.FIELD_LABEL: m.name})
    return sel(spec, m.name, scope)


def plausible(spec: Spec, m: Metric, scope: Scope) -> str:
    """The metric's readings (:func:`reading`) in ``scope`` limited to plausible ones (spec
    range, below the DCGM blank sentinels, not NaN), so one broken GPU does not skew fleet
    aggregates."""
    return reading(spec, m, scope) + plausible_filter(m)


def per_gpu(spec: Spec, m: Metric, scope: Scope, only_plausible: bool = False) -> str:
    """One series per GPU (per MIG instance for per-instance fields) in the plotted unit.

    Device-wide fields repeat on every MIG instance, so they are reduced with ``max by`` the
    GPU labels without the MIG instance label (de-duplicated by UUID) before anything sums or
    averages them. Counters become per-second rates over ``$__rate_interval``. For a
    :func:`normalized` metric the ``source`` label is kept, emptied for the primary, so the
    legend (:func:`legend`) names the source only where it is a fallback.
    """
    p = plot(m)
    src = plausible(spec, m, scope) if only_plausible and not p.rate else reading(spec, m, scope)
    if p.rate:
        src = f"rate({src}[{RATE_WINDOW}])"
    if normalized(m):
        # the primary's source label value matches the whole regex: label_replace writes "" (no label)
        kept = f"max by ({by(gpu_ids(spec, m))}, {names.SOURCE_LABEL}) ({src})"
        return p.apply(f'label_replace({kept}, "{names.SOURCE_LABEL}", "", "{names.SOURCE_LABEL}", {quote(PRIMARY)})')
    return p.apply(f"max by ({by(gpu_ids(spec, m))}) ({src})")


def legend(spec: Spec, m: Metric | None = None) -> str:
    """Legend from identity labels, never ``instance`` (a pod IP that changes on restart):
    ``node GPU index``, plus the MIG instance for per-instance fields, plus the ``source`` of
    a :func:`normalized` metric's reading (empty for the primary)."""
    lab = spec.exporter.labels
    text = f"{{{{{lab.node}}}}} GPU {{{{{lab.gpu_index}}}}}"
    if m is None or m.mig != "device":
        text += f" {{{{{lab.mig_instance}}}}}"
    if lab.cluster:
        text = f"{{{{{lab.cluster}}}}} {text}"
    if m is not None and normalized(m):
        text += f" {{{{{names.SOURCE_LABEL}}}}}"
    return text


def alert_names(groups: list[RuleGroup]) -> list[str]:
    """Names of every alerting rule in ``groups``, sorted."""
    return sorted({r.alert for g in groups for r in g.rules if r.alert})


def recorded(groups: list[RuleGroup]) -> frozenset[str]:
    """Names of every recording rule in ``groups``."""
    return frozenset(r.record for g in groups for r in g.rules if r.record)


def firing_alerts(spec: Spec, groups: list[RuleGroup], scope: Scope | None = None) -> str:
    """``ALERTS`` of gpumon's own rules (those in ``groups``) that fire now (``job`` is kept on all of them); with a
    ``scope``, only alerts carrying the chosen cluster / node / GPU labels."""
    extra = matchers(spec, scope, job=False) if scope is not None else ""
    return (f'ALERTS{{alertstate="firing",{matcher("job", spec.exporter.job)},'
            f'{matcher("alertname", "|".join(alert_names(groups)), "=~")}{"," + extra if extra else ""}}}')


def missing_now(spec: Spec, scope: Scope, metrics: tuple[Metric, ...] | None = None) -> str:
    """One series per (GPU in the inventory, required field it does not report now), labelled
    with ``dcgm_field``: the sparse missing sets the rules record (``names.FIELD_MISSING``; fields
    DCGM does not report per MIG instance are only expected on non-MIG series there, like the
    presence alerts expect them)."""
    fields = "|".join(m.name for m in (metrics if metrics is not None else spec.required_metrics))
    return sel(spec, names.FIELD_MISSING, scope, matcher(names.FIELD_LABEL, fields, "=~"))


def target_nodes(spec: Spec, scope: Scope | None = None, window: str = "15m") -> str:
    """(job, instance) -> node map from the target-node recording rule, so per-target series can
    be labelled with the node instead of a pod IP. ``topk by`` keeps one node per target even if
    a pod IP moved between nodes within ``window``. With ``scope``, only the chosen nodes."""
    lab = spec.exporter.labels
    keep = by(("job", "instance") + lab.node_identity)
    where = matchers(spec, scope) if scope is not None else target_sel(spec)
    src = f"max_over_time({names.TARGET_NODE}{{{where}}}[{window}])"
    return f"topk by (job, instance) (1, group by ({keep}) ({src}))"


def per_target(spec: Spec, metric: str) -> str:
    """``metric`` of every exporter target with the node label joined on; targets that never
    reported a GPU field keep only ``instance`` (``or on`` adds them unchanged)."""
    lab = spec.exporter.labels
    raw = f"{metric}{{{target_sel(spec)}}}"
    nodes = by(lab.node_identity)
    return (f"{raw}\n* on (job, instance) group_left ({nodes})\n{target_nodes(spec)}\n"
            f"or on (job, instance)\n{raw}")


def lost(spec: Spec, scope: Scope) -> str:
    """GPUs of gpumon's known set (:data:`names.KNOWN`, what GpuLost reads) that report nothing now:
    a GPU lost stays here as long as it stays gone (or until retired), not only for the inventory
    lookback, so the dashboards list what the alert pages for. Compared by UUID, as GpuLost does."""
    ids = by(lost_rules.physical_ids(spec))
    now = " or ".join(sel(spec, s, scope) for s in lost_rules.reporting_sets(spec))
    return f"{sel(spec, names.KNOWN, scope)}\nunless on ({ids})\n({now})"


def gap_ratio(spec: Spec) -> str:
    """Name of the per-GPU sample-ratio recording rule over the spec's gap window."""
    return names.sample_ratio(dur(spec.alerts.gap_window))


def field_regex(metrics) -> str:
    """``A|B|C`` of metric names, for a ``dcgm_field=~`` matcher on gpumon's own series."""
    return "|".join(m.name for m in metrics)
