"""The inventory's queries without a server (issue 16): the reporting union's parts partition
every GPU label value, and the per-node detail requests stay below proxies' URL limits. Against a
real Prometheus: tests/test_validate_e2e.py (the parts' union equals the single query's answer,
requests do not grow with the fleet)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpumon.promapi import PromClient
from gpumon.promqltext import matcher
from gpumon.spec import load_spec
from gpumon.validate import facts
from gpumon.validate.base import Context

ROOT = Path(__file__).resolve().parent.parent


def context(concurrency: int) -> Context:
    return Context(load_spec(ROOT / "gpumon.yaml"), PromClient("http://127.0.0.1:9"), concurrency=concurrency,
                   progress=False)


def matches(matcher: str, value: str) -> bool:
    """Prometheus' (fully anchored) ``=~`` / ``!~`` on one label value."""
    op, pattern = re.fullmatch(r'\w+(=~|!~)"(.*)"', matcher).groups()
    hit = re.fullmatch(pattern, value) is not None
    return hit if op == "=~" else not hit


VALUES = ["", "x", "0x1", "12a", "GPU-0d1f6a5e-0b8e-4c07-8f67-1b2f3c4d5e6f"] + [str(i) for i in range(40)]


@pytest.mark.parametrize("concurrency", [1, 2, 3, 4, 8, 16, 40])
def test_parts_partition_every_value(concurrency):
    ctx = context(concurrency)
    try:
        parts = facts._shard_matchers(ctx)
        assert len(parts) == max(1, min(concurrency, 10))
        assert all(p.startswith('gpu=~"') or p.startswith('gpu!~"') for p in parts if p)
        for value in VALUES:
            hits = [p for p in parts if p == "" or matches(p, value)]
            assert len(hits) == 1, (value, hits)
    finally:
        ctx.close()


def test_parts_spread_a_nodes_gpus_evenly():
    """The parts split by the GPU index, not the UUID: a regex matcher costs the server one match
    per value of its label and one postings list per matching value (a fleet has as many UUIDs as
    GPUs, a few indexes). GPUs 0-7 of a node go two to each of 4 parts."""
    ctx = context(4)
    try:
        parts = facts._shard_matchers(ctx)
        per_part = [sum(matches(p, str(g)) for g in range(8)) for p in parts]
        assert per_part == [2, 2, 2, 2]
        assert all(f"last_over_time(DCGM_FI_DEV_GPU_TEMP{{job=\"dcgm-exporter\",{p}}}" in q and "UUID=~" not in q
                   for p, q in zip(parts, (facts.inventory_queries(ctx)[f"fleet|now|{i}"] for i in range(4))))
    finally:
        ctx.close()


def test_gone_read_on_its_own_is_one_grouping_of_the_series_difference():
    """A metric's "gone" GPUs, where they get a read of their own: the lookback's series unless
    (on the identity) the recent ones, grouped once, not both sides grouped: the grouping of every
    GPU's series is the costly part."""
    ctx = context(4)
    try:
        ctx.__dict__["targets"] = type("T", (), {"scrape_interval": 15.0})()
        gone = facts.gone_query(ctx, "DCGM_FI_DEV_GPU_TEMP", "1h", "45s")
        assert gone.count("group by") == 1 and gone.count("last_over_time") == 2
        assert "[1h]) unless on (" in gone and "[45s]))" in gone
    finally:
        ctx.close()


def test_detail_requests_stay_short():
    """A metric lacking on some GPUs of 2,000 nodes: the detail round asks in several requests,
    each below the 8 KB request lines of common proxies once URL-encoded."""
    ctx = context(4)
    try:
        nodes = {f"node-{n:05d}.cluster.example:9400" for n in range(2000)}
        out = facts._detail_queries(ctx, {"DCGM_FI_DEV_FB_USED": nodes, "DCGM_FI_DEV_GPU_TEMP": {"node-00003:9400"}})
        assert len(out) > 1 and set(out) == set(out.metrics)
        assert all(len(expr) < 2 * facts.DETAIL_CHARS for expr in out.values())
        text = "".join(out.values())
        assert all(text.count(matcher("x", re.escape(n))[3:-1]) == 1 for n in nodes)  # every node once
        assert sum(m.count("DCGM_FI_DEV_GPU_TEMP") for m in out.metrics.values()) == 1
    finally:
        ctx.close()


def test_values_are_shown_as_the_server_wrote_them_with_the_dcgm_code_named():
    from gpumon.validate.values import shown_value
    assert shown_value("9223372036854775808") == "9223372036854775808 (DCGM_INT64_BLANK..NO_PERMISSION, 2^63 as a float)"
    assert shown_value("9.223372036854776e+18").startswith("9.223372036854776e+18 (DCGM_INT64_BLANK")
    assert shown_value("140737488355330") == "140737488355330 (DCGM_FP64_NOT_SUPPORTED)"
    assert shown_value("2147483632") == "2147483632 (DCGM_INT32_BLANK)"
    assert shown_value("183.5") == "183.5" and shown_value("NaN") == "NaN" and shown_value("1e+21") == "1e+21"


def test_values_reason_is_the_per_reason_filters():
    """The values check's second read asks ``M unless (M >= lo <= hi < blank)`` and tells the reason from the
    value: the same verdict as the per-reason filters it replaces (``>= blank``, ``!= itself``,
    ``> hi < blank``, ``< lo``), for every kind of reading."""
    from gpumon.spec import DCGM_BLANK_MIN
    from gpumon.validate.values import reason

    spec = load_spec(ROOT / "gpumon.yaml")
    for m in spec.metrics:
        lo, hi = m.range_min, m.range_max
        for v in (float("nan"), float("inf"), float("-inf"), DCGM_BLANK_MIN, DCGM_BLANK_MIN + 2, -1.0, 0.0, 50.0,
                  1e6, (lo if lo is not None else 0) - 1, (hi if hi is not None else 0) + 1, lo or 0.0, hi or 0.0):
            old = "dcgm_blank" if v >= DCGM_BLANK_MIN else "nan" if v != v else \
                "above_range" if hi is not None and hi < v < DCGM_BLANK_MIN else \
                "below_range" if lo is not None and v < lo else None
            kept = v == v and (lo is None or v >= lo) and (hi is None or v <= hi) and v < DCGM_BLANK_MIN
            assert reason(m, v) == old, (m.name, v)
            assert (old is None) == kept, (m.name, v)  # the query returns exactly the bad readings


def test_values_filter_reads_the_recent_window_only():
    """A metric's readings are read once for its count and its judgement (the inventory's
    ``state|M``), from its last 3 scrapes, never the instant vector: an instant selector reads the
    server's whole lookback delta (across blocks after a restart or a backfill), 3 scrapes only
    the head. The values check asks a counted metric nothing of its own (the frozen counter's
    part aside, told by its own label); one the count cannot judge, its bad readings."""
    from gpumon.validate.inventoryqueries import state_query
    from gpumon.validate.values import FROZEN, queries

    ctx = context(4)
    try:
        ctx.__dict__["targets"] = type("T", (), {"scrape_interval": 15.0})()
        m = next(m for m in ctx.spec.metrics if m.name == "DCGM_FI_DEV_GPU_TEMP")
        recent = 'last_over_time(DCGM_FI_DEV_GPU_TEMP{job="dcgm-exporter"}[45s])'
        assert state_query(ctx, m).endswith(f"(abs({recent} - 57.5) <= bool 52.5))")
        asked = queries(ctx)
        assert m.name not in asked
        energy = next(m for m in ctx.spec.metrics if m.frozen_check)
        assert f'"{FROZEN}", "frozen"' in asked[energy.name] and FROZEN.startswith("gpumon_")
        assert asked[energy.name].count(f"{energy.name}{{") == 1  # the increase only: counted
        low_only = next(m for m in ctx.spec.metrics if m.range_min is not None and m.range_max is None)
        assert asked[low_only.name].count(f"{low_only.name}{{") == 2 and "[45s]" in asked[low_only.name]
    finally:
        ctx.close()


def test_optional_metrics_read_the_lookback_only_when_absent():
    """The lookback read (every sample of every GPU's series) is the inventory's costliest part:
    a required metric's lookback is read once (``gaps|M``: its gone GPUs and its gaps), an
    optional metric's state asks only for the count now; an optional metric no GPU carries now is
    asked for who carried it, in the second round."""
    ctx = context(4)
    try:
        ctx.__dict__["targets"] = type("T", (), {"scrape_interval": 15.0})()
        queries = facts.inventory_queries(ctx)
        for m in ctx.spec.tracked_metrics:
            assert "[1h]" not in queries[f"state|{m.name}"] and "[45s]" in queries[f"state|{m.name}"]
            assert (f"gaps|{m.name}" in queries) == m.required, m.name
        reads = [q.count(f"{m.name}{{job=\"dcgm-exporter\"}}[1h]") for m in ctx.spec.required_metrics
                 for k, q in queries.items() if k.endswith(f"|{m.name}")]
        assert sorted(reads)[-1] == 1 and sum(reads) == len(ctx.spec.required_metrics)
        seen = facts.seen_query(ctx, "DCGM_FI_DEV_ENC_UTIL")
        assert 'last_over_time(DCGM_FI_DEV_ENC_UTIL{job="dcgm-exporter"}[1h])' in seen and '"gone"' in seen
    finally:
        ctx.close()


def test_prefetched_queries_are_sent_once_and_taken_over():
    """Queries started ahead (the values, continuity, counters, duplicates and metadata checks')
    are answered from the prefetched request: each call reaches the server once, the count of
    queries includes it once, and a streaming ``each`` still gets the samples of both the
    prefetched answer and the one it streamed itself, and neither keeps them."""
    from gpumon.promapi import Answer

    sent = []

    class Client:
        def query(self, expr, at, each=None):
            sent.append(expr)
            samples = [{"metric": {}, "value": [at, expr]}]
            if each:
                for item in samples:
                    each(item)
                return Answer([], [], [])
            return Answer(samples, [], [])

    ctx = Context(load_spec(ROOT / "gpumon.yaml"), Client(), concurrency=2, progress=False)
    try:
        ctx.prefetch([("query", "a", ctx.now), ("query", "b", ctx.now), ("query", "a", ctx.now)])
        seen = []
        got = ctx.queries_at_now({"x": "a", "y": "c", "w": "d"},
                                 each=lambda key: None if key == "w" else (lambda item: seen.append((key, item["value"][1]))))
        assert sorted(seen) == [("x", "a"), ("y", "c")]
        assert got["x"].data == got["y"].data == [] and got["w"].data[0]["value"][1] == "d"
        assert ctx.queries_at_now({"z": "b"})["z"].data[0]["value"][1] == "b"
        assert sorted(sent) == ["a", "b", "c", "d"] and ctx.queries == 4
    finally:
        ctx.close()


def test_the_nodes_a_target_served_come_from_one_pass_over_the_gpus():
    """A mass outage names the node of every down target: the GPUs are read once for all of them
    (one pass per target was GPUs x targets: 64,000 x 4,000 at half a fleet down)."""
    from gpumon.validate.gpus import Site
    from gpumon.validate.inventoryfacts import Inventory

    class Counting(dict):
        passes = 0

        def items(self):
            Counting.passes += 1
            return super().items()

    inv = Inventory()
    inv.sites = Counting({("dcgm-exporter", f"node-{n}", f"GPU-{n}-{g}", str(g), "", ""):
                          Site(f"10.0.{n}.1:9400", (), "Hostname", "UUID") for n in range(300) for g in range(8)})
    assert [inv.nodes_of(f"10.0.{n}.1:9400") for n in (0, 299)] == [{"node-0"}, {"node-299"}]
    assert all(inv.nodes_of(f"10.0.{n}.1:9400") == {f"node-{n}"} for n in range(300))
    assert inv.nodes_of("10.9.9.9:9400") == set() and Counting.passes == 1


@pytest.mark.parametrize("scrapes, said", [(4, "the 1m of history the server holds for the job"),
                                           (239, "the last 1h"), (None, "the last 1h")])
def test_never_seen_names_the_history_the_server_holds(scrapes, said):
    """A Prometheus started 60 s ago has not seen an hour: "never seen in the last 1h" would claim
    it has. The history is the most scrapes any target of the job has within the lookback (one
    query, asked only when a message needs it); a failed or empty answer keeps the lookback."""
    from gpumon.promapi import Answer

    asked = []

    class Client:
        def query(self, expr, at, each=None):
            asked.append(expr)
            return Answer([] if scrapes is None else [{"metric": {}, "value": [at, str(scrapes)]}], [], [])

    ctx = Context(load_spec(ROOT / "gpumon.yaml"), Client(), lookback=3600.0, progress=False)
    try:
        ctx.__dict__["targets"] = type("T", (), {"scrape_interval": 15.0})()
        assert ctx.window_text() == said and ctx.window_text() == said
        assert asked == ['max(count_over_time(up{job="dcgm-exporter"}[1h]))']
    finally:
        ctx.close()


def test_inventory_counts_read_as_english():
    """``1 GPU on 1 node``, not ``1 GPUs on 1 nodes``."""
    from gpumon.validate.inventory import _many
    assert [_many(1, "node"), _many(2, "node"), _many(0, "GPU")] == ["1 node", "2 nodes", "0 GPUs"]
