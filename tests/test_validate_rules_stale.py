"""validate's ``rule-stale``: a loaded rule that runs otherwise than gpumon renders it for the spec
(an older render still applied after the spec moved a threshold or a ``for``). On real servers
loading the bundled output/rules: each Prometheus build (it re-prints every query from its AST:
sorted matchers, its own spacing) and vmalert (the text as written) must show no difference for
the spec the rules were rendered from, and a spec with another threshold or ``for`` must."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gpumon.localprom import LocalPrometheus, LocalVictoriaMetrics, LocalVmalert
from gpumon.promapi import PromClient
from gpumon.rules import Rule
from gpumon.spec import default_spec_path, parse_spec
from gpumon.validate import validate
from gpumon.validate.rulediff import canonical, stale_rules

pytestmark = pytest.mark.skipif(not shutil.which("prometheus"), reason="prometheus not installed")

ROOT = Path(__file__).resolve().parent.parent
BUNDLED = ROOT / "output" / "rules" / "gpumon.rules.yaml"
SPEC_TEXT = default_spec_path().read_text("utf-8")
TEMP_83 = '{alert: GpuTemperatureHigh, severity: warning, op: ">", value: 83, for: 5m}'
POWER_10M = '{alert: GpuPowerHigh, severity: warning, op: ">", value: 700, for: 10m}'
#: the spec moved GpuTemperatureHigh to 85 and GpuPowerHigh's `for` to 15m after the deploy
MOVED = SPEC_TEXT.replace(TEMP_83, TEMP_83.replace("83", "85")).replace(POWER_10M, POWER_10M.replace("10m", "15m"))


def stale(url: str, spec_text: str) -> list:
    with PromClient(url) as client:
        report, _ = validate(parse_spec(spec_text, "<spec>"), client, progress=False, checks=("rules-loaded",))
    return [f for f in report.findings if f.check == "rule-stale"]


def check_server(url: str) -> None:
    assert stale(url, SPEC_TEXT) == []
    (found,) = stale(url, MOVED)
    assert found.severity == "error" and found.subject == "gpumon.values", found
    assert "GpuTemperatureHigh: expression differs (threshold 83 running, 85 in the spec)" in found.message, found
    assert "GpuPowerHigh: `for` differs (10m running, 15m in the spec)" in found.message, found
    assert "2 loaded rules differ" in found.message and "re-apply" in found.hint, found


def test_spec_and_bundled_output_agree():
    assert MOVED.count("value: 85, for: 5m}") == 2 and "value: 700, for: 15m}" in MOVED


@pytest.fixture(scope="module")
def prom(engine):
    with LocalPrometheus({}, rule_files=[BUNDLED], binary=engine.prometheus) as server:
        yield server


def test_prometheus_reprinting_is_no_difference_and_a_moved_threshold_or_for_is(prom):
    check_server(prom.url)


def test_vmalert_as_written_is_no_difference_and_a_moved_threshold_or_for_is(vm_engine):
    """validate reads vmalert's rules through VictoriaMetrics' ``-vmalert.proxyURL`` (a second
    single-node here: vmalert's datasource must be up before it starts)."""
    with LocalVictoriaMetrics(binary=vm_engine.victoria_metrics) as vm, \
            LocalVmalert([BUNDLED], vm.url, "http://127.0.0.1:9", binary=vm_engine.vmalert) as vmalert, \
            LocalVictoriaMetrics(binary=vm_engine.victoria_metrics,
                                 extra_args=[f"-vmalert.proxyURL={vmalert.url}"]) as front:
        check_server(front.url)


def test_matchers_in_another_order_and_other_spacing_are_the_same_expression():
    assert canonical('max by (job) (x{job="a", Hostname!=""} > 83)') == \
        canonical('max by (job)(x{Hostname!="",job="a"} > 83)')
    assert canonical("x > 83") != canonical("x > 85")
    assert canonical("x >") is None


def test_rules_of_one_name_are_told_apart_by_their_labels():
    """One alert name per field: the loaded rule of the same field is the one described."""
    def rule(field: str, value: int) -> Rule:
        return Rule(f'x{{f="{field}"}} > {value}', alert="A", for_=60, labels=(("dcgm_field", field),))

    def loaded(field: str, value: int) -> dict:
        return {"type": "alerting", "name": "A", "query": f'x{{f="{field}"}} > {value}', "duration": 60,
                "labels": {"dcgm_field": field, "added_by_operator": "x"}}

    want = (rule("a", 1), rule("b", 2))
    assert stale_rules(want, [loaded("b", 2), loaded("a", 1)]) == []
    assert stale_rules(want, [loaded("a", 1), loaded("b", 3)]) == \
        ["A: expression differs (threshold 3 running, 2 in the spec)"]
    changed = stale_rules((Rule("sum(x) > 1", alert="B", for_=0, labels=(("severity", "critical"),)),),
                          [{"type": "alerting", "name": "B", "query": "sum by (job) (x) > 1", "duration": 300,
                            "labels": {"severity": "warning"}}])
    assert changed == ["B: expression differs (running `sum by (job)(x{}) > 1`, in the spec `sum(x{}) > 1`), "
                       "`for` differs (5m running, none in the spec), labels differ (severity=warning running, "
                       "critical in the spec)"], changed
