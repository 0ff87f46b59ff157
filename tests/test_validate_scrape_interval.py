"""``scrape-interval-mismatch``: the job's real scrape interval and timeout (``/api/v1/targets``)
against the spec's. The rules are sized for the spec's interval: a job scraped every 60 s against a
spec saying 15 s gave no finding. A warning when the spec's bounds still hold at the real interval
(re-render), an error when they break (the rendered rules rely on them); per scrape config; nothing
where the targets API does not exist (Mimir)."""

from __future__ import annotations

import shutil
from pathlib import Path

import httpx
import pytest

from gpumon.localprom import LocalPrometheus
from gpumon.promapi import PromClient, PromError
from gpumon.simserve import Simulator
from gpumon.simulate import Fleet
from gpumon.spec import load_spec, parse_spec
from gpumon.validate import scrapeinterval, validate
from gpumon.validate.scrapeinterval import Group
from gpumon.validate.targetfacts import Target

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = load_spec(ROOT / "gpumon.yaml")  # scrape_interval 15s, scrape_timeout 10s, collect 30s, for 5m
#: the validate spec (1s scrapes) with a `for` of 4s: two scrapes of 2s, not of 3s
FAST = parse_spec((ROOT / "tests" / "data" / "validate-spec.yaml").read_text().replace("  for: 5m\n", "  for: 4s\n"),
                  "validate-spec.yaml")


def _target(instance: str, interval: float | None, timeout: float | None = 10.0) -> Target:
    return Target(instance, "up", "", 0.01, interval, timeout, f"http://{instance}/metrics")


def test_no_finding_when_the_targets_agree_with_the_spec():
    assert scrapeinterval.decide(DEFAULT, scrapeinterval.groups([_target("a:9400", 15.0), _target("b:9400", 15.0)])) == []
    # a target without a scrapeInterval (an older API) is no evidence either way
    assert scrapeinterval.groups([_target("a:9400", None)]) == []
    # the spec's own interval breaks none of its bounds
    assert scrapeinterval.broken_bounds(DEFAULT, 15.0) == []


def test_a_slower_scrape_within_the_spec_bounds_is_a_warning_saying_what_to_change():
    (severity, msg, hint, group), = scrapeinterval.decide(DEFAULT, [Group(60.0, 10.0, ("a:9400", "b:9400"))])
    assert severity == "warning"
    assert msg == "the spec says scrape_interval: 15s; the targets (a:9400, b:9400) are scraped every 1m"
    assert hint.startswith("re-render with scrape_interval: 1m")


def test_an_interval_that_breaks_a_bound_the_rules_rely_on_is_an_error_naming_it():
    (severity, msg, hint, _), = scrapeinterval.decide(DEFAULT, [Group(300.0, 10.0, ("a:9400",))])
    assert severity == "error"
    # `for: 5m` no longer outlasts one missed scrape, the 5m rate windows hold one scrape
    assert "alerts.for (5m) must be at least two samples (10m" in msg, msg
    assert "rate window 5m is shorter than 2 x max(scrape, collect interval) = 10m" in msg, msg
    assert "set scrape_interval: 5m in the spec" in hint


def test_targets_of_several_scrape_configs_are_reported_per_interval():
    targets = [_target("a:9400", 15.0)] + [_target(f"n{i}:9400", 60.0) for i in range(5)] + [_target("z:9400", 300.0)]
    out = scrapeinterval.decide(DEFAULT, scrapeinterval.groups(targets))
    assert [(s, g.interval) for s, _, _, g in out] == [("warning", 60.0), ("error", 300.0)]
    assert "5 of the job's 7 targets (n0:9400, n1:9400, n2:9400 and 2 more) are scraped every 1m" in out[0][1]
    assert "1 of the job's 7 targets (z:9400) is scraped every 5m" in out[1][1]
    assert all("different intervals (several scrape configs)" in hint for _, _, hint, _ in out)


def test_another_timeout_alone_is_a_warning():
    (severity, msg, hint, _), = scrapeinterval.decide(DEFAULT, [Group(15.0, 5.0, ("a:9400",))])
    assert severity == "warning"
    assert msg == "the spec says scrape_timeout: 10s; the targets (a:9400) are scraped with a 5s timeout"
    assert hint.startswith("re-render with scrape_timeout: 5s")


def _active(url: str) -> list[dict]:
    targets = httpx.get(f"{url}/api/v1/targets", params={"state": "active"}, timeout=10).json()["data"]["activeTargets"]
    return [t for t in targets if t["labels"].get("job") == "dcgm-exporter"]


class NoTargetsApi(PromClient):
    """A client of a server without ``/api/v1/targets`` (as Mimir and Cortex answer it)."""

    def targets(self, keep=None):
        raise PromError("not-found", self.base + "/api/v1/targets", "404 page not found", 404)


@pytest.mark.skipif(not shutil.which("prometheus"), reason="prometheus not installed")
def test_a_real_prometheus_scraping_the_job_at_other_intervals(engine):
    """One job from three scrape configs (the job label relabelled): 1s as the spec says, 2s (a
    warning) and 3s (an error: the spec's `for: 4s` is no longer two scrapes)."""
    fleet = Fleet(3, 1, [], uuid_salt="validate-interval/")
    with Simulator(fleet) as sim:
        addr = sim.targets
        more = [{"job_name": f"dcgm-{every}", "scrape_interval": every, "scrape_timeout": "1s",
                 "static_configs": [{"targets": [addr[node]]}],
                 "relabel_configs": [{"target_label": "job", "replacement": "dcgm-exporter"}]}
                for every, node in (("2s", "gpu-node-2"), ("3s", "gpu-node-3"))]
        with LocalPrometheus({"dcgm-exporter": [addr["gpu-node-1"]]}, more_scrape_configs=more,
                             binary=engine.prometheus) as prom:
            # the targets API lists a target, with its interval, as soon as the scrape manager has it
            assert prom.wait_for(lambda: len(_active(prom.url)) == 3, 30), prom.logs()
            with PromClient(prom.url) as client:
                report, _ = validate(FAST, client, lookback=60.0, progress=False, checks=("targets",))
            # without the API, validate reads the targets from `up`: each must have been scraped once
            assert prom.wait_for(lambda: len(prom.query('up{job="dcgm-exporter"}')) == 3, 30), prom.logs()
            with NoTargetsApi(prom.url) as client:
                mimir, _ = validate(FAST, client, lookback=60.0, progress=False, checks=("targets",))
    got = sorted((f for f in report.findings if f.check == "scrape-interval-mismatch"), key=lambda f: dict(f.labels)["scrape_interval"])
    assert [(f.severity, dict(f.labels)["scrape_interval"]) for f in got] == [("warning", "2s"), ("error", "3s")], \
        [(f.check, f.severity, f.message) for f in report.findings]
    assert f"1 of the job's 3 targets ({addr['gpu-node-2']}) is scraped every 2s" in got[0].message
    assert "alerts.for (4s) must be at least two samples (6s" in got[1].message, got[1].message
    assert {f.check for f in report.findings} == {"scrape-interval-mismatch"}
    # no targets API: nothing to compare, no finding
    assert {f.check for f in mimir.findings} == {"targets-api-unavailable"}
