"""gpumon validate against a REAL Prometheus (Debian's 2.42) scraping the simulator.

One Prometheus, two jobs: ``dcgm-healthy`` (a clean fleet) and ``dcgm-exporter`` (one node per
fault class). The rendered rules of the test spec are loaded. Module-scoped: ~20 s of setup
shared by every test.
"""

from __future__ import annotations

import json
import shutil
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpumon import render
from gpumon.cli import cli
from gpumon.rules import names
from gpumon.localprom import LocalPrometheus
from gpumon.promapi import PromClient
from gpumon.simfaults import Fault
from gpumon.simpages import gpu_uuid
from gpumon.simserve import Simulator
from gpumon.simulate import Fleet
from gpumon.spec import parse_spec
from gpumon.validate import CHECKS, reachability, validate

pytestmark = pytest.mark.skipif(not shutil.which("prometheus"), reason="prometheus not installed "
                                "(apt-get install --no-install-recommends prometheus)")

DATA = Path(__file__).parent / "data"
SPEC_TEXT = (DATA / "validate-spec.yaml").read_text()
FAULTY = [
    Fault("drop", metric="DCGM_FI_DEV_SM_CLOCK", node="gpu-node-1", gpu=1),
    Fault("frozen", metric="DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", node="gpu-node-1", gpu=0),
    Fault("drop", metric="DCGM_FI_DEV_FB_USED", node="gpu-node-2"),
    Fault("driver-version", node="gpu-node-2", value="535.54.03"),
    Fault("http500", node="gpu-node-3"),
    Fault("intermittent", metric="DCGM_FI_DEV_POWER_USAGE", node="gpu-node-4", gpu=0, every=2),
    Fault("nan", metric="DCGM_FI_DEV_POWER_USAGE", node="gpu-node-5", gpu=0),
    Fault("zero", metric="DCGM_FI_DEV_GPU_TEMP", node="gpu-node-5", gpu=1),
    Fault("sentinel", metric="DCGM_FI_DEV_MEMORY_TEMP", node="gpu-node-5", gpu=0),
    Fault("hostname-rename", node="gpu-node-6"),
    Fault("legacy-names", node="gpu-node-7"),
    Fault("empty", node="gpu-node-8"),
    Fault("slow", node="gpu-node-9", seconds=2.5),
    Fault("mig", node="gpu-node-10", gpu=1),
    Fault("drop", metric="DCGM_FI_DEV_MEM_COPY_UTIL"),  # gone everywhere (NVIDIA/dcgm-exporter#571)
    Fault("http500", node="gpu-node-12", every=2),       # flapping (NVIDIA/dcgm-exporter#607)
    Fault("counter-reset", metric="DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", node="gpu-node-4", gpu=1, every=2),  # NVIDIA/dcgm-exporter#417
]
#: written to the fault file once Prometheus has history: a GPU disappears, a field disappears
LATER = ("faults:\n  - {kind: drop, node: gpu-node-11, gpu: 1}\n  - {kind: drop, metric: DCGM_FI_DEV_SM_CLOCK, node: gpu-node-11, gpu: 0}\n"
         "  - {kind: no-profiling}\n")  # every DCGM_FI_PROF_* gone (dcgm-exporter#571)


def spec_for(job: str, name: str = "gpumon", edit=None):
    text = SPEC_TEXT.replace("job: dcgm-exporter", f"job: {job}").replace("name: gpumon", f"name: {name}", 1)
    return parse_spec(edit(text) if edit else text, f"<{job}>")


@pytest.fixture(scope="module")
def env(tmp_path_factory, engine):
    tmp = tmp_path_factory.mktemp("validate")
    rules = tmp / "gpumon.rules.yaml"
    rules.write_text(render.render(spec_for("dcgm-exporter"))["rules/gpumon.rules.yaml"])
    fault_file = tmp / "faults.yaml"
    healthy, faulty = Fleet(2, 2, uuid_salt="healthy/"), Fleet(12, 2, FAULTY, fault_file=fault_file)
    big = Fleet(6, 8, uuid_salt="big/")  # 48 healthy GPUs: requests must not grow with the fleet
    with Simulator(healthy) as hs, Simulator(faulty) as fs, Simulator(big) as bs:
        # dcgm-dup scrapes gpu-node-2 a second time: a second exporter / scrape config for one node
        targets = {"dcgm-healthy": list(hs.targets.values()), "dcgm-exporter": list(fs.targets.values()),
                   "dcgm-dup": [fs.targets["gpu-node-2"]], "dcgm-big": list(bs.targets.values())}
        with LocalPrometheus(targets, rule_files=[rules], scrape_interval="1s", scrape_timeout="1s",
                             binary=engine.prometheus) as prom:
            ok = prom.wait_for(lambda: len(prom.query('count_over_time(up{job="dcgm-exporter"}[1m]) >= 5')) == 12
                               and len(prom.query('count_over_time(up{job="dcgm-healthy"}[1m]) >= 5')) == 2
                               and len(prom.query('count_over_time(up{job="dcgm-big"}[1m]) >= 5')) == 6, 90)
            assert ok, prom.logs()
            fault_file.write_text(LATER)
            # validate counts a sample within 3 scrape intervals as "present now": wait past that
            gone = ('last_over_time(DCGM_FI_DEV_GPU_TEMP{Hostname="gpu-node-11",gpu="1"}[4s]) or '
                    'last_over_time(DCGM_FI_DEV_SM_CLOCK{Hostname="gpu-node-11",gpu="0"}[4s]) or '
                    'last_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE{job="dcgm-exporter"}[4s])')
            assert prom.wait_for(lambda: not prom.query(gone), 30), prom.logs()
            yield {"prom": prom, "targets": fs.targets, "rules": rules}


def run(env, spec, **kw):
    with PromClient(env["prom"].url) as client:
        return validate(spec, client, lookback=kw.pop("lookback", 60.0), progress=False, **kw)


def by_check(report, check):
    return [f for f in report.findings if f.check == check]


@pytest.fixture(scope="module")
def faulty(env):
    return run(env, spec_for("dcgm-exporter"))


def test_healthy_fleet_passes(env):
    started = time.monotonic()
    report, code = run(env, spec_for("dcgm-healthy"))
    assert code == 0, [f for f in report.findings]
    assert {f.severity for f in report.findings} <= {"info"}
    assert any(c.startswith("rules-loaded/gpumon.") for c in report.checks)
    assert time.monotonic() - started < 15
    # queries do not grow with GPUs: 4 GPUs (healthy) and 22 (faulty) need the same first round;
    # the faulty fleet adds at most two per tracked metric with gaps (the GPUs lacking it, and
    # when they were last seen)
    tracked = len(spec_for("dcgm-healthy").tracked_metrics)
    faulty = run(env, spec_for("dcgm-exporter"))[0].summary["queries"]
    assert report.summary["queries"] <= faulty <= report.summary["queries"] + 2 * tracked


def test_requests_do_not_grow_with_the_fleet(env):
    """Issue 16: a healthy fleet of 48 GPUs on 6 nodes costs exactly the requests of 4 GPUs on 2."""
    small, code = run(env, spec_for("dcgm-healthy"))
    large, code_large = run(env, spec_for("dcgm-big"))
    assert (code, code_large) == (0, 0), large.findings
    assert large.summary["queries"] == small.summary["queries"]


@pytest.mark.parametrize("job", ["dcgm-exporter", "dcgm-big"])
def test_reporting_parts_union_is_the_single_query(env, job):
    """The reporting union runs as --concurrency disjoint parts (by the GPU index's last digit); together
    they answer exactly what the one union query answers, each GPU label set in one part only."""
    from gpumon.validate import facts
    from gpumon.validate.base import Context

    spec = spec_for(job)
    with PromClient(env["prom"].url) as client:
        ctx = Context(spec, client, lookback=60.0, concurrency=4, progress=False)
        try:
            exprs = {f"part{i}": facts.reporting_query(ctx, s) for i, s in enumerate(facts._shard_matchers(ctx))}
            exprs["whole"] = facts.reporting_query(ctx)
            answers = ctx.queries_at_now(exprs)
        finally:
            ctx.close()
    whole = {tuple(sorted(i["metric"].items())) for i in answers.pop("whole").data}
    parts = [[tuple(sorted(i["metric"].items())) for i in a.data] for a in answers.values()]
    assert len(answers) == 4 and sum(1 for p in parts if p) >= 2
    assert sorted(s for p in parts for s in p) == sorted(whole) and whole


def test_node_counts_without_a_complete_metric_find_the_same(env, monkeypatch):
    """The GPUs lacking a metric come from per-node counts: compared by the server against a
    metric every reporting GPU carries (only short nodes answer), or, when there is none, every
    node's count compared here. Both give the same inventory, at one evaluation time."""
    from gpumon.validate import inventoryfacts as facts
    from gpumon.validate.base import Context

    spec, at = spec_for("dcgm-exporter"), time.time()

    def inventory():
        with PromClient(env["prom"].url) as client:
            ctx = Context(spec, client, lookback=60.0, progress=False)
            ctx.now = at
            try:
                inv = ctx.inventory
                return {k: set(v) for k, v in inv.now.items()}, len(inv.reporting), ctx.queries
            finally:
                ctx.close()

    count, lacking = facts.node_count_query, facts._lacking
    fulls = []
    monkeypatch.setattr(facts, "node_count_query", lambda ctx, metric, full=None: fulls.append(full) or
                        count(ctx, metric, full))
    compared, reporting, _ = inventory()
    assert fulls and None not in fulls  # the first run compares on the server
    monkeypatch.setattr(facts, "node_count_query", lambda ctx, metric, full=None: count(ctx, metric))
    monkeypatch.setattr(facts, "_lacking", lambda *args, short_only=False: lacking(*args))
    assert inventory()[0] == compared
    assert any(0 < len(v) < reporting for v in compared.values())


class CountingClient(PromClient):
    """A PromClient that counts the series (result items) every instant query answered."""

    returned = 0

    def query(self, expr, time=None, each=None):
        counted = None
        if each:  # a streamed answer keeps no data: count the samples as they pass
            def counted(item):
                self.returned += 1
                each(item)
        answer = super().query(expr, time, counted)
        self.returned += len(answer.data)
        return answer


def test_healthy_fleet_answers_do_not_carry_the_fleet_per_metric(env):
    """Issue 16: the server computes the set differences. A healthy fleet of 4 GPUs downloads
    its GPUs once (the reporting inventory) and one count per metric, not every GPU for every
    tracked metric twice (which was 2 x 28 x 4 = 224 series here)."""
    spec = spec_for("dcgm-healthy")
    with CountingClient(env["prom"].url) as client:
        report, code = validate(spec, client, lookback=60.0, progress=False, matrix=False)
    assert code == 0, report.findings
    gpus = 4
    assert client.returned <= len(spec.tracked_metrics) + 4 * gpus, client.returned
    assert report.coverage is None


def test_faulty_fleet_exit_1(faulty):
    report, code = faulty
    assert code == 1


def test_target_down_and_timeout_and_empty(env, faulty):
    report, _ = faulty
    t = env["targets"]
    down = by_check(report, "target-down")
    assert [f.subject for f in down] == [t["gpu-node-3"]] and "HTTP status 500" in down[0].message
    slow = by_check(report, "scrape-timeout")
    assert [f.subject for f in slow] == [t["gpu-node-9"]] and "deadline exceeded" in slow[0].message
    assert [f.subject for f in by_check(report, "target-empty")] == [t["gpu-node-8"]]
    flap = by_check(report, "target-flapping")
    assert [f.subject for f in flap] == [t["gpu-node-12"]] and "switching between up and down" in flap[0].message
    # the target names the node it served (an instance is a pod IP in Kubernetes), as a label too
    assert f"target {t['gpu-node-12']} of node gpu-node-12 succeeded" in flap[0].message, flap[0].message
    assert dict(flap[0].labels)["Hostname"] == "gpu-node-12"
    assert not [f for f in report.findings if f.subject == t["gpu-node-12"] and f.check != "target-flapping"]
    # collapsed: no per-GPU finding for the down/empty nodes
    for f in report.findings:
        if f.check.startswith(("series-", "value-", "gpu-lost", "legacy")):
            assert not any(n in f.message for n in ("gpu-node-3 ", "gpu-node-8 ", "gpu-node-9 ", "gpu-node-12 ")), f


def test_missing_on_one_gpu_and_whole_node(faulty):
    report, _ = faulty
    missing = {f.subject: f for f in by_check(report, "series-missing")}
    one = missing["DCGM_FI_DEV_SM_CLOCK on gpu-node-1"]
    assert "1 of 2 GPUs" in one.message and gpu_uuid("gpu-node-1", 1) in one.message
    assert dict(one.labels)["UUID"] == gpu_uuid("gpu-node-1", 1)
    assert "never seen" in one.message
    node = missing["DCGM_FI_DEV_FB_USED on gpu-node-2"]
    assert "all 2 GPUs of node gpu-node-2" in node.message and dict(node.labels)["Hostname"] == "gpu-node-2"
    fleet = missing["DCGM_FI_DEV_MEM_COPY_UTIL"]
    assert "absent on all" in fleet.message and "healthy target" in fleet.message
    assert one.case == "presence/DCGM_FI_DEV_SM_CLOCK"


def test_disappeared_and_gpu_lost(faulty):
    report, _ = faulty
    gone = next(f for f in by_check(report, "series-missing") if f.subject == "DCGM_FI_DEV_SM_CLOCK on gpu-node-11")
    assert "last seen" in gone.message and gpu_uuid("gpu-node-11", 0) in gone.message
    lost = by_check(report, "gpu-lost")
    assert len(lost) == 1 and gpu_uuid("gpu-node-11", 1) in lost[0].message and "last seen" in lost[0].message


def test_values(faulty):
    report, _ = faulty
    nan = by_check(report, "value-nan")
    assert len(nan) == 1 and dict(nan[0].labels)["UUID"] == gpu_uuid("gpu-node-5", 0)
    assert dict(nan[0].labels)["dcgm_field"] == "DCGM_FI_DEV_POWER_USAGE"
    low = by_check(report, "value-out-of-range")
    assert [(dict(f.labels)["dcgm_field"], dict(f.labels)["UUID"]) for f in low] == \
        [("DCGM_FI_DEV_GPU_TEMP", gpu_uuid("gpu-node-5", 1))] and "implausible-low" in low[0].message
    sentinel = by_check(report, "value-sentinel")
    assert [dict(f.labels)["UUID"] for f in sentinel] == [gpu_uuid("gpu-node-5", 0)]
    # one GPU of a node blank while its peers read the field: look at that GPU, not only "drop the field"
    assert "nvidia-smi -q -i <index>" in sentinel[0].hint and "drop it from the collectors CSV" in sentinel[0].hint
    frozen = by_check(report, "value-frozen")
    assert [dict(f.labels)["UUID"] for f in frozen] == [gpu_uuid("gpu-node-1", 0)]


def test_intermittent(faulty):
    report, _ = faulty
    gaps = by_check(report, "series-intermittent")
    assert [dict(f.labels)["UUID"] for f in gaps] == [gpu_uuid("gpu-node-4", 0)]
    assert dict(gaps[0].labels)["dcgm_field"] == "DCGM_FI_DEV_POWER_USAGE"


def test_identity_rename_and_legacy_names(env, faulty):
    report, _ = faulty
    renamed = by_check(report, "identity-label-renamed")
    assert [f.subject for f in renamed] == [env["targets"]["gpu-node-6"]] and "`hostname`" in renamed[0].message
    legacy = by_check(report, "legacy-metric-names")
    assert {f.subject for f in legacy} >= {"DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE"}
    temp = next(f for f in legacy if f.subject == "DCGM_FI_DEV_GPU_TEMP")
    assert "dcgm_gpu_temp" in temp.message and gpu_uuid("gpu-node-7", 0) in temp.message
    # the renamed node's GPUs still count as reporting: no missing-series noise for them
    assert not any("gpu-node-6" in f.subject for f in by_check(report, "series-missing"))


def test_inventory_driver_mismatch(faulty):
    report, _ = faulty
    mism = by_check(report, "driver-mismatch")
    assert [f.subject for f in mism] == ["gpu-node-2"] and "535.54.03" in mism[0].message
    inv = by_check(report, "gpu-inventory")[0]
    assert "gpu-node-10: 2 x NVIDIA H100 80GB HBM3" in inv.message


def test_pinned_driver_is_an_error(env):
    pin = spec_for("dcgm-healthy", edit=lambda t: t.replace("driver_version: null", "driver_version: 535.54.03"))
    report, code = run(env, pin, checks=("inventory",))
    assert code == 1 and {f.subject for f in by_check(report, "driver-not-pinned-version")} == {"gpu-node-1", "gpu-node-2"}


def test_mig_unsupported_field(faulty, env):
    report, _ = faulty
    assert not by_check(report, "field-unsupported-on-mig")  # the spec says mig: unsupported
    edit = lambda t: t.replace("    mig: unsupported            # not reported per MIG", "    mig: device  # not reported per MIG")  # noqa: E731
    report, _ = run(env, spec_for("dcgm-exporter", edit=edit), checks=("presence",))
    mig = by_check(report, "field-unsupported-on-mig")
    assert [f.subject for f in mig] == ["DCGM_FI_DEV_GPU_UTIL"] and "GPU_I_ID" not in mig[0].message
    assert "gpu-node-10 gpu 1" in mig[0].message and "DCGM_FI_PROF_GR_ENGINE_ACTIVE" in mig[0].hint


def test_target_missing_skips_gpu_checks(env):
    report, code = run(env, spec_for("no-such-job"))
    assert code == 1
    assert [f.check for f in report.findings if f.severity == "error"] == ["target-missing"]
    # the series exist under other jobs (GPU Operator's nvidia-dcgm-exporter vs dcgm-exporter): name them
    (missing,) = by_check(report, "target-missing")
    assert 'job="dcgm-exporter" (' in missing.message and 'job="dcgm-dup" (2 series' in missing.message
    assert missing.message.endswith('job="dcgm-healthy" (4 series of DCGM_FI_DEV_GPU_TEMP)'), missing.message
    assert "set exporter.job in the spec" in missing.hint and "dcgm-healthy" in missing.hint


def test_duplicate_gpu(env, faulty):
    report, _ = faulty
    (dup,) = by_check(report, "duplicate-gpu")
    t = env["targets"]["gpu-node-2"]
    assert dup.subject == "gpu-node-2" and dup.severity == "error"
    assert f'job="dcgm-dup" instance="{t}", job="dcgm-exporter" instance="{t}"' in dup.message
    assert gpu_uuid("gpu-node-2", 0) in dup.message and gpu_uuid("gpu-node-2", 1) in dup.message
    assert "2 GPU(s) of node gpu-node-2" in dup.message  # not the MIG instances of gpu-node-10
    healthy, _ = run(env, spec_for("dcgm-healthy"), checks=("duplicates",))
    assert not healthy.findings


def test_missing_gpu_label_is_one_finding_naming_the_label_carried(env):
    """A spec naming a GPU label the series lack (``uuid_label``; they carry ``UUID``): one
    identity-label-missing per target that names ``UUID``, and no duplicate-gpu made of the
    label-less series (their empty UUIDs are no GPU); the inventory still counts 4 GPUs."""
    spec = spec_for("dcgm-healthy", edit=lambda t: t.replace("    gpu: UUID", "    gpu: uuid_label"))
    report, code = run(env, spec, checks=("presence", "duplicates", "inventory"))
    assert code == 1 and not by_check(report, "duplicate-gpu"), report.findings
    missing = by_check(report, "identity-label-missing")
    assert len(missing) == 2, missing
    for f in missing:
        assert "`uuid_label`" in f.message and "UUID_LABEL" not in f.message, f.message
        assert "they carry `UUID`" in f.message and "exporter.labels.gpu to `UUID`" in f.hint, f
    (inv,) = by_check(report, "gpu-inventory")
    assert inv.message.startswith("4 GPUs on 2 nodes"), inv.message


def test_missing_node_label_names_the_labels_that_could_be_the_node(env):
    """A spec naming a node label the series lack (a fleet relabelled to ``kubernetes_node``, a
    typo): the hint says to fix exporter.labels.node and names the labels the series carry that
    may name the node (here dcgm-exporter's ``Hostname``), not only "check relabeling"."""
    spec = spec_for("dcgm-healthy", edit=lambda t: t.replace("    node: Hostname", "    node: nodename"))
    report, code = run(env, spec, checks=("presence", "inventory"))
    missing = by_check(report, "identity-label-missing")
    assert code == 1 and len(missing) == 2, report.findings
    for f in missing:
        assert "no `nodename` label" in f.message, f.message
        assert "set exporter.labels.node in the spec" in f.hint and "(they carry `Hostname`)" in f.hint, f.hint
    # the inventory names the nodeless GPUs as such, not as a node with an empty name (": 4 x ...")
    (inv,) = by_check(report, "gpu-inventory")
    assert "; (no nodename label): 4 x " in inv.message or ": (no nodename label): 4 x " in inv.message, inv.message


def test_optional_fields_absent(env, faulty):
    report, _ = faulty
    prof = [f for f in by_check(report, "optional-absent") if f.case == "optional/profiling"]
    assert len(prof) == 1 and prof[0].severity == "info", prof  # allowed absent: a note, even when gone
    for name in ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_DRAM_ACTIVE"):
        assert name in prof[0].message.split("gone now:")[1]
    assert "profiling module" in prof[0].hint
    # healthy fleet: the simulator serves the default CSV's PROF fields; only the vGPU-only field it
    # lacks is listed, as info (never an error)
    healthy, code = run(env, spec_for("dcgm-healthy"), checks=("optional",))
    assert code == 0 and {f.severity for f in healthy.findings} == {"info"}
    text = " ".join(f.message for f in healthy.findings)
    assert "DCGM_FI_DEV_VGPU_LICENSE_STATUS" in text and "DCGM_FI_PROF_" not in text
    assert "DCGM_FI_DEV_MEMORY_TEMP" not in text


def test_counter_decreases(faulty):
    report, _ = faulty
    (dec,) = by_check(report, "counter-decreases")
    assert dec.severity == "warning" and dict(dec.labels)["UUID"] == gpu_uuid("gpu-node-4", 1)
    assert dict(dec.labels)["dcgm_field"] == "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"


def test_rules_loaded_pass_and_fail(env, faulty):
    report, _ = faulty
    assert not [f for f in report.findings if f.check.startswith("rule")]
    other, code = run(env, spec_for("dcgm-healthy", name="other"), checks=("rules-loaded",))
    assert code == 1
    # one cause, one finding with one hint (not the same hint once per group)
    (notloaded,) = by_check(other, "rules-not-loaded")
    assert notloaded.subject == "other" and "7 of 7 rule groups are not loaded" in notloaded.message
    for group in ("other.inventory", "other.coverage", "other.exporter", "other.presence", "other.values",
                  "other.plausibility", "other.gaps"):
        assert group in notloaded.message
    assert "release" in notloaded.hint and "found 0" in notloaded.message
    extra = lambda t: t.replace("  - name: DCGM_FI_DEV_MEMORY_TEMP\n", "  - name: DCGM_FI_DEV_MEMORY_TEMP\n", 1).replace(  # noqa: E731
        "    presence: optional\n    range: [5, 120]", "    presence: required\n    range: [5, 120]", 1)
    partial, code = run(env, spec_for("dcgm-healthy", edit=extra), checks=("rules-loaded",))
    missing = by_check(partial, "rule-missing")
    # the field made required needs its presence alerts and its missing set in the inventory group
    by_group = {f.subject: f.message for f in missing}
    assert code == 1 and "GpuMetricAbsent" in by_group["gpumon.presence"], by_group
    assert names.FIELD_MISSING in by_group["gpumon.inventory"], by_group


def test_cli_json_and_junit(env, tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC_TEXT)
    runner = CliRunner()
    res = runner.invoke(cli, ["validate", str(spec), "--prom", env["prom"].url, "--lookback", "1m", "--format", "json"])
    assert res.exit_code == 1, res.output
    doc = json.loads(res.output)
    assert {"series-missing", "target-down", "value-nan"} <= {f["check"] for f in doc["findings"]}
    res = runner.invoke(cli, ["validate", str(spec), "--prom", env["prom"].url, "--lookback", "1m", "--format", "junit"])
    suite = ET.fromstring(res.output.split("?>", 1)[1]).find("testsuite")
    names = {(c.get("classname"), c.get("name")) for c in suite.findall("testcase")}
    assert ("gpumon.presence", "DCGM_FI_DEV_SM_CLOCK") in names and ("gpumon.values", "DCGM_FI_DEV_GPU_TEMP") in names
    failed = {c.get("name") for c in suite.findall("testcase") if c.find("failure") is not None and
              c.get("classname") == "gpumon.presence"}
    assert "DCGM_FI_DEV_SM_CLOCK" in failed and "DCGM_FI_DEV_GPU_TEMP" in failed  # legacy node
    res = runner.invoke(cli, ["validate", str(spec), "--prom", env["prom"].url, "--lookback", "1m", "--format", "github"])
    assert "::error title=series-missing%3A DCGM_FI_DEV_SM_CLOCK on gpu-node-1::" in res.output


def test_metadata_type_mismatch_and_label_limit(env):
    report, code = run(env, spec_for("dcgm-healthy"), checks=("metadata",))
    mism = by_check(report, "type-mismatch")
    # the spec says gauge; the exporter's CSV types it counter although it goes down (dcgm-exporter#417)
    assert [f.subject for f in mism] == ["DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"] and mism[0].severity == "info"
    assert code == 0
    # exposed series carry 10 label names: __name__, job, instance + 7 from the exporter
    report, code = run(env, spec_for("dcgm-healthy"), checks=("metadata",), label_limit=9)
    (limit,) = by_check(report, "label-limit")
    assert limit.severity == "warning" and "4 series of DCGM_FI_DEV_GPU_TEMP" in limit.message and code == 0
    report, _ = run(env, spec_for("dcgm-healthy"), checks=("metadata",), label_limit=10)
    assert not by_check(report, "label-limit")


def _finding_key(f):
    # messages carry times ("last seen ... 2m ago"): compare what was found and where
    return (f.check, f.severity, f.subject, f.labels, f.case)


@pytest.mark.parametrize("check", list(CHECKS))
def test_a_check_alone_finds_what_it_finds_in_a_full_run(env, check):
    """Checks read shared facts (targets, inventory, loaded rules) and never each other's state:
    `--checks X` reports exactly X's part of a full run (it used to report GPUs behind a down
    target once per GPU, or GPUs missing now as intermittent). A long lookback keeps the fleet's
    history the same for both runs."""
    spec = spec_for("dcgm-exporter")
    full, _ = run(env, spec, lookback=900.0)
    alone, _ = run(env, spec, lookback=900.0, checks=(check,))
    mine = [f for f in full.findings if f.case.split("/")[0] == check]
    assert sorted(map(_finding_key, alone.findings)) == sorted(map(_finding_key, mine))
    if check in ("targets", "presence", "values", "continuity", "inventory", "duplicates", "counters"):
        assert mine, f"the faulty fleet gives {check} something to find"


def test_every_finding_id_is_declared_by_its_check(faulty):
    report, _ = faulty
    for f in report.findings:
        owner = f.case.split("/")[0]
        declared = reachability.FINDINGS if owner == "reachability" else CHECKS[owner].FINDINGS
        assert f.check in declared, (owner, f.check)


def test_documented_examples_still_occur(faulty):
    """docs/checks/validate/ shows findings recorded from this fleet (tests/data/validate-examples.json):
    each must still be what a real run finds."""
    examples = json.loads((DATA / "validate-examples.json").read_text())
    report, _ = faulty
    found = {(f.check, f.severity) for f in report.findings}
    recorded = [ex for ex in examples.values() if "the faulty fleet" in ex["source"]]
    assert len(recorded) >= 8
    for ex in recorded:
        assert (ex["check"], ex["severity"]) in found, ex["check"]
