"""Alerts on the exporter targets themselves: the layer every per-GPU signal depends on."""

from __future__ import annotations

from ..spec import Spec
from .common import alert
from .model import Rule
from . import names
from .promql import by, dur, fleet_ids, job_sel, num, selector


def target_ids(spec: Spec) -> tuple[str, ...]:
    """The labels of one exporter target: ``job``, the cluster label when the spec names one, and
    ``instance`` (the labels of ``up`` and ``scrape_*``)."""
    return fleet_ids(spec) + ("instance",)


def with_node(spec: Spec, expr: str) -> str:
    """``expr`` (per target: job, instance) with the node label of the target's GPU series seen
    within the inventory lookback or held since (:data:`names.TARGETS_KNOWN`, while the target has
    an ``up`` series), so a down target's alert names its node (Alertmanager inhibits that node's
    GPU alerts by it) for as long as it is down: with the lookback alone, an outage longer than it
    lost the name and the page started again without it. A target never seen with GPU series keeps
    its alert without a node label. ``topk`` keeps one node should a pod address move to another
    node's exporter; ``max by`` makes both reads one series per target and node."""
    lab = spec.exporter.labels
    ids = target_ids(spec)
    on = by(ids)
    seen = (f"max by ({by(ids + (lab.node,))}) (\n  max_over_time({job_sel(spec, names.TARGET_NODE)}"
            f"[{dur(spec.alerts.inventory_lookback)}])\n  or\n  {job_sel(spec, names.TARGETS_KNOWN)}\n)")
    node = f"topk by ({on}) (1, {seen})"
    return (f"(\n  {expr}\n)\n* on ({on}) group_left ({lab.node})\n{node}\n"
            f"or\n(\n  {expr}\n)\nunless on ({on})\n{seen}")


#: cluster label value of GpuExporterTargetMissing when the job had no target in any cluster
NO_CLUSTER = "(none seen)"


def target_missing(spec: Spec) -> Rule:
    """No ``up`` series at all for the job. ``absent()`` with an equality matcher keeps ``job``.

    With a cluster label in the spec, per cluster: a cluster whose targets were scraped within
    the inventory lookback and are all gone now. ``absent()`` alone keeps only ``job``, so under a
    global ruler (Thanos, Mimir) it stayed silent while any other cluster had a target (issue 11,
    item 4). ``absent()`` still covers a job that never had a target: no cluster to name, so its
    cluster label says :data:`NO_CLUSTER`."""
    up = job_sel(spec, "up")
    cluster = spec.exporter.labels.cluster
    expr = f"absent({up})"
    if cluster:
        keep = by(("job", cluster))
        seen = f"max_over_time({up}[{dur(spec.alerts.inventory_lookback)}])"
        expr = (f"group by ({keep}) ({seen})\nunless on ({keep})\ngroup by ({keep}) ({up})\n"
                f"or\n(\n  label_replace(absent({up}), \"{cluster}\", \"{NO_CLUSTER}\", \"\", \"\")\n"
                f"  unless on (job)\n  group by (job) ({seen})\n)")
    return alert(spec, "GpuExporterTargetMissing", expr,
                 severity="critical", for_=spec.alerts.for_, kind="exporter_target_missing", cluster=cluster,
                 lookback=dur(spec.alerts.inventory_lookback))


def down(spec: Spec) -> Rule:
    """A target whose scrapes fail (``up == 0``)."""
    return alert(spec, "GpuExporterDown", with_node(spec, f"{job_sel(spec, 'up')} == 0"),
                 severity="critical", for_=spec.alerts.for_, kind="exporter_down")


def flapping_hold_ratio(spec: Spec) -> float:
    """The success share a flapping target must reach for :func:`flapping` to end: half way from
    ``alerts.flapping_min_up_ratio`` to 1 (0.95 for the default 0.9)."""
    return round((1 + spec.alerts.flapping_min_up_ratio) / 2, 6)


def flapping(spec: Spec) -> Rule:
    """A target that keeps going down and up: each recovery resets ``for`` on :func:`down`,
    so it never fires (cloudflare/pint#966). Needs both a low success share and repeated changes,
    so one clean outage (one change down, one up) does not also count as flapping.

    Held with hysteresis: once pending or firing (its own ``ALERTS`` series), it lasts while the
    success share stays below :func:`flapping_hold_ratio` and ``up`` still changes. Without it a
    target failing about one scrape in eight sat at the threshold, and the page ended and fired
    again every few minutes (NVIDIA/dcgm-exporter#607: scrapes that time out now and then). Where
    the engine does not write ``ALERTS`` back (a vmalert without remote write), the hold never
    matches and the alert is the plain threshold."""
    w = dur(spec.alerts.flapping_window)
    up = job_sel(spec, "up")
    target = by(target_ids(spec))
    own = selector("ALERTS", alertname="GpuExporterFlapping", job=spec.exporter.job)
    expr = with_node(spec, f"(\n    avg_over_time({up}[{w}]) < {num(spec.alerts.flapping_min_up_ratio)}\n"
                     f"    and\n    changes({up}[{w}]) > 2\n  )\n  or\n  (\n"
                     f"    avg_over_time({up}[{w}]) < {num(flapping_hold_ratio(spec))}\n"
                     f"    and\n    changes({up}[{w}]) > 0\n    and on ({target})\n    {own}\n  )")
    return alert(spec, "GpuExporterFlapping", expr, severity="warning", for_=spec.alerts.for_,
                 kind="exporter_flapping", window=w)


def empty(spec: Spec) -> Rule:
    """Up, but zero samples: dcgm-exporter serves an empty page while DCGM is not readable.
    ``scrape_samples_scraped`` is also 0 when the scrape fails, hence ``and up == 1``."""
    expr = with_node(spec, f"{job_sel(spec, 'scrape_samples_scraped')} == 0\n  and\n  {job_sel(spec, 'up')} == 1")
    return alert(spec, "GpuExporterEmpty", expr, severity="critical", for_=spec.alerts.for_,
                 kind="exporter_empty")


def scrape_slow(spec: Spec) -> Rule:
    """Scrape duration above a share of the timeout: the step before scrapes time out
    (dcgm-exporter#607: ~10.001 s against the 10 s default on big nodes). The timeout is the
    target's ``scrape_timeout_seconds`` where Prometheus exposes it, else the spec's."""
    ratio = spec.alerts.scrape_slow_ratio
    limit = ratio * spec.exporter.scrape_timeout
    duration, timeout = job_sel(spec, "scrape_duration_seconds"), job_sel(spec, "scrape_timeout_seconds")
    on = by(target_ids(spec))
    # the target's own timeout when Prometheus exposes it (--enable-feature=extra-scrape-metrics):
    # a target scraped with a 2 s timeout was never flagged against the spec's 10 s. One comparison
    # against a per-target limit (its own, else the spec's): two comparisons joined by `or` give one
    # target two series on VictoriaMetrics after 1.79 (a vector-vector comparison drops the name, a
    # scalar one keeps it), and a range query over the moment the target gains its timeout series
    # fails with "duplicate output timeseries" after the node name is joined
    expr = with_node(spec, f"{duration} > on ({on}) (\n    {num(ratio)} * {timeout}\n    or\n"
                           f"    0 * {duration} + {num(round(limit, 3))}\n  )")
    return alert(spec, "GpuExporterScrapeSlow", expr, severity="warning", for_=max(spec.alerts.for_, 600.0),
                 kind="exporter_scrape_slow", ratio_pct=num(round(spec.alerts.scrape_slow_ratio * 100, 1)),
                 timeout=dur(spec.exporter.scrape_timeout))


def unserved_legacy_names(spec: Spec) -> list[str]:
    """The 1.x names of required fields (the spec's ``legacy_names``) that no source of the spec
    serves: a 1.x name a source lists is served (GpuMetricFallbackServing warns), not blind."""
    served = {s.series for m in spec.metrics for s in m.sources if s.job == spec.exporter.job}
    return [n for m in spec.required_metrics for n in m.legacy_names if n not in served]


def legacy_names(spec: Spec) -> Rule | None:
    """A target serving the 1.x names of required fields (``dcgm_gpu_temp``, label ``uuid``:
    dcgm-exporter's 1.x compatibility mode) and none of the current ones: every GPU alert is blind
    for its node and nothing else fires (issue 11, item 3), so it pages once for the target. The
    names come from the spec's ``legacy_names``; a selector per name (no regex on metric names)."""
    legacy = unserved_legacy_names(spec)
    if not legacy:
        return None
    lab = spec.exporter.labels
    on = target_ids(spec)
    served = " or ".join(job_sel(spec, n) for n in legacy)
    expr = (f"group by ({by(on + (lab.node,))}) (\n  {served}\n)\nunless on ({by(on + (lab.node,))})\n"
            f'{job_sel(spec, names.TARGET_NODE)}')
    return alert(spec, "GpuExporterLegacyNames", expr, severity="critical", for_=spec.alerts.for_,
                 kind="exporter_legacy_names", legacy=", ".join(legacy[:3]))


def rules(spec: Spec) -> list[Rule]:
    """All exporter-target alerts, in a stable order."""
    out = [target_missing(spec), down(spec), flapping(spec), empty(spec), scrape_slow(spec), legacy_names(spec)]
    return [r for r in out if r]
