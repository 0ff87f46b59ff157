""""A healthy fleet is quiet", checked in a window the server itself measured as calm.

The live tests run rules at test speed (1 s scrapes and evaluations, ``for: 2s``) next to their
exposition servers, served from the pytest worker's own process. On a saturated machine a scrape
misses its 1 s timeout (Prometheus writes staleness markers for every series of the target), a
scrape or a rule-group iteration runs late, and for a second or two the rules see a node without
GPUs or a slow exporter: GpuNodeGpusMissing or GpuExporterScrapeSlow go pending, rightly, for what
the server really measured. Production's ``for: 5m`` absorbs such a blip; ``for: 2s`` does not.

:func:`assert_quiet` watches a window for alerts. Alerts in a window where Prometheus measured
nothing wrong (no failed scrape, no scrape above 0.8 of its timeout, no late scrape, no missed
rule-group iteration, within ``lead`` seconds before the window and in it) fail the test at once.
Alerts in a window with such evidence are the machine's, and the check runs again in the next
window; a machine starved in every window fails too, naming the evidence.
"""

from __future__ import annotations

import math
import re
import time
from typing import Callable

import httpx

#: what Prometheus 2.x and 3.x expose per rule group on ``/metrics`` when an evaluation overran
#: its interval (``rules/group.go``)
MISSED = re.compile(r'^prometheus_rule_group_iterations_missed_total\{[^}]*\} (\S+)$', re.M)


def missed_iterations(prom) -> float:
    """Rule-group iterations Prometheus skipped so far (all groups), from its own ``/metrics``."""
    text = httpx.get(f"{prom.url}/metrics", timeout=10).text
    return sum(float(v) for v in MISSED.findall(text))


def _seconds(duration: str) -> float:
    """``"1s"``/``"500ms"``/``"1m"`` as seconds (the durations LocalPrometheus is configured with)."""
    number, unit = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m)", duration).groups()
    return float(number) * {"ms": 0.001, "s": 1.0, "m": 60.0}[unit]


def troubled(prom, seconds: float) -> dict[str, list[str]]:
    """Targets whose scrapes failed or took above 0.8 of the timeout in the last ``seconds`` (the
    server's measure): {instance: [evidence, ...]}."""
    window = max(2, math.ceil(seconds))
    timeout = _seconds(prom.scrape_timeout)
    found: dict[str, list[str]] = {}
    for r in prom.query(f"min_over_time(up[{window}s]) == 0"):
        found.setdefault(r["metric"].get("instance"), []).append(f"a scrape failed in the last {window} s")
    for r in prom.query(f"max_over_time(scrape_duration_seconds[{window}s]) > {0.8 * timeout:g}"):
        found.setdefault(r["metric"].get("instance"), []).append(f"a scrape took {float(r['value'][1]):.2f} s")
    return found


def starvation(prom, start: float, lead: float, missed_before: float) -> list[str]:
    """What Prometheus measured that explains alerts on a healthy fleet in the window from
    ``start`` (its clock) to now: failed scrapes and scrapes above 0.8 of the timeout since
    ``lead`` seconds before ``start``, scrapes that came late in the window (fewer than 0.8 of the
    expected samples of ``up``), rule-group iterations missed since ``missed_before`` was read.
    Empty: the window was calm."""
    observed = prom.server_time() - start
    found = [f"{instance}: {e}" for instance, evidence in troubled(prom, observed + lead).items() for e in evidence]
    interval, recent = _seconds(prom.scrape_interval), max(2, math.floor(observed))
    for r in prom.query(f"count_over_time(up[{recent}s]) < {0.8 * recent / interval:g}"):
        found.append(f"{r['metric'].get('instance')} was scraped {r['value'][1]} times in {recent} s, "
                     f"every {interval:g} s expected")
    missed = missed_iterations(prom) - missed_before
    if missed:
        found.append(f"{missed:g} rule-group iteration(s) missed")
    return found


def assert_quiet(prom, alerts: Callable[[], list[dict]], observe: float = 6, lead: float = 30,
                 tries: int = 5, what: str = "healthy fleet") -> None:
    """Assert that ``alerts()`` (pending or firing alerts, as label dicts) stays empty for
    ``observe`` seconds in a window Prometheus measured as calm (see the module docstring).

    ``lead``: seconds before the window whose failed or late scrapes can still explain an alert in
    it (the longest window a rule reads at test speed, e.g. a 30 s flapping window).
    Raises AssertionError with the alerts seen, and the evidence if the machine was starved.
    """
    tried: list[str] = []
    for _ in range(tries):
        start, before = prom.server_time(), missed_iterations(prom)
        seen: list[dict] = []
        prom.wait_for(lambda: seen.extend(alerts()) or False, observe)
        if not seen:
            return
        evidence = starvation(prom, start, lead, before)
        if not evidence:
            raise AssertionError(f"{what} has alerts in a window Prometheus measured calm: {seen}")
        tried.append(f"{sorted({a.get('alertname') for a in seen})} with {evidence}")
        time.sleep(1)
    raise AssertionError(f"{what}: every window had alerts and a starved server: {tried}")
