"""The text of the GPU inventory's queries (:mod:`.inventoryfacts` runs them and builds the
:class:`~.inventoryfacts.Inventory`): the reporting union and its parts, the per-metric states,
the per-node counts and details of faulty metrics, and when gone GPUs were last seen. Every
query answers O(metrics) or O(what is wrong), except the reporting parts, which carry each
reporting GPU once. ``ctx`` below is the run context."""

from __future__ import annotations

import re
from collections import defaultdict

from ..durations import format_duration
from ..promqltext import literal_replacement, matcher
from .readings import PLAUSIBLE, latest, plausible, recent_window


def _ids(ctx) -> str:
    """The identity labels the inventory groups by: the context's, without ``job``. Every
    selector here filters ``job="<job>"``, so the label is the same on every series (the GPU's
    key takes it from the context); leaving it out saves its ~22 bytes on every GPU of the
    reporting answer (0.35 MB at 16,000 GPUs, issue 16)."""
    return ", ".join(label for label in ctx.id_labels if label != "job")


def _windows(ctx) -> tuple[str, str]:
    """(recent, lookback) as PromQL durations (recent: :func:`.readings.recent_window`)."""
    return recent_window(ctx), format_duration(ctx.lookback)


def present(ctx, metric: str, window: str) -> str:
    """``group by (<identity>) (last_over_time(M{job}[window]))``: one series per GPU label set."""
    return f"group by ({_ids(ctx)}) (last_over_time({ctx.sel(metric)}[{window}]))"


def gone_query(ctx, metric: str, window: str, recent: str) -> str:
    """The GPU label sets that carried ``metric`` within ``window`` and not within ``recent``:
    ``group by (<identity>) (last_over_time(M[window]) unless on (<identity>)
    last_over_time(M[recent]))``. The set difference is taken on the series and grouped after:
    the same label sets as the difference of the two groupings (``unless on`` compares only the
    identity labels), without grouping every GPU's series twice on the way (what is left is the
    few gone GPUs). Asked only where :func:`gaps_query` may not list every gone GPU
    (:func:`.inventoryfacts._untargeted`)."""
    ids = _ids(ctx)
    return (f"group by ({ids}) (last_over_time({ctx.sel(metric)}[{window}]) unless on ({ids}) "
            f"last_over_time({ctx.sel(metric)}[{recent}]))")


#: what :func:`gaps_query` adds per label set carried now and takes off per label set: 2^32, above any
#: count of samples in a lookback, and exact in float64 together with them
NOW_OFFSET = 2 ** 32


def gaps_query(ctx, metric: str) -> str:
    """One read of a required ``metric``'s lookback for two facts, per GPU label set (the
    context's identity labels, ``job`` too): the share of its target's successful scrapes that
    carried the metric, for label sets below ``alerts.gap_min_ratio`` (the continuity check's
    intermittent GPUs), and a negative value for every label set that carried it within the
    lookback and not now (the inventory's gone GPUs).

    The numerator is ``sum by (<identity>) (count_over_time(M[lookback]) or
    label_replace(group by (<identity>) (count_over_time(M[recent])), "gpumon_now", ...) * 2^32)
    - 2^32``: the samples within the lookback, plus 2^32 once for a label set carried now (one
    ``group`` sample however many series carry it), minus 2^32 once. A label set carried now
    keeps its count, however many series it has at once: a pod replaced by the next, a GPU shared
    by k pods (time-slicing: the sum of its series' samples, a ratio above 1), or two Prometheus
    replicas not deduplicated (VictoriaMetrics or Thanos without a replica label: every series
    twice, ``up`` too, the ratio intact); a label set with no series now is negative, whatever
    its series were before (a GPU several pods shared is still gone when all are).
    ``count_over_time`` of the recent window, not its last value: ``group`` reads no value, and a
    NaN reading stays one sample.

    The denominator is the target's ``sum_over_time(up[lookback])``, ``up`` summed by target
    first (its target labels would make the division many-to-many); under a global view the
    cluster is part of the target (two clusters may reuse an address). A label set whose target
    matches no ``up`` series (``instance`` rewritten by metric relabelling) is not in the
    answer: the inventory then reads the gone GPUs with :func:`gone_query`.

    Grouped without the model and driver labels (what the continuity check and the gone GPUs
    read of a label set is its target, node, UUID, index and MIG instance): a driver upgraded
    under a running target changes ``DCGM_FI_DRIVER_VERSION`` on every series, and the GPU's
    samples under the old and the new value are one GPU's, not a label set gone and one that
    missed the scrapes before the upgrade."""
    w = format_duration(ctx.lookback)
    recent, _ = _windows(ctx)
    ids, target = gap_ids(ctx), _target(ctx)
    s = ctx.sel(metric)
    now = f'label_replace(group by ({ids}) (count_over_time({s}[{recent}])), "{NOW}", "1", "", "") * {NOW_OFFSET}'
    return (f"(sum by ({ids}) (count_over_time({s}[{w}]) or {now}) - {NOW_OFFSET})\n"
            f"/ on ({target}) group_left ()\nsum by ({target}) (sum_over_time({ctx.sel('up')}[{w}]))\n"
            f"< {ctx.spec.alerts.gap_min_ratio:g}")


def gap_ids(ctx) -> str:
    """The labels :func:`gaps_query` groups by: the identity labels without model and driver."""
    lab = ctx.labels
    return ", ".join(label for label in ctx.id_labels if label not in (lab.model, lab.driver_version))


def _target(ctx) -> str:
    """The labels of a target: job and instance, and the cluster under a global view."""
    return ", ".join((ctx.labels.cluster,) * bool(ctx.labels.cluster) + ("job", "instance"))


def _on(instances) -> str:
    """``instance=~"a|b"``: a regex over a few label *values*, never over metric names."""
    return matcher("instance", "|".join(sorted(re.escape(i) for i in instances)), "=~")


def at_start_query(ctx, metric: str, instances) -> str:
    """The GPU label sets of ``instances`` that carried ``metric`` at the lookback's start (an
    instant read there: one sample per series)."""
    return f"group by ({gap_ids(ctx)}) ({ctx.sel(metric, _on(instances))} offset {format_duration(ctx.lookback)})"


def first_seen_query(ctx, metric: str, instances) -> str:
    """When each GPU label set of ``instances`` first had a sample of ``metric`` within the
    lookback (as :func:`last_seen_query`, in steps; a label set there at the lookback's start
    answers a time before it)."""
    step = format_duration(max(1.0, ctx.scrape_interval, ctx.lookback / 360))
    sel = ctx.sel(metric, _on(instances))
    return f"min by ({gap_ids(ctx)}) (min_over_time(timestamp({sel})[{format_duration(ctx.lookback)}:{step}]))"


def share_query(ctx, metric: str, instances, seconds: float) -> str:
    """:func:`gaps_query`'s share over the last ``seconds`` only, for the GPUs of ``instances``
    (those first seen within the lookback: their share of the scrapes since), below the threshold."""
    w, more = format_duration(seconds), _on(instances)
    return (f"sum by ({gap_ids(ctx)}) (count_over_time({ctx.sel(metric, more)}[{w}]))\n"
            f"/ on ({_target(ctx)}) group_left ()\nsum by ({_target(ctx)}) (sum_over_time({ctx.sel('up', more)}[{w}]))\n"
            f"< {ctx.spec.alerts.gap_min_ratio:g}")


def seen_query(ctx, metric: str) -> str:
    """Second round, only for an optional metric no GPU carries now: the GPU label sets that
    carried it within the lookback (all of them are gone), labelled ``gpumon_state="gone"``.

    Why optional metrics are not read over the lookback in the first round: that read (every
    sample of every GPU's series over ``--lookback``) is most of the inventory's server time,
    and what it adds for an optional metric some GPUs still carry is read by nothing: no check
    reports an optional metric per GPU (the presence check looks at required metrics, the
    optional check only at metrics no GPU carries, the coverage matrix shows an optional field
    a GPU lacks as absent either way), and a GPU gone altogether is in the required metrics'
    gone sets (with when it was last seen)."""
    _, window = _windows(ctx)
    seen = f"group by ({_ids(ctx)}) (last_over_time({ctx.sel(metric)}[{window}]))"
    return f'label_replace({seen}, "{STATE}", "gone", "", "")'


def _shard_matchers(ctx) -> list[str]:
    """Matchers that split the GPUs into ``min(--concurrency, 10)`` disjoint parts by the last
    digit of the GPU index label (``gpu=~".*[05]"``, ...), so the reporting query runs as that
    many requests side by side (Prometheus evaluates one query on one core). The last part is the
    complement of the others (``!~``): a series without the label, or with a value not ending in
    a digit, still lands in exactly one part. Digits go round robin, so a node's GPUs 0-7 spread
    evenly. The index, not the UUID: a regex matcher costs the server one match per value of its
    label and one postings list merged per matching value, for every selector of the union (28 of
    them per part); a fleet has a few GPU indexes and as many UUIDs as GPUs (at 8,000 GPUs the
    UUID parts cost twice the unsplit query, the index parts about the same). One part: no matcher."""
    parts = max(1, min(ctx.concurrency, 10))
    if parts == 1:
        return [""]
    classes = ["0123456789"[i::parts] for i in range(parts - 1)]
    label = ctx.labels.gpu_index
    return [matcher(label, f".*[{c}]", "=~") for c in classes] + \
        [matcher(label, f".*[{''.join(sorted(''.join(classes)))}]", "!~")]


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
    fleet), per tracked metric ``state|M`` (:func:`state_query`: how many GPU label sets carry it
    now, and whether any of them reads it badly), per required metric ``gaps|M`` (:func:`gaps_query`: the
    label sets that carried it within the lookback but not now, and those that missed it in
    scrapes: what is wrong, not the fleet; an optional metric's lookback is read only when no GPU
    carries it now, :func:`seen_query`), and ``fleet|legacy``
    (the GPUs carrying a 1.x name of a required metric, labelled with :data:`LEGACY_FIELD` and
    :data:`LEGACY_NAME`)."""
    recent, _ = _windows(ctx)
    ids = _ids(ctx)
    out = {f"fleet|now|{i}": reporting_query(ctx, shard) for i, shard in enumerate(_shard_matchers(ctx))}
    legacy = []
    for m in ctx.spec.tracked_metrics:
        out[f"state|{m.name}"] = state_query(ctx, m)
        if m.required:
            out[f"gaps|{m.name}"] = gaps_query(ctx, m.name)
            for name in m.legacy_names:
                legacy.append(f'label_replace(label_replace(group by ({ids}) ({ctx.sel(name)}), '
                              f'"{LEGACY_FIELD}", {literal_replacement(m.name)}, "", ""), '
                              f'"{LEGACY_NAME}", {literal_replacement(name)}, "", "")')
    if legacy:
        out["fleet|legacy"] = "\n or ".join(legacy)
    return out


def state_query(ctx, m) -> str:
    """How many GPU label sets carry ``m`` now. Where one comparison tells a good reading
    (:func:`.readings.plausible`), the count says how many of them read it well:
    ``count_values("gpumon_plausible", min by (<identity>) (good))``, one row ``"1"`` (every series
    of the GPU reads well) and one ``"0"`` (some series reads NaN, a blank code or outside the
    range), their sum the count: the values check asks for the bad readings only when there is a
    ``"0"``, and a healthy fleet's readings are read once. Otherwise one sample
    ``label_replace(count(group by (<identity>) (...)), "gpumon_state", "now", "", "")``."""
    good = plausible(m, latest(ctx, m))
    if good is not None:
        return f'count_values("{PLAUSIBLE}", min by ({_ids(ctx)}) ({good}))'
    return f'label_replace(count({present(ctx, m.name, recent_window(ctx))}), "{STATE}", "now", "", "")'


#: labels the inventory queries add (never dcgm-exporter labels): which spec'd metric, under which
#: 1.x name, whether a ``state|M`` sample is the count now or a GPU gone since, and which series
#: of a ``gaps|M`` numerator are the ones carried now
LEGACY_FIELD, LEGACY_NAME, STATE, NOW = "gpumon_field", "gpumon_legacy", "gpumon_state", "gpumon_now"


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
