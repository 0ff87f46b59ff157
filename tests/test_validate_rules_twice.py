"""validate's rules-loaded check on a real Prometheus that loads gpumon's rule groups from two
files: the rendered file and an older copy of it (one alert's threshold changed, one recording
rule gone), as an older render left in ``rule_files`` or an old release's PrometheusRule does.
Two copies of a group write their records alternately; different copies flap between versions."""

from __future__ import annotations

import shutil
import time

import httpx
import pytest
import yaml

from gpumon import render
from gpumon.localprom import LocalPrometheus
from gpumon.promapi import PromClient
from gpumon.spec import default_spec_path, parse_spec
from gpumon.validate import validate

pytestmark = pytest.mark.skipif(not shutil.which("prometheus"), reason="prometheus not installed")

SPEC_TEXT = default_spec_path().read_text("utf-8")


def _older(rules_text: str) -> str:
    """The rendered rules as an older render: in ``gpumon.values`` one rule's query differs
    (same names), in ``gpumon.gaps`` the last rule is gone."""
    doc = yaml.safe_load(rules_text)
    groups = {g["name"]: g for g in doc["groups"]}
    values = groups["gpumon.values"]["rules"]
    values[0]["expr"] = f"({values[0]['expr']}) * 1"
    groups["gpumon.gaps"]["rules"].pop()
    return yaml.safe_dump(doc, sort_keys=False)


@pytest.fixture(scope="module")
def prom(tmp_path_factory, engine):
    tmp = tmp_path_factory.mktemp("twice")
    text = render.render(parse_spec(SPEC_TEXT, "<gpumon.yaml>"))["rules/gpumon.rules.yaml"]
    (tmp / "gpumon.rules.yaml").write_text(text)
    (tmp / "old.rules.yaml").write_text(_older(text))
    with LocalPrometheus({}, rule_files=[tmp / "gpumon.rules.yaml", tmp / "old.rules.yaml"],
                         binary=engine.prometheus) as server:
        yield server


def twice(prom, spec_text: str) -> dict[str, object]:
    with PromClient(prom.url) as client:
        report, _ = validate(parse_spec(spec_text, "<spec>"), client, progress=False, checks=("rules-loaded",))
    return {f.subject: f for f in report.findings if f.check == "rules-loaded-twice"}


def test_a_group_loaded_in_two_versions_is_an_error_and_two_same_copies_a_warning(prom):
    found = twice(prom, SPEC_TEXT)
    assert {s: f.severity for s, f in found.items() if f.severity == "error"} == \
        {"gpumon.values": "error", "gpumon.gaps": "error"}, found
    gaps = found["gpumon.gaps"]
    assert "loaded 2 times in 2 different versions" in gaps.message and "flap" in gaps.message
    assert "old.rules.yaml" in gaps.message and "gpumon.rules.yaml" in gaps.message, gaps.message
    same = {s for s, f in found.items() if f.severity == "warning"}
    assert same == {"gpumon.inventory", "gpumon.coverage", "gpumon.exporter", "gpumon.presence",
                    "gpumon.plausibility"}, found
    assert "the same rules each time" in found["gpumon.exporter"].message


def test_in_a_global_view_identical_copies_are_each_clusters_and_copies_compare_by_rule_names(prom):
    """A cluster label says the server is (or may be) a global view, where every cluster's copy of
    a group is listed: same copies say nothing; a rule missing in one copy is an error; a query
    printed differently is not compared (servers of different versions print one differently)."""
    found = twice(prom, SPEC_TEXT.replace("    cluster: null ", "    cluster: cluster ", 1))
    assert set(found) == {"gpumon.gaps"} and found["gpumon.gaps"].severity == "error", found


def test_the_rules_are_read_without_their_alerts_where_the_server_can(prom, engine):
    """On a Prometheus with no targets, GpuExporterTargetMissing is pending: the plain answer lists
    its alert; the one validate reads leaves it out on 3.x (``exclude_alerts``), and 2.42, which
    does not know the parameter, answers as before."""
    def alerts(groups) -> list:
        return [a for g in groups for r in g["rules"] for a in (r.get("alerts") or [])]

    deadline = time.monotonic() + 30
    while not alerts(httpx.get(f"{prom.url}/api/v1/rules", timeout=10).json()["data"]["groups"]):
        assert time.monotonic() < deadline, "no pending alert after 30 s"
        time.sleep(0.5)
    with PromClient(prom.url) as client:
        read = client.rules().data
    assert {g["name"] for g in read} >= {"gpumon.exporter", "gpumon.inventory"}
    if engine.version.startswith("2."):
        assert alerts(read), engine.version
    else:
        assert alerts(read) == [], engine.version
