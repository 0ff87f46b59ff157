"""Facts several validate checks read: the exporter job's targets, the GPU inventory and the loaded
rule groups. Each is computed on first use by the run context (:class:`~generator.validate.base.Context`
exposes them as ``ctx.targets``, ``ctx.inventory``, ``ctx.rule_groups``) and then shared, so a
check gives the same findings whether it runs alone (``--checks presence``) or after the others.

Facts are values; checks never change them. This module does not import the context (the context
imports it); ``ctx`` below is the run context.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, replace

from ..durations import format_duration, parse_duration
from ..promapi import Answer, PromError
from ..promqltext import matcher


@dataclass(frozen=True)
class Targets:
    """What the server says about the exporter job's targets.

    ``api`` is the ``/api/v1/targets`` answer (a PromError with kind ``not-found`` where the API
    does not exist: Mimir, Thanos Query); ``up``, ``empty`` (``scrape_samples_scraped == 0``) and
    ``flapping`` ({instance: share of successful scrapes} over ``window``) come from instant
    queries. ``targets`` are the job's active targets from the API. ``down`` are the instances
    whose GPUs per-GPU checks leave alone (down, flapping, or scraped with 0 samples: one outage,
    one finding, from the targets check). ``missing`` is true when the job has no target at all
    (every per-GPU check is skipped). ``scrape_interval`` (seconds) is the targets' own
    ``scrapeInterval`` when the API gives it (the spec may be wrong about it), else the spec's.
    """

    api: "Answer | PromError"
    up: "Answer | PromError"
    empty: "Answer | PromError"
    flapping: dict[str, float]
    window: str
    targets: tuple[dict, ...] = ()
    down: frozenset[str] = frozenset()
    missing: bool = False
    scrape_interval: float = 15.0


def targets(ctx) -> Targets:
    """Ask the targets API and three instant queries at once (4 requests), and derive
    :class:`Targets`."""
    job = ctx.job
    res = ctx.run({"targets": ("targets",)})["targets"]
    window = format_duration(min(ctx.spec.alerts.flapping_window, ctx.lookback))
    up_sel = f"up{{{matcher('job', job)}}}"
    extra = ctx.queries_at_now({"up": up_sel,
                                "samples": f"scrape_samples_scraped{{{matcher('job', job)}}} == 0",
                                # flapping: often down, and changing state (not just down since a while)
                                "flapping": f"avg_over_time({up_sel}[{window}]) < "
                                            f"{ctx.spec.alerts.flapping_min_up_ratio:g}"
                                            f" and on (job, instance) changes({up_sel}[{window}]) >= 4"})
    flapping = {} if isinstance(extra["flapping"], PromError) else \
        {i["metric"].get("instance", ""): float(i["value"][1]) for i in extra["flapping"].data}
    base = Targets(res, extra["up"], extra["samples"], flapping, window,
                   scrape_interval=ctx.spec.exporter.scrape_interval)
    if isinstance(res, PromError):
        if res.kind != "not-found":
            return base  # the targets check reports the failed query; nothing is known to be down
        up = extra["up"]
        if isinstance(up, PromError):
            return base
        if not up.data:
            return replace(base, missing=True)
        return replace(base, down=frozenset(i["metric"].get("instance", "?") for i in up.data if i["value"][1] != "1"))
    found = tuple(t for t in res.data if (t.get("labels") or {}).get("job") == job)
    if not found:
        return replace(base, missing=True)
    intervals = [s for s in (seconds(t.get("scrapeInterval")) for t in found) if s]
    down = {instance(t) for t in found if instance(t) in flapping or t.get("health") == "down"}
    if not isinstance(extra["samples"], PromError):
        down |= {i["metric"].get("instance", "?") for i in extra["samples"].data}
    return replace(base, targets=found, down=frozenset(down),
                    scrape_interval=max(intervals) if intervals else base.scrape_interval)


def instance(target: dict) -> str:
    """A target's ``instance`` label (its scrape URL when it has none)."""
    return (target.get("labels") or {}).get("instance", target.get("scrapeUrl", "?"))


def seconds(text: str | None) -> float | None:
    """A Prometheus duration string in seconds, None when absent or unparsable."""
    try:
        return parse_duration(text) if text else None
    except ValueError:
        return None


class Inventory:
    """GPUs seen now and within the lookback, per metric, with their target, model and driver.

    Built from set differences the server computes (issue 16): the GPUs reporting now (one query,
    the union of every tracked metric), and per metric only counts, then only for a metric whose
    counts say something is missing, the GPUs that lack it now or reported it earlier in the
    lookback and no longer. ``now[M]`` of a metric every reporting GPU carries *is* the
    ``reporting`` set (one shared object, not a copy), so memory follows the fleet once, not
    fleet x metrics. ``answers`` keeps an answer (or PromError) per key ``now|M``, ``seen|M``
    (the first failed or partial answer the metric's facts came from), ``legacy|M|name`` and
    ``last|M``, so checks can tell a failed or partial query from an absence."""

    def __init__(self):
        self.now: dict[str, set[tuple]] = defaultdict(set)          # metric -> GPU keys present now
        self.seen: dict[str, set[tuple]] = defaultdict(set)          # metric -> GPU keys seen in the lookback
        self.last_seen: dict[str, dict[tuple, float]] = defaultdict(dict)  # metric -> key -> unix time (gaps only)
        self.gpus: dict[tuple, object] = {}                           # every GPU seen in the lookback
        self.instance: dict[tuple, str] = {}                          # key -> target (instance label)
        self.attrs: dict[tuple, dict[str, str]] = {}                  # key -> model/driver labels
        self.legacy: dict[str, dict[tuple, str]] = defaultdict(dict)  # metric -> key -> legacy name
        self.answers: dict[str, "Answer | PromError"] = {}
        self._reporting: set[tuple] | None = None

    @property
    def reporting(self) -> set[tuple]:
        """GPUs carrying at least one tracked metric now."""
        if self._reporting is not None:
            return self._reporting
        return set().union(*self.now.values()) if self.now else set()


def _ids(ctx) -> str:
    return ", ".join(ctx.id_labels)


def _windows(ctx) -> tuple[str, str]:
    """(recent, lookback) as PromQL durations. "now" = a sample within the last 3 scrape
    intervals: one scrape that missed the field is an intermittent gap (the continuity check's
    job), not a missing series."""
    return format_duration(3 * max(1.0, ctx.scrape_interval)), format_duration(ctx.lookback)


def present(ctx, metric: str, window: str) -> str:
    """``group by (<identity>) (last_over_time(M{job}[window]))``: one series per GPU label set."""
    return f"group by ({_ids(ctx)}) (last_over_time({ctx.sel(metric)}[{window}]))"


def reporting_query(ctx) -> str:
    """The GPUs carrying at least one tracked metric now: the union (``or``) of :func:`present`
    over the tracked metrics, one series per GPU label set (never a regex over metric names)."""
    recent, _ = _windows(ctx)
    return "\n or ".join(present(ctx, m.name, recent) for m in ctx.spec.tracked_metrics)


def inventory_queries(ctx) -> dict[str, str]:
    """First round, O(metrics) requests, answers O(fleet) once: ``fleet|now`` (:func:`reporting_query`),
    per tracked metric ``count|M`` (how many GPU label sets carry it now and within the lookback:
    two samples, labelled ``k="now"`` / ``k="seen"``) and per legacy name ``legacy|M|name``."""
    recent, window = _windows(ctx)
    out = {"fleet|now": reporting_query(ctx)}
    for m in ctx.spec.tracked_metrics:
        out[f"count|{m.name}"] = (f'label_replace(count({present(ctx, m.name, recent)}), "k", "now", "", "")\n or '
                                  f'label_replace(count({present(ctx, m.name, window)}), "k", "seen", "", "")')
        if m.required:
            for legacy in m.legacy_names:
                out[f"legacy|{m.name}|{legacy}"] = f"group by ({_ids(ctx)}) ({ctx.sel(legacy)})"
    return out


def diff_query(ctx, metric: str, missing: bool, gone: bool) -> str:
    """Second round, only for a metric whose counts differ: the GPU label sets reporting now
    that lack ``metric`` now (``k="missing"``: :func:`reporting_query` ``unless`` the metric), and
    those that carried it within the lookback but not now (``k="gone"``)."""
    recent, window = _windows(ctx)
    parts = []
    if missing:
        parts.append(f'label_replace(\n({reporting_query(ctx)})\n unless on ({_ids(ctx)}) '
                     f'{present(ctx, metric, recent)}, "k", "missing", "", "")')
    if gone:
        parts.append(f'label_replace({present(ctx, metric, window)} unless on ({_ids(ctx)}) '
                     f'{present(ctx, metric, recent)}, "k", "gone", "", "")')
    return "\n or ".join(parts)


def _labelset(metric: dict, drop: str = "") -> tuple:
    return tuple(sorted((k, v) for k, v in metric.items() if k != drop))


def _status(*answers):
    """The answer standing for several: the first that failed, else the first partial, else the first."""
    return next((a for a in answers if isinstance(a, PromError)), None) or \
        next((a for a in answers if a is not None and a.partial), None) or next(a for a in answers if a is not None)


def _counts(ans) -> dict[str, int]:
    if isinstance(ans, PromError):
        return {}
    return {i["metric"].get("k", ""): int(float(i["value"][1])) for i in ans.data}


def inventory(ctx) -> Inventory:
    """Run :func:`inventory_queries`, then :func:`diff_query` for metrics whose counts say a GPU
    lacks them now or lost them in the lookback, then :func:`last_seen_query` for metrics with GPUs
    gone since; build the :class:`Inventory`. What crosses the wire: the reporting GPUs once, a
    count per metric, and the GPUs that lack a metric."""
    first = ctx.queries_at_now(inventory_queries(ctx))
    inv = Inventory()
    lab = ctx.labels
    fleet = first["fleet|now"]
    sets: dict[tuple, tuple] = {}  # GPU label set reporting now -> its key
    if not isinstance(fleet, PromError):
        for item in fleet.data:
            gpu = ctx.gpu(item["metric"])
            sets[_labelset(item["metric"])] = gpu.key
            inv.gpus.setdefault(gpu.key, gpu)
            inv.instance[gpu.key] = item["metric"].get("instance", "")
            inv.attrs[gpu.key] = {k: item["metric"].get(k, "") for k in (lab.model, lab.driver_version)}
    reporting = set(sets.values())
    inv._reporting = reporting
    diffs = {}
    counts = {}
    for m in ctx.spec.tracked_metrics:
        counts[m.name] = c = _counts(first[f"count|{m.name}"])
        if isinstance(fleet, PromError) or isinstance(first[f"count|{m.name}"], PromError):
            continue
        missing, gone = c.get("now", 0) < len(sets), c.get("seen", 0) > c.get("now", 0)
        if missing or gone:
            diffs[f"diff|{m.name}"] = diff_query(ctx, m.name, missing, gone)
    second = ctx.queries_at_now(diffs) if diffs else {}
    for m in ctx.spec.tracked_metrics:
        name, count_ans = m.name, first[f"count|{m.name}"]
        diff = second.get(f"diff|{name}")
        inv.answers[f"now|{name}"] = _status(fleet, count_ans, diff)
        inv.answers[f"seen|{name}"] = _status(count_ans, diff)
        if isinstance(fleet, PromError) or isinstance(count_ans, PromError) or isinstance(diff, PromError):
            continue
        if counts[name].get("now", 0) == 0:
            now: set[tuple] = set()
        elif diff is None or not any(i["metric"].get("k") == "missing" for i in diff.data):
            now = reporting  # every reporting GPU carries it: the shared set
        else:
            lacking = {_labelset(i["metric"], "k") for i in diff.data if i["metric"].get("k") == "missing"}
            now = {key for s, key in sets.items() if s not in lacking}
        if now:
            inv.now[name] = now
        seen = set(now) if diff is not None else now
        for item in (diff.data if diff is not None else ()):
            if item["metric"].get("k") != "gone":
                continue
            labels = {k: v for k, v in item["metric"].items() if k != "k"}
            gpu = ctx.gpu(labels)
            seen.add(gpu.key)
            inv.gpus.setdefault(gpu.key, gpu)
            inv.instance.setdefault(gpu.key, labels.get("instance", ""))
        if seen:
            inv.seen[name] = seen
    for key, ans in first.items():
        kind, metric, *rest = key.split("|")
        if kind != "legacy":
            continue
        inv.answers[key] = ans
        if isinstance(ans, PromError):
            continue
        for item in ans.data:
            gpu = ctx.gpu(item["metric"])
            inv.legacy[metric][gpu.key] = rest[0]
            inv.instance.setdefault(gpu.key, item["metric"].get("instance", ""))
    _last_seen(ctx, inv)
    return inv


def last_seen_query(ctx, metric: str, nodes: dict[str, set[str]]) -> str:
    """When each GPU of ``nodes`` ({node label: {node names}}) last had a sample of ``metric``
    within the lookback; steps of max(scrape interval, lookback / 360) bound the cost."""
    step = format_duration(max(1.0, ctx.scrape_interval, ctx.lookback / 360))
    window = format_duration(ctx.lookback)
    parts = []
    for label, names in sorted(nodes.items()):
        # a regex over a few label *values* (node names), never over metric names
        values = "|".join(sorted(re.escape(n) for n in names))  # quoted for PromQL by matcher()
        parts.append(f'{metric}{{{matcher("job", ctx.job)},{matcher(label, values, "=~")}}}')
    sel = " or ".join(parts)
    return f"max by ({_ids(ctx)}) (max_over_time(timestamp({sel})[{window}:{step}]))"


def _last_seen(ctx, inv: Inventory) -> None:
    """Second round, only for metrics with GPUs seen earlier but missing now."""
    exprs = {}
    for metric, seen in inv.seen.items():
        gone = seen - inv.now.get(metric, set())
        if not gone:
            continue
        nodes: dict[str, set[str]] = defaultdict(set)
        for key in gone:
            gpu = inv.gpus.get(key)
            if gpu is not None and gpu.node_label:
                nodes[gpu.node_label].add(gpu.node)
        if nodes:
            exprs[f"last|{metric}"] = last_seen_query(ctx, metric, nodes)
    for key, ans in ctx.queries_at_now(exprs).items():
        inv.answers[key] = ans
        if isinstance(ans, PromError):
            continue
        for item in ans.data:
            inv.last_seen[key.split("|")[1]][ctx.gpu(item["metric"]).key] = float(item["value"][1])


def loaded_groups(answer: "Answer | PromError") -> dict[str, list[dict]] | None:
    """``{group name: its rules}`` from a ``/api/v1/rules`` answer (groups of one name from several
    files merged), None when the query failed."""
    if isinstance(answer, PromError):
        return None
    out: dict[str, list[dict]] = {}
    for group in answer.data or []:
        out.setdefault(group.get("name", ""), []).extend(group.get("rules") or [])
    return out


@dataclass(frozen=True)
class Sources:
    """Which source serves each GPU's reading of every metric with ``sources`` (issue 13), from
    the normalized expression the rules record (``generator/rules/sources.py``), queried as is so
    it works before the rules are loaded. ``served[metric]`` maps (cluster, UUID) to (node,
    source label); ``answers[metric]`` keeps the answer (or PromError) per metric."""

    served: dict[str, dict[tuple[str, str], tuple[str, str]]]
    answers: dict[str, "Answer | PromError"]

    def fallback(self, metric: str) -> set[tuple[str, str]]:
        """(cluster, UUID) of the GPUs a fallback (not the primary) serves for ``metric``."""
        from ..sourcepresets import PRIMARY
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
