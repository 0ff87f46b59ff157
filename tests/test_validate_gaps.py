"""The inventory's one lookback read per required metric (``gaps|M``,
:func:`gpumon.validate.inventoryqueries.gaps_query`), on each Prometheus build's own engine
(``promtool test rules``, virtual time): it lists the GPUs that carried the metric within the
lookback and not now (negative) and those that missed it in successful scrapes (their share),
and nothing else, for the shapes dcgm-exporter's series take on Kubernetes: one pod, a pod
replaced by the next, a GPU shared by two pods (time-slicing: two series at once), a NaN reading,
a target that went down. Against a live server: tests/test_validate_e2e.py."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

from gpumon.promapi import Answer, PromClient, PromError
from gpumon.spec import load_spec
from gpumon.validate.base import Context
from gpumon.validate.inventoryfacts import _untargeted
from gpumon.validate.inventoryqueries import NOW_OFFSET, gaps_query

ROOT = Path(__file__).resolve().parent.parent
JOB = 'job="dcgm-exporter"'
M = "DCGM_FI_DEV_GPU_TEMP"
#: 15 s scrapes; evaluated at 607 s over a 600 s lookback: no sample on a window's edge, so 2.x
#: (closed windows) and 3.x (left-open) count the same 40 scrapes (15 s .. 600 s)
SCRAPES, AT = 40, "607s"


def _context(lookback: float = 600.0) -> Context:
    ctx = Context(load_spec(ROOT / "gpumon.yaml"), PromClient("http://127.0.0.1:9"), lookback=lookback,
                  progress=False)
    ctx.__dict__["targets"] = type("T", (), {"scrape_interval": 15.0})()
    return ctx


def _gpu(node: str, uuid: str, values: str, **more: str) -> dict:
    extra = "".join(f',{k}="{v}"' for k, v in sorted(more.items()))
    return {"series": f'{M}{{{JOB},instance="{node}:9400",Hostname="{node}",UUID="{uuid}",gpu="0"{extra}}}',
            "values": values}


def _up(node: str, values: str = "1x40") -> dict:
    return {"series": f'up{{{JOB},instance="{node}:9400"}}', "values": values}


def _labels(node: str, uuid: str) -> str:
    return f'{{Hostname="{node}",UUID="{uuid}",gpu="0",instance="{node}:9400",{JOB}}}'


def test_one_read_lists_the_gone_and_the_intermittent_gpus_and_nothing_else(tmp_path, promtool):
    ctx = _context()
    try:
        expr = gaps_query(ctx, M)
    finally:
        ctx.close()
    assert expr.count(f"{M}{{") == 2 and expr.count("[10m]") == 2  # the metric's lookback once, up's once
    half = " ".join(["50", "_"] * 20) + " 50"  # every other scrape carried it
    series = [
        _gpu("steady", "GPU-steady", "50x40"), _up("steady"),
        _gpu("gone", "GPU-gone", "50x20"), _up("gone"),  # fell off the bus at 300 s, the exporter still up
        _gpu("gappy", "GPU-gappy", half), _up("gappy"),
        # a pod replaced by the next at 300 s: the GPU's series changes its pod label, never gone
        _gpu("churn", "GPU-churn", "50x20", pod="a"), _gpu("churn", "GPU-churn", "_x20 50x20", pod="b"), _up("churn"),
        # shared by two pods (two series at once), both gone at 300 s
        _gpu("shared", "GPU-shared", "50x20", pod="a"), _gpu("shared", "GPU-shared", "50x20", pod="b"), _up("shared"),
        # shared by two pods, both there now
        _gpu("both", "GPU-both", "50x40", pod="a"), _gpu("both", "GPU-both", "50x40", pod="b"), _up("both"),
        # its latest readings are NaN: still carried now
        _gpu("nan", "GPU-nan", "50x36 NaN NaN NaN NaN"), _up("nan"),
        # the target went down at 480 s: its GPU is gone now, its scrapes until then complete
        _gpu("down", "GPU-down", "50x32"), _up("down", "1x32 0x8"),
    ]
    expected = [
        {"labels": _labels("gone", "GPU-gone"), "value": (20 - NOW_OFFSET) / SCRAPES},
        {"labels": _labels("gappy", "GPU-gappy"), "value": 20 / SCRAPES},
        {"labels": _labels("shared", "GPU-shared"), "value": (40 - NOW_OFFSET) / SCRAPES},
        {"labels": _labels("down", "GPU-down"), "value": (32 - NOW_OFFSET) / 32},
    ]
    _promtool_expect(tmp_path, promtool, expr, series, expected)


class _Targets:
    def __init__(self, api, instances):
        self.api = api
        self.targets = tuple(type("Target", (), {"instance": i})() for i in instances)
        self.scrape_interval = 15.0


class _Fold:
    def __init__(self, instances):
        self.instances = instances

    def label_sets(self):
        for i in self.instances:
            yield ("key", type("Site", (), {"instance": i})())


def test_gone_gpus_get_their_own_read_where_the_join_with_up_may_drop_them():
    """A GPU is in the ``gaps|M`` answer only when its target matches an ``up`` series: where a
    reporting GPU's ``instance`` is no target of the job (rewritten by metric relabelling), or the
    server has no targets API to tell, the gone GPUs are read on their own."""
    ctx = _context()
    try:
        ctx.__dict__["targets"] = _Targets(object(), ["a:9400", "b:9400"])
        assert _untargeted(ctx, _Fold(["a:9400", "b:9400", "a:9400"])) == set()  # no read of their own
        assert _untargeted(ctx, _Fold(["a:9400", "node-b"])) == {"node-b"}  # continuity cannot divide these
        ctx.__dict__["targets"] = _Targets(PromError("not-found", "http://127.0.0.1:9/api/v1/targets", "404 page not found", 404), [])
        assert _untargeted(ctx, _Fold(["a:9400"])) is None  # cannot tell: read them on their own
    finally:
        ctx.close()


def _promtool_expect(tmp_path, promtool, expr: str, series: list[dict], expected: list[dict]) -> None:
    test = {"rule_files": [], "evaluation_interval": "15s", "tests": [{
        "interval": "15s", "input_series": series,
        "promql_expr_test": [{"expr": expr, "eval_time": AT, "exp_samples": expected}]}]}
    (tmp_path / "gaps.test.yaml").write_text(yaml.safe_dump(test, sort_keys=False))
    proc = subprocess.run([promtool, "test", "rules", "gaps.test.yaml"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def test_a_driver_upgraded_under_a_running_target_is_no_gap(tmp_path, promtool):
    """A driver upgraded at 300 s on a node scraped at one address all along (a static target, a
    host-network exporter restarted): every series changes its ``DCGM_FI_DRIVER_VERSION`` label.
    The GPU's samples under both values are one GPU's: nothing to report, neither the new label
    set at 50 % of the target's scrapes (an intermittent GPU that never missed a scrape) nor the
    old one gone. An exporter pod replaced by one at another address keeps its GPU: the old
    address's label set is gone (negative), the new one has every scrape of its own target."""
    ctx = _context()
    try:
        expr = gaps_query(ctx, M)
    finally:
        ctx.close()
    moved = f'{M}{{{JOB},Hostname="moved",UUID="GPU-moved",gpu="0",instance="%s"}}'
    series = [
        _gpu("upgraded", "GPU-upgraded", "50x20", DCGM_FI_DRIVER_VERSION="550.54.15"),
        _gpu("upgraded", "GPU-upgraded", "_x20 50x20", DCGM_FI_DRIVER_VERSION="570.86.10"),
        _up("upgraded"),
        {"series": moved % "10.0.0.1:9400", "values": "50x20"},
        {"series": f'up{{{JOB},instance="10.0.0.1:9400"}}', "values": "1x20"},
        {"series": moved % "10.0.0.2:9400", "values": "_x20 50x20"},
        {"series": f'up{{{JOB},instance="10.0.0.2:9400"}}', "values": "_x20 1x20"},
    ]
    gone = f'{{Hostname="moved",UUID="GPU-moved",gpu="0",instance="10.0.0.1:9400",{JOB}}}'
    _promtool_expect(tmp_path, promtool, expr, series, [{"labels": gone, "value": (20 - NOW_OFFSET) / 20}])


def test_a_label_set_gone_under_a_gpu_that_reports_now_is_no_gap():
    """The ``gaps|M`` answer lists a label set gone since with a negative value; when its GPU
    reports the metric now under another label set (the exporter pod replaced: a new instance),
    the continuity check says nothing (it read the negative value as a share of
    -17,179,869,084 %)."""
    from gpumon.validate import continuity
    from gpumon.validate.inventoryfacts import Inventory

    ctx = _context()
    try:
        ctx.__dict__["targets"] = type("T", (), {"scrape_interval": 15.0, "missing": False, "down": frozenset()})()
        inv = Inventory()
        old = {"job": "dcgm-exporter", "instance": "10.0.0.1:9400", "Hostname": "n", "UUID": "GPU-1", "gpu": "0"}
        inv.now[M] = {ctx.gpu(old).key}
        gone = (20 - NOW_OFFSET) / 20
        for m in ctx.spec.required_metrics:
            data = [{"metric": old, "value": [600, str(gone)]}] if m.name == M else []
            inv.answers[f"gaps|{m.name}"] = Answer(data)
        ctx.__dict__["inventory"] = inv
        assert continuity.run(ctx).findings == []
    finally:
        ctx.close()


def test_gpus_whose_instance_names_no_target_make_continuity_inconclusive():
    """``instance`` rewritten by metric relabelling (to the node name): no ``up`` series has it,
    so the gaps read has no share for those GPUs and cannot list them. The check says it could
    not look (it said nothing, as if they never missed a scrape)."""
    from gpumon.validate import continuity
    from gpumon.validate.inventoryfacts import Inventory

    ctx = _context()
    try:
        ctx.__dict__["targets"] = type("T", (), {"scrape_interval": 15.0, "missing": False, "down": frozenset()})()
        inv = Inventory()
        ok = {"job": "dcgm-exporter", "instance": "10.0.0.1:9400", "Hostname": "a", "UUID": "GPU-a", "gpu": "0"}
        moved = {"job": "dcgm-exporter", "instance": "node-b", "Hostname": "node-b", "UUID": "GPU-b", "gpu": "0"}
        for labels in (ok, moved):
            inv.sites[ctx.gpu(labels).key] = inv.site(labels["instance"], (), "Hostname", "UUID")
        inv._reporting = {ctx.gpu(ok).key, ctx.gpu(moved).key}
        inv.untargeted = {"node-b"}
        for m in ctx.spec.required_metrics:
            inv.answers[f"gaps|{m.name}"] = Answer([])
        ctx.__dict__["inventory"] = inv
        result = continuity.run(ctx)
        assert [(f.check, f.severity, f.case) for f in result.findings] == [
            ("continuity", "inconclusive", "continuity/targets")]
        assert "1 GPU(s)" in result.findings[0].message and "(node-b)" in result.findings[0].message
        assert "continuity/targets" in result.cases
    finally:
        ctx.close()


def test_a_gap_shows_through_two_prometheus_replicas_not_deduplicated(tmp_path, promtool):
    """Two Prometheus replicas writing to one store that keeps both (VictoriaMetrics, Thanos
    without a replica label): every series twice, ``up`` too. A GPU that missed every other
    scrape is at 50 % of its target's scrapes, as with one replica (the read added 2^32 per series
    carried now and took it off once, so a GPU with two series now was never below the threshold)."""
    ctx = _context()
    try:
        expr = gaps_query(ctx, M)
    finally:
        ctx.close()
    half = " ".join(["50", "_"] * 20) + " 50"
    series = [s for r in ("a", "b") for s in (
        _gpu("gappy", "GPU-gappy", half, prometheus_replica=r),
        {"series": f'up{{{JOB},instance="gappy:9400",prometheus_replica="{r}"}}', "values": "1x40"},
        _gpu("steady", "GPU-steady", "50x40", prometheus_replica=r),
        {"series": f'up{{{JOB},instance="steady:9400",prometheus_replica="{r}"}}', "values": "1x40"})]
    _promtool_expect(tmp_path, promtool, expr, series, [{"labels": _labels("gappy", "GPU-gappy"), "value": 0.5}])
