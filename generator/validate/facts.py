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
    ``answers`` keeps every query answer by key (``now|M``, ``seen|M``, ``legacy|M|name``,
    ``last|M``), so checks can tell a failed or partial query from an absence."""

    def __init__(self):
        self.now: dict[str, set[tuple]] = defaultdict(set)          # metric -> GPU keys present now
        self.seen: dict[str, set[tuple]] = defaultdict(set)          # metric -> GPU keys seen in the lookback
        self.last_seen: dict[str, dict[tuple, float]] = defaultdict(dict)  # metric -> key -> unix time (gaps only)
        self.gpus: dict[tuple, object] = {}                           # every GPU seen in the lookback
        self.instance: dict[tuple, str] = {}                          # key -> target (instance label)
        self.attrs: dict[tuple, dict[str, str]] = {}                  # key -> model/driver labels
        self.legacy: dict[str, dict[tuple, str]] = defaultdict(dict)  # metric -> key -> legacy name
        self.answers: dict[str, "Answer | PromError"] = {}

    @property
    def reporting(self) -> set[tuple]:
        """GPUs carrying at least one tracked metric now."""
        return set().union(*self.now.values()) if self.now else set()


def _ids(ctx) -> str:
    return ", ".join(ctx.id_labels)


def inventory_queries(ctx) -> dict[str, str]:
    """``{"now|M": ..., "seen|M": ..., "legacy|M|name": ...}`` for every tracked metric: O(metrics)."""
    window = format_duration(ctx.lookback)
    # "now" = a sample within the last 3 scrape intervals: one scrape that missed the field is an
    # intermittent gap (the continuity check's job), not a missing series.
    recent = format_duration(3 * max(1.0, ctx.scrape_interval))
    out = {}
    for m in ctx.spec.tracked_metrics:
        sel = ctx.sel(m.name)
        out[f"now|{m.name}"] = f"group by ({_ids(ctx)}) (last_over_time({sel}[{recent}]))"
        out[f"seen|{m.name}"] = f"group by ({_ids(ctx)}) (last_over_time({sel}[{window}]))"
        if m.required:
            for legacy in m.legacy_names:
                out[f"legacy|{m.name}|{legacy}"] = f"group by ({_ids(ctx)}) ({ctx.sel(legacy)})"
    return out


def inventory(ctx) -> Inventory:
    """Run :func:`inventory_queries` and, for metrics with GPUs gone since, :func:`last_seen_query`;
    build the :class:`Inventory`."""
    answers = ctx.queries_at_now(inventory_queries(ctx))
    inv = Inventory()
    lab = ctx.labels
    for key, ans in answers.items():
        if isinstance(ans, PromError):
            continue
        kind, metric, *rest = key.split("|")
        for item in ans.data:
            gpu = ctx.gpu(item["metric"])
            if kind == "legacy":
                inv.legacy[metric][gpu.key] = rest[0]
                inv.instance.setdefault(gpu.key, item["metric"].get("instance", ""))
            else:
                inv.gpus.setdefault(gpu.key, gpu)
                inv.instance.setdefault(gpu.key, item["metric"].get("instance", ""))
            if kind == "now":
                inv.now[metric].add(gpu.key)
                inv.instance[gpu.key] = item["metric"].get("instance", "")
                inv.attrs[gpu.key] = {k: item["metric"].get(k, "") for k in (lab.model, lab.driver_version)}
            elif kind == "seen":
                inv.seen[metric].add(gpu.key)
    inv.answers = answers
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
