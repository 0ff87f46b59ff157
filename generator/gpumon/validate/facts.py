"""Facts several validate checks read: the exporter job's targets (:mod:`.targetfacts`), the GPU
inventory, which source serves each GPU (:mod:`.sourcefacts`) and the loaded rule groups. Each is computed on first use by the run context (:class:`~gpumon.validate.base.Context`
exposes them as ``ctx.targets``, ``ctx.inventory``, ``ctx.rule_groups``) and then shared, so a
check gives the same findings whether it runs alone (``--checks presence``) or after the others.

Facts are values; checks never change them. This module does not import the context (the context
imports it); ``ctx`` below is the run context.
"""

from __future__ import annotations

import re
from collections import defaultdict

from ..durations import format_duration
from ..promapi import Answer, PromError
from ..promqltext import literal_replacement, matcher
# the targets and sources facts live in their own modules; read through this one
from .sourcefacts import Sources, sources  # noqa: F401
from .targetfacts import Targets, instance, seconds, targets  # noqa: F401


class Inventory:
    """GPUs seen now and within the lookback, per metric, with their target, model and driver.

    Built from set differences the server computes (issue 16): the GPUs reporting now (one query,
    the union of every tracked metric), per metric a count and the GPUs that reported it earlier
    in the lookback and no longer, and only for a metric fewer GPUs carry than report, the GPUs
    that lack it. ``now[M]`` of a metric every reporting GPU carries *is* the
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


def other_spelling(label: str) -> str:
    """The label name an exporter version may use instead (``Hostname`` <-> ``hostname``,
    ``UUID`` <-> ``uuid``; NVIDIA/dcgm-exporter#655 and the 1.x ``use-old-namespace`` option)."""
    return label.lower() if label != label.lower() else label.capitalize() if label == "hostname" else label.upper()


def _ids(ctx) -> str:
    """The identity labels the inventory groups by: the context's, without ``job``. Every
    selector here filters ``job="<job>"``, so the label is the same on every series (the GPU's
    key takes it from the context); leaving it out saves its ~22 bytes on every GPU of the
    reporting answer (0.35 MB at 16,000 GPUs, issue 16)."""
    return ", ".join(label for label in ctx.id_labels if label != "job")


def _windows(ctx) -> tuple[str, str]:
    """(recent, lookback) as PromQL durations. "now" = a sample within the last 3 scrape
    intervals: one scrape that missed the field is an intermittent gap (the continuity check's
    job), not a missing series."""
    return format_duration(3 * max(1.0, ctx.scrape_interval)), format_duration(ctx.lookback)


def present(ctx, metric: str, window: str) -> str:
    """``group by (<identity>) (last_over_time(M{job}[window]))``: one series per GPU label set."""
    return f"group by ({_ids(ctx)}) (last_over_time({ctx.sel(metric)}[{window}]))"


def _shard_matchers(ctx) -> list[str]:
    """Matchers that split the GPUs into ``min(--concurrency, 16)`` disjoint parts by the last
    character of the GPU label (``UUID=~".*[048c]"``, ...), so the reporting query runs as that
    many requests side by side (Prometheus evaluates one query on one core). The last part is the
    complement of the others (``!~``): a series without the label, or with the other spelling or
    upper-case hex, still lands in exactly one part. Hex digits go round robin, so UUIDs that
    differ only in their last digits (a node's GPUs 0-7) spread evenly too. One part: no matcher."""
    parts = max(1, min(ctx.concurrency, 16))
    if parts == 1:
        return [""]
    classes = ["0123456789abcdef"[i::parts] for i in range(parts - 1)]
    return [matcher(ctx.labels.gpu, f".*[{c}]", "=~") for c in classes] + \
        [matcher(ctx.labels.gpu, f".*[{''.join(sorted(''.join(classes)))}]", "!~")]


def reporting_query(ctx, shard: str = "") -> str:
    """The GPUs carrying at least one tracked metric now: ``group by (<identity>)`` of the union
    (``or``) of ``last_over_time(M{job}[3 scrapes])`` over the tracked metrics, one series per GPU
    label set (never a regex over metric names; one ``group by`` around the union keeps the URL
    short: about 2 KB for the bundled spec, below proxies' 8 KB request-line limits). ``shard``
    (one of :func:`_shard_matchers`) restricts every selector to one part of the GPUs."""
    recent, _ = _windows(ctx)
    more = (shard,) if shard else ()
    union = "\n or ".join(f"last_over_time({ctx.sel(m.name, *more)}[{recent}])" for m in ctx.spec.tracked_metrics)
    return f"group by ({_ids(ctx)}) (\n{union}\n)"


def inventory_queries(ctx) -> dict[str, str]:
    """First round, O(metrics) requests, answers O(fleet) once: ``fleet|now|i`` (the
    :func:`reporting_query` of each part of :func:`_shard_matchers`: disjoint, their union is the
    fleet), per tracked metric ``state|M`` (how many GPU label sets carry it now, one sample
    labelled ``gpumon_state="now"``, and the label sets that carried it within the lookback but
    not now, labelled ``gpumon_state="gone"``: what is wrong, not the fleet), and ``fleet|legacy``
    (the GPUs carrying a 1.x name of a required metric, labelled with :data:`LEGACY_FIELD` and
    :data:`LEGACY_NAME`)."""
    recent, window = _windows(ctx)
    ids = _ids(ctx)
    out = {f"fleet|now|{i}": reporting_query(ctx, shard) for i, shard in enumerate(_shard_matchers(ctx))}
    legacy = []
    for m in ctx.spec.tracked_metrics:
        out[f"state|{m.name}"] = (f'label_replace(count({present(ctx, m.name, recent)}), "{STATE}", "now", "", "")\n or '
                                  f'label_replace({present(ctx, m.name, window)} unless on ({ids}) '
                                  f'{present(ctx, m.name, recent)}, "{STATE}", "gone", "", "")')
        if m.required:
            for name in m.legacy_names:
                legacy.append(f'label_replace(label_replace(group by ({ids}) ({ctx.sel(name)}), '
                              f'"{LEGACY_FIELD}", {literal_replacement(m.name)}, "", ""), '
                              f'"{LEGACY_NAME}", {literal_replacement(name)}, "", "")')
    if legacy:
        out["fleet|legacy"] = "\n or ".join(legacy)
    return out


#: labels the inventory queries add (never dcgm-exporter labels): which spec'd metric, under which
#: 1.x name, and whether a ``state|M`` sample is the count now or a GPU gone since
LEGACY_FIELD, LEGACY_NAME, STATE = "gpumon_field", "gpumon_legacy", "gpumon_state"


def node_count_query(ctx, metric: str, full: str | None = None) -> str:
    """Second round, only for a metric fewer GPUs carry now than report at all: how many GPU
    label sets carry it now per target (``count by (instance)``), compared with the reporting
    GPUs per target (known here), tells which nodes lack it on some GPUs without evaluating the
    reporting union again. With ``full``, a metric every reporting GPU carries (its GPUs *are*
    the reporting ones, per node too), the server compares: only the nodes where ``metric`` is
    short come back (0 where no GPU carries it), not a number for every node (0.14 MB at 16,000
    GPUs per faulty metric)."""
    recent, _ = _windows(ctx)
    mine = f"count by (instance) ({present(ctx, metric, recent)})"
    if full is None:
        return mine
    ref = f"count by (instance) ({present(ctx, full, recent)})"
    return f"({mine} < on (instance) {ref})\n or (({ref} unless on (instance) {mine}) * 0)"


def _detail_queries(ctx, partial: dict[str, set[str]]) -> "_LastSeen":
    """Third round, only for nodes where some but not all reporting GPUs carry a metric
    (``partial``: {metric: {instance}}): the label sets carrying it there, labelled with
    ``gpumon_field``, joined with ``or`` into requests of at most :data:`DETAIL_CHARS` characters
    of instance names (``detail|0`` ...; usually one: a node missing a field on every GPU needs no
    detail)."""
    recent, _ = _windows(ctx)
    parts = []
    for metric, nodes in sorted(partial.items()):
        names = sorted(nodes)
        while names:
            chunk, size = [], 0
            while names and (not chunk or size + len(names[0]) < DETAIL_CHARS):
                size += len(names[0]) + 1
                chunk.append(names.pop(0))
            # a regex over a few label *values* (instance names), never over metric names
            sel = ctx.sel(metric, matcher("instance", "|".join(re.escape(n) for n in chunk), "=~"))
            parts.append((metric, size, f'label_replace(group by ({_ids(ctx)}) (last_over_time({sel}[{recent}])), '
                                        f'"{LEGACY_FIELD}", {literal_replacement(metric)}, "", "")'))
    groups: list[list[tuple[str, str]]] = []
    size = DETAIL_CHARS
    for metric, chars, expr in parts:
        if size + chars >= DETAIL_CHARS:
            groups.append([])
            size = 0
        size += chars
        groups[-1].append((metric, expr))
    out = _LastSeen()
    out.metrics = {}
    for i, group in enumerate(groups):
        out[f"detail|{i}"] = "\n or ".join(expr for _, expr in group)
        out.metrics[f"detail|{i}"] = [metric for metric, _ in group]
    return out


#: instance-name characters per detail request (URLs stay below proxies' 8 KB request lines)
DETAIL_CHARS = 3000


def _labelset(metric: dict, drop: str = "") -> tuple:
    return tuple(sorted((k, v) for k, v in metric.items() if k != drop))


def _status(*answers):
    """The answer standing for several: the first that failed, else the first partial, else the first."""
    answers = [a for a in answers if a is not None]
    return next((a for a in answers if isinstance(a, PromError)), None) or \
        next((a for a in answers if a.partial), None) or answers[0]


def inventory(ctx) -> Inventory:
    """Run :func:`inventory_queries`; then in one round :func:`node_count_query` for metrics fewer
    GPUs carry now than report, and :func:`last_seen_query` for metrics with GPUs gone since; then,
    only for nodes where some reporting GPUs carry such a metric and some do not,
    :func:`_detail_queries`; build the :class:`Inventory`. What crosses the wire: the reporting
    GPUs once, a count per metric, per faulty metric a count per node, and the GPUs that lost a
    metric in the lookback (or lack it on a node where others carry it)."""
    first = ctx.queries_at_now(inventory_queries(ctx))
    inv = Inventory()
    shards = [first[k] for k in first if k.startswith("fleet|now|")]
    fleet = _status(*shards)
    sets = _reporting_sets(ctx, inv, shards) if not isinstance(fleet, PromError) else {}
    reporting = set(sets.values())
    inv._reporting = reporting
    counts, gone = _states(ctx, inv, first)
    faulty = {name for name, n in counts.items() if 0 < n < len(sets)} if not isinstance(fleet, PromError) else set()
    full = next((m.name for m in ctx.spec.tracked_metrics if sets and counts.get(m.name) == len(sets)), None)
    need = {f"count|{name}": node_count_query(ctx, name, full) for name in sorted(faulty)}
    # when each gone GPU was last seen, in the same round: a metric whose "now" set is yet to be
    # told asks for the nodes of all its gone GPUs (the answer's extra GPUs are never read); the
    # rest for those not reporting it now
    last = _last_seen_queries(ctx, {name: [g for g in gpus if name in faulty or counts[name] == 0
                                           or g.key not in reporting] for name, gpus in gone.items()})
    need.update(last)
    second = ctx.queries_at_now(need) if need else {}
    lacking, status = _lacking(ctx, sets, faulty, second, short_only=full is not None)
    for m in ctx.spec.tracked_metrics:
        name, state = m.name, first[f"state|{m.name}"]
        diff = status.get(name)
        inv.answers[f"now|{name}"] = _status(fleet, state, diff)
        inv.answers[f"seen|{name}"] = state
        if isinstance(fleet, PromError) or isinstance(state, PromError) or isinstance(diff, PromError):
            continue
        if counts[name] == 0:
            now: set[tuple] = set()
        elif name not in faulty:
            now = reporting  # every reporting GPU carries it: the shared set, not a copy
        else:
            now = {key for s, key in sets.items() if s not in lacking[name]}
        if now:
            inv.now[name] = now
        seen = (now | {g.key for g in gone[name]}) if gone[name] else now
        if seen:
            inv.seen[name] = seen
    _legacy(ctx, inv, first.get("fleet|legacy"))
    _last_seen(ctx, inv, last, second)
    return inv


def _reporting_sets(ctx, inv: Inventory, shards: list) -> dict[tuple, tuple]:
    """{GPU label set reporting now: its key} from the reporting parts' answers (disjoint; a set
    all the same), filling the inventory's GPUs, targets and model/driver labels."""
    lab = ctx.labels
    sets: dict[tuple, tuple] = {}
    for answer in shards:
        for item in answer.data:
            gpu = ctx.gpu(item["metric"])
            sets[_labelset(item["metric"])] = gpu.key
            inv.gpus.setdefault(gpu.key, gpu)
            inv.instance[gpu.key] = item["metric"].get("instance", "")
            inv.attrs[gpu.key] = {k: item["metric"].get(k, "") for k in (lab.model, lab.driver_version)}
    return sets


def _states(ctx, inv: Inventory, first: dict) -> tuple[dict[str, int], dict[str, list]]:
    """From the ``state|M`` answers: ({metric: GPU label sets carrying it now}, {metric: Gpu of
    each label set seen in the lookback, not now}); metrics whose query failed are in neither."""
    counts: dict[str, int] = {}
    gone: dict[str, list] = {}
    for m in ctx.spec.tracked_metrics:
        ans = first[f"state|{m.name}"]
        if isinstance(ans, PromError):
            continue
        counts[m.name] = next((int(float(i["value"][1])) for i in ans.data if i["metric"].get(STATE) == "now"), 0)
        gone[m.name] = []
        for item in ans.data:
            if item["metric"].get(STATE) == "gone":
                labels = {k: v for k, v in item["metric"].items() if k != STATE}
                gpu = ctx.gpu(labels)
                gone[m.name].append(gpu)
                inv.gpus.setdefault(gpu.key, gpu)
                inv.instance.setdefault(gpu.key, labels.get("instance", ""))
    return counts, gone


def _lacking(ctx, sets: dict[tuple, tuple], faulty: set[str], second: dict,
             short_only: bool = False) -> tuple[dict[str, set], dict]:
    """The reporting label sets lacking each faulty metric now, from its per-node counts (a node
    reporting more GPUs than carry the metric there lacks it on some; on a node that does not
    carry it at all, on every one) and, for nodes where only some GPUs lack it, from a third round
    of :func:`_detail_queries`. ``short_only``: the counts list only the nodes where the metric is
    short (:func:`node_count_query` with ``full``), a node not listed carries it on every GPU.
    Returns ({metric: label sets}, {metric: the answer standing for its counts and details})."""
    by_node: dict[str, list[tuple]] = defaultdict(list)
    for s in sets:
        by_node[dict(s).get("instance", "")].append(s)
    lacking: dict[str, set] = {}
    partial: dict[str, set[str]] = {}
    status: dict = {}
    for name in faulty:
        ans = status[name] = second[f"count|{name}"]
        if isinstance(ans, PromError):
            continue
        carried = {i["metric"].get("instance", ""): int(float(i["value"][1])) for i in ans.data}
        nodes = [n for n in carried if n in by_node] if short_only else by_node
        short = [node for node in nodes if carried.get(node, 0) < len(by_node[node])]
        lacking[name] = {s for node in short if not carried.get(node) for s in by_node[node]}
        partial[name] = {node for node in short if carried.get(node)}
    detail = _detail_queries(ctx, {k: v for k, v in partial.items() if v})
    third = ctx.queries_at_now(detail) if detail else {}
    for key, metrics in detail.metrics.items():
        ans = third[key]
        has: dict[str, set] = defaultdict(set)
        if not isinstance(ans, PromError):
            for item in ans.data:
                has[item["metric"].get(LEGACY_FIELD, "")].add(
                    _labelset({k: v for k, v in item["metric"].items() if k != LEGACY_FIELD}))
        for name in metrics:
            status[name] = _status(status[name], ans)
            lacking[name] |= {s for node in partial[name] for s in by_node[node] if s not in has[name]}
    return lacking, status


def _legacy(ctx, inv: Inventory, legacy) -> None:
    """The GPUs carrying a 1.x name of a required metric, from the ``fleet|legacy`` answer."""
    for m in ctx.spec.required_metrics:
        for name in m.legacy_names:
            inv.answers[f"legacy|{m.name}|{name}"] = legacy
    if legacy is not None and not isinstance(legacy, PromError):
        for item in legacy.data:
            labels = {k: v for k, v in item["metric"].items() if k not in (LEGACY_FIELD, LEGACY_NAME)}
            gpu = ctx.gpu(labels)
            inv.legacy[item["metric"].get(LEGACY_FIELD, "")][gpu.key] = item["metric"].get(LEGACY_NAME, "")
            inv.instance.setdefault(gpu.key, labels.get("instance", ""))
            # a GPU of a node on 1.x names is in the fleet (the inventory's count, the coverage rows)
            inv.gpus.setdefault(gpu.key, gpu)
            inv.attrs.setdefault(gpu.key, {k: labels.get(k, "") for k in (ctx.labels.model, ctx.labels.driver_version)})


def _last_seen(ctx, inv: Inventory, last: "_LastSeen", second: dict) -> None:
    """When each gone GPU last had each metric, from the last-seen answers."""
    for key, metrics in last.metrics.items():
        ans = second[key]
        for metric in metrics:
            inv.answers[f"last|{metric}"] = ans
        if isinstance(ans, PromError):
            continue
        for item in ans.data:
            labels = {k: v for k, v in item["metric"].items() if k != LEGACY_FIELD}
            inv.last_seen[item["metric"].get(LEGACY_FIELD, "")][ctx.gpu(labels).key] = float(item["value"][1])


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


class _LastSeen(dict):
    """``{request key: expr}`` of the last-seen round, and ``metrics``: {request key: [metric]}."""

    metrics: dict[str, list[str]]


def _last_seen_queries(ctx, gone: dict[str, list]) -> _LastSeen:
    """The :func:`last_seen_query` of each metric with ``gone`` GPUs ({metric: Gpu list}), each
    labelled with ``gpumon_field`` and joined with ``or`` into at most ``ctx.concurrency``
    requests (``last|0`` ...), so they still run side by side."""
    parts = []
    for metric, gpus in gone.items():
        nodes: dict[str, set[str]] = defaultdict(set)
        for gpu in gpus:
            if gpu.node_label:
                nodes[gpu.node_label].add(gpu.node)
        if nodes:
            parts.append((metric, f'label_replace({last_seen_query(ctx, metric, nodes)}, "{LEGACY_FIELD}", '
                                  f'{literal_replacement(metric)}, "", "")'))
    out = _LastSeen()
    out.metrics = {}
    chunks = max(1, min(len(parts), getattr(ctx, "concurrency", 4)))
    for i in range(chunks):
        mine = parts[i::chunks]
        if mine:
            out[f"last|{i}"] = "\n or ".join(expr for _, expr in mine)
            out.metrics[f"last|{i}"] = [metric for metric, _ in mine]
    return out


def loaded_groups(answer: "Answer | PromError") -> dict[str, list[dict]] | None:
    """``{group name: its rules}`` from a ``/api/v1/rules`` answer (groups of one name from several
    files merged), None when the query failed."""
    if isinstance(answer, PromError):
        return None
    out: dict[str, list[dict]] = {}
    for group in answer.data or []:
        out.setdefault(group.get("name", ""), []).extend(group.get("rules") or [])
    return out
