"""The GPU inventory fact (``ctx.inventory``, :mod:`.facts`): the GPUs reporting now, per tracked
metric the GPUs carrying it now and within the lookback, when gone GPUs were last seen, and the
GPUs on 1.x names; built from the answers of :mod:`.inventoryqueries`. ``ctx`` below is the run
context."""

from __future__ import annotations

import threading
from collections import Counter, defaultdict

from ..promapi import Answer, PromError
from .gpus import NOWHERE, Gpu, Site, other_spelling
from .inventoryqueries import (LEGACY_FIELD, LEGACY_NAME, STATE, _detail_queries, _last_seen_queries, _LastSeen,
                               _windows, gone_query, inventory_queries, node_count_query, seen_query)
from .keysets import Amended
from .readings import judged


class Inventory:
    """GPUs seen now and within the lookback, per metric, with their target, model and driver.

    Built from set differences the server computes (issue 16): the GPUs reporting now (one query,
    the union of every tracked metric), per metric a count and the GPUs that reported it earlier
    in the lookback and no longer, and only for a metric fewer GPUs carry than report, the GPUs
    that lack it. ``now[M]`` of a metric every reporting GPU carries *is* the
    ``reporting`` set (one shared object, not a copy), so memory follows the fleet once, not
    fleet x metrics. ``answers`` keeps an answer (or PromError) per key ``now|M``, ``seen|M``
    (the first failed or partial answer the metric's facts came from), ``legacy|M|name``,
    ``last|M``, ``gaps|M`` (:func:`.inventoryqueries.gaps_query`) and ``plausible|M`` (the count
    rows of :func:`.inventoryqueries.state_query`), so checks can tell a failed or partial query
    from an absence."""

    def __init__(self):
        self.now: dict[str, set[tuple]] = defaultdict(set)          # metric -> GPU keys present now
        self.seen: dict[str, set[tuple]] = defaultdict(set)          # metric -> GPU keys seen in the lookback
        self.last_seen: dict[str, dict[tuple, float]] = defaultdict(dict)  # metric -> key -> unix time (gaps only)
        self.sites: dict[tuple, Site] = {}                            # every GPU seen in the lookback -> its Site
        self.legacy: dict[str, dict[tuple, str]] = defaultdict(dict)  # metric -> key -> legacy name
        self.answers: dict[str, "Answer | PromError"] = {}
        self._reporting: set[tuple] | None = None
        #: ``instance`` values of GPUs reporting now that name no target of the job (metric
        #: relabelling rewrote them): no ``up`` series to divide their samples by
        self.untargeted: set[str] = set()
        self._interned: dict[Site, Site] = {}
        self._nodes: dict[str, set[str]] | None = None

    def nodes_of(self, instance: str) -> set[str]:
        """The nodes whose GPUs ``instance`` served within the lookback, from a map of every target
        built once (a mass outage asks for thousands of targets: one pass over the GPUs, not one per
        target)."""
        if self._nodes is None:
            self._nodes = defaultdict(set)
            for key, site in self.sites.items():
                if key[1]:
                    self._nodes[site.instance].add(key[1])
        return self._nodes.get(instance, set())

    def site(self, instance: str, attrs: tuple, node_label: str, uuid_label: str, others: tuple = ()) -> Site:
        """The one :class:`Site` of these values (interned: the GPUs of a node share it)."""
        site = Site(instance, attrs, node_label, uuid_label, others)
        return self._interned.setdefault(site, site)

    def gpu(self, key: tuple) -> Gpu:
        """The :class:`Gpu` of a key, with the label spellings its series carry."""
        return self.sites.get(key, NOWHERE).gpu(key)

    def instance(self, key: tuple) -> str:
        """The target a GPU reports from ("" when not seen)."""
        return self.sites.get(key, NOWHERE).instance

    def attrs(self, key: tuple) -> dict:
        """A GPU's model and driver labels ({label: value}; {} when not known)."""
        return dict(self.sites.get(key, NOWHERE).attrs)

    @property
    def reporting_any_name(self) -> set[tuple]:
        """GPUs reporting now under current or 1.x names (:attr:`reporting` itself, not a copy,
        when no GPU uses 1.x names)."""
        legacy = {k for keys in self.legacy.values() for k in keys}
        return self.reporting | legacy if legacy else self.reporting

    @property
    def reporting(self) -> set[tuple]:
        """GPUs carrying at least one tracked metric now."""
        if self._reporting is not None:
            return self._reporting
        return set().union(*self.now.values()) if self.now else set()


def _status(*answers):
    """The answer standing for several: the first that failed, else the first partial, else the first."""
    answers = [a for a in answers if a is not None]
    return next((a for a in answers if isinstance(a, PromError)), None) or \
        next((a for a in answers if a.partial), None) or answers[0]


def inventory(ctx) -> Inventory:
    """Run :func:`inventory_queries`; then in one round :func:`node_count_query` for metrics fewer
    GPUs carry now than report, :func:`last_seen_query` for metrics with GPUs gone since and
    :func:`seen_query` for optional metrics no GPU carries now; then,
    only for nodes where some reporting GPUs carry such a metric and some do not,
    :func:`_detail_queries`; build the :class:`Inventory`. What crosses the wire: the reporting
    GPUs once, a count per metric, per faulty metric a count per node, and the GPUs that lost a
    metric in the lookback (or lack it on a node where others carry it)."""
    inv = Inventory()
    fold = _Reporting(ctx, inv)
    first = ctx.queries_at_now(inventory_queries(ctx), fold.each)
    for m in ctx.spec.tracked_metrics:  # the counts that also judge the readings (values check)
        if judged(m):
            inv.answers[f"plausible|{m.name}"] = first[f"state|{m.name}"]
    fleet = _status(*(first[k] for k in first if k.startswith("fleet|now|")))
    if isinstance(fleet, PromError):
        fold.clear()
    reporting = inv._reporting = fold.keys
    untargeted = _untargeted(ctx, fold)
    inv.untargeted = untargeted or set()
    if ctx.spec.required_metrics and untargeted != set():
        _read_gone(ctx, first)
    counts, gone = _states(ctx, inv, first)
    label_sets = fold.count()  # label sets reporting now: what the server's counts count
    faulty = {name for name, n in counts.items() if 0 < n < label_sets} if not isinstance(fleet, PromError) else set()
    full = next((m.name for m in ctx.spec.tracked_metrics if label_sets and counts.get(m.name) == label_sets), None)
    need = {f"count|{name}": node_count_query(ctx, name, full) for name in sorted(faulty)}
    # when each gone GPU was last seen, in the same round: a metric whose "now" set is yet to be
    # told asks for the nodes of all its gone GPUs (the answer's extra GPUs are never read); the
    # rest for those not reporting it now
    last = _last_seen_queries(ctx, {name: [g for g in gpus if name in faulty or counts[name] == 0
                                           or g.key not in reporting] for name, gpus in gone.items()})
    need.update(last)
    # an optional metric no GPU carries now: who carried it within the lookback (seen_query)
    need.update({f"seen|{m.name}": seen_query(ctx, m.name) for m in ctx.spec.tracked_metrics
                 if not m.required and counts.get(m.name) == 0})
    second = ctx.queries_at_now(need) if need else {}
    for key in (k for k in need if k.startswith("seen|")):
        name = key.split("|", 1)[1]
        first[f"state|{name}"] = _status(first[f"state|{name}"], second[key])
        if not isinstance(second[key], PromError):
            _gone(ctx, inv, second[key], gone[name])
    lacking, status = _lacking(ctx, fold, faulty, second, short_only=full is not None)
    for m in ctx.spec.tracked_metrics:
        name, state = m.name, first[f"state|{m.name}"]
        diff = status.get(name)
        inv.answers[f"now|{name}"] = _status(fleet, state, diff)
        inv.answers[f"seen|{name}"] = _status(state, first.get(f"gone|{name}", first.get(f"gaps|{name}")))
        if f"gaps|{name}" in first:
            inv.answers[f"gaps|{name}"] = first[f"gaps|{name}"]
        if isinstance(fleet, PromError) or isinstance(state, PromError) or isinstance(diff, PromError):
            continue
        # the reporting set itself, or amended by the few GPUs that differ (keysets.Amended): no
        # copy per metric, so memory follows the fleet once however many metrics are faulty
        if counts[name] == 0:
            now: set[tuple] | Amended = set()
        elif name not in faulty:
            now = reporting  # every reporting GPU carries it
        else:
            now = Amended(reporting, fold.keys_lacking(lacking[name]))
        if now:
            inv.now[name] = now
        seen = _plus(now, reporting, {g.key for g in gone.get(name, ())})
        if seen:
            inv.seen[name] = seen
    _legacy(ctx, inv, first.get("fleet|legacy"))
    _last_seen(ctx, inv, last, second)
    return inv


def _plus(now, reporting: set[tuple], gone: set[tuple]):
    """The GPUs that carried a metric within the lookback: ``now`` (the reporting set, an
    :class:`Amended` one, or a set of its own) and those ``gone`` since, without copying the
    reporting set."""
    if not gone:
        return now
    if now is reporting:
        return Amended(reporting, (), gone)
    return now.plus(gone) if isinstance(now, Amended) else now | gone


class _Reporting:
    """Reads the reporting parts' samples as they are decoded (``each`` of :meth:`Context.run`),
    so no part's answer is ever held decoded: ``keys``, the GPUs reporting now, each with its
    :class:`Site` in ``inv.sites``. A label set the inventory groups by is one (key, Site) pair
    (:meth:`pair`); a GPU reported under several (two targets: an exporter pod replaced) keeps the
    Sites besides its last in ``more``. Label values but UUIDs are interned (one string per node,
    target, model and driver), so memory follows the GPUs' keys and UUIDs, not their label text
    (a tuple of label values per GPU, kept until the inventory was built, was 9 MiB of peak RSS
    at 64,000 GPUs)."""

    def __init__(self, ctx, inv: Inventory):
        self.ctx, self.inv = ctx, inv
        self.keys: set[tuple] = set()
        self.more: dict[tuple, list[Site]] = {}
        self.lock = threading.Lock()
        self.strings: dict[str, str] = {}
        lab = ctx.labels
        self.unique = {lab.gpu, other_spelling(lab.gpu)}
        self.spellings = ((lab.node, other_spelling(lab.node)), (lab.gpu, other_spelling(lab.gpu)))

    def each(self, key: str):
        """The per-sample callable for a reporting part's key; None for the other queries."""
        return self.sample if key.startswith("fleet|now|") else None

    def sample(self, item: dict) -> None:
        with self.lock:
            self.add(item["metric"])

    def pair(self, metric: dict) -> tuple[tuple, Site]:
        """(GPU key, Site) of a result's label set, equal for equal label sets of the inventory's
        ``group by`` (:func:`.inventoryqueries._ids`): the key holds job, node, UUID, index, MIG
        instance and cluster, the Site the target, model, driver, which spelling of the node and
        UUID labels was read and, when a series carries both, the other one's value."""
        lab = self.ctx.labels
        gpu = self.ctx.gpu(metric)
        others = tuple(metric.get(b if chosen == a else a, "") for (a, b), chosen
                       in zip(self.spellings, (gpu.node_label, gpu.uuid_label)))
        attrs = ((lab.model, metric.get(lab.model, "")), (lab.driver_version, metric.get(lab.driver_version, "")))
        return gpu.key, self.inv.site(metric.get("instance", ""), attrs, gpu.node_label, gpu.uuid_label,
                                      others if any(others) else ())

    def add(self, metric: dict) -> None:
        intern = self.strings.setdefault
        for k, v in metric.items():  # in place: the decoded sample is not kept
            if k not in self.unique:  # a UUID is one string per GPU anyway
                metric[k] = intern(v, v)
        key, site = self.pair(metric)
        if key in self.keys and self.inv.sites[key] != site:
            self.more.setdefault(key, []).append(self.inv.sites[key])
        self.keys.add(key)
        self.inv.sites[key] = site

    def clear(self) -> None:
        """Forget the reporting GPUs (the reporting query failed: a part is not the fleet)."""
        self.keys, self.more = set(), {}

    def keys_lacking(self, pairs: set[tuple]) -> set[tuple]:
        """The GPU keys all of whose reporting label sets are in ``pairs`` (a GPU reported under
        two targets carries a metric when one of them does)."""
        keys = {key for key, _ in pairs}
        for key in keys & self.more.keys():
            if any((key, site) not in pairs for site in [self.inv.sites[key], *self.more[key]]):
                keys.discard(key)
        return keys

    def label_sets(self):
        """Every reporting label set as a (key, Site) pair."""
        for key in self.keys:
            yield key, self.inv.sites[key]
        for key, sites in self.more.items():
            for site in sites:
                yield key, site

    def count(self) -> int:
        """How many label sets report now (a GPU under two targets counts twice, as on the server)."""
        return len(self.keys) + sum(len(sites) for sites in self.more.values())


def _states(ctx, inv: Inventory, first: dict) -> tuple[dict[str, int], dict[str, list]]:
    """From the ``state|M`` answers, ({metric: GPU label sets carrying it now}, {metric: Gpu of
    each label set seen in the lookback, not now}), the latter of a required metric from its
    ``gone|M`` answer where it was asked (:func:`_read_gone`), else its ``gaps|M`` one (negative
    values); a metric whose count failed is in neither, one whose gone GPUs failed not in the latter."""
    counts: dict[str, int] = {}
    gone: dict[str, list] = {}
    for m in ctx.spec.tracked_metrics:
        ans = first[f"state|{m.name}"]
        if isinstance(ans, PromError):
            continue
        # one "now" sample, or count_values rows of plausible and implausible GPUs (state_query)
        counts[m.name] = sum(int(float(i["value"][1])) for i in ans.data if i["metric"].get(STATE, "now") == "now")
        lost = first.get(f"gone|{m.name}", first.get(f"gaps|{m.name}"))
        if not isinstance(lost, PromError):
            gone[m.name] = []
            if lost is not None:
                _gone(ctx, inv, lost, gone[m.name])
    return counts, gone


def _gone(ctx, inv: Inventory, ans: Answer, out: list) -> None:
    """The gone label sets of ``ans`` (``gpumon_state="gone"``, or a negative value of a
    :func:`.inventoryqueries.gaps_query` answer) as Gpus appended to ``out``, and in the
    inventory's GPUs and targets."""
    for item in ans.data:
        if item["metric"].get(STATE) == "gone" or (STATE not in item["metric"] and float(item["value"][1]) < 0):
            labels = {k: v for k, v in item["metric"].items() if k != STATE}
            gpu = ctx.gpu(labels)
            out.append(gpu)
            inv.sites.setdefault(gpu.key, inv.site(labels.get("instance", ""), (), gpu.node_label, gpu.uuid_label))


def _untargeted(ctx, fold: "_Reporting") -> set[str] | None:
    """The ``instance`` values of reporting GPUs that name no target of the job (metric
    relabelling rewrote them), or None where the server has no targets API to tell (Mimir,
    Cortex). The ``gaps|M`` answers list a GPU only when its target matches an ``up`` series: the
    gone GPUs need a read of their own unless this is empty."""
    api = ctx.targets.api
    if isinstance(api, PromError) or not ctx.targets.targets:
        return None
    known = {t.instance for t in ctx.targets.targets}
    return {site.instance for _, site in fold.label_sets() if site.instance not in known}


def _read_gone(ctx, first: dict) -> None:
    """The gone GPUs of each required metric by a read of their own (:func:`gone_query`, one
    round), into ``first`` as ``gone|M`` answers labelled ``gpumon_state="gone"``."""
    recent, window = _windows(ctx)
    asked = ctx.queries_at_now({f"gone|{m.name}": f'label_replace({gone_query(ctx, m.name, window, recent)}, '
                                                  f'"{STATE}", "gone", "", "")' for m in ctx.spec.required_metrics})
    first.update(asked)


def _lacking(ctx, fold: _Reporting, faulty: set[str], second: dict,
             short_only: bool = False) -> tuple[dict[str, set], dict]:
    """The reporting label sets ((key, Site) pairs, :meth:`_Reporting.pair`) lacking each faulty
    metric now, from its per-node counts (a node reporting more GPUs than carry the metric there
    lacks it on some; on a node that does not carry it at all, on every one) and, for nodes where
    only some GPUs lack it, from a third round of :func:`_detail_queries`. ``short_only``: the
    counts list only the nodes where the metric is short (:func:`node_count_query` with ``full``),
    a node not listed carries it on every GPU. Only the short nodes' label sets are listed.
    Returns ({metric: label sets}, {metric: the answer standing for its counts and details})."""
    if not faulty:
        return {}, {}
    sizes = Counter(site.instance for _, site in fold.label_sets())
    empty: dict[str, set[str]] = {}
    partial: dict[str, set[str]] = {}
    status: dict = {}
    for name in faulty:
        ans = status[name] = second[f"count|{name}"]
        if isinstance(ans, PromError):
            continue
        carried = {i["metric"].get("instance", ""): int(float(i["value"][1])) for i in ans.data}
        nodes = [n for n in carried if n in sizes] if short_only else sizes
        short = [node for node in nodes if carried.get(node, 0) < sizes[node]]
        empty[name] = {node for node in short if not carried.get(node)}
        partial[name] = {node for node in short if carried.get(node)}
    wanted = set().union(*empty.values(), *partial.values())
    by_node: dict[str, list[tuple]] = defaultdict(list)
    for key, site in fold.label_sets():
        if site.instance in wanted:
            by_node[site.instance].append((key, site))
    lacking = {name: {p for node in nodes for p in by_node[node]} for name, nodes in empty.items()}
    detail = _detail_queries(ctx, {k: v for k, v in partial.items() if v})
    third = ctx.queries_at_now(detail) if detail else {}
    for key, metrics in detail.metrics.items():
        ans = third[key]
        has: dict[str, set] = defaultdict(set)
        if not isinstance(ans, PromError):
            for item in ans.data:
                has[item["metric"].get(LEGACY_FIELD, "")].add(fold.pair(item["metric"]))
        for name in metrics:
            status[name] = _status(status[name], ans)
            lacking[name] |= {p for node in partial[name] for p in by_node[node] if p not in has[name]}
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
            # a GPU of a node on 1.x names is in the fleet (the inventory's count, the coverage rows)
            attrs = tuple((k, labels.get(k, "")) for k in (ctx.labels.model, ctx.labels.driver_version))
            inv.sites.setdefault(gpu.key, inv.site(labels.get("instance", ""), attrs, gpu.node_label, gpu.uuid_label))


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
