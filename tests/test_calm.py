"""tests/calm.py, the live tests' "a healthy fleet is quiet" check, on a real Prometheus: an alert
in a window the server measured calm fails at once; a target that misses its scrape timeout is
named as the evidence that makes a window not calm."""

from __future__ import annotations

import time

import pytest

from gpumon.localprom import LocalPrometheus, prometheus_binary
from gpumon.loopback import ExpositionServer

from .calm import assert_quiet, starvation, troubled

FAKE = {"alertname": "GpuLost", "alertstate": "pending"}


def test_an_alert_in_a_calm_window_fails_and_a_timed_out_scrape_is_evidence():
    state = {"slow": False}

    def body():
        if state["slow"]:
            time.sleep(1.5)  # past the 1 s scrape timeout
        return "gpu_up 1\n"

    with ExpositionServer(body) as target, LocalPrometheus({"fake": [target.address]},
                                                           binary=prometheus_binary()) as prom:
        assert prom.wait_for(lambda: prom.query("count_over_time(up[5s]) >= 4"), 60), prom.logs()
        assert_quiet(prom, lambda: [], observe=1)  # nothing seen: quiet
        with pytest.raises(AssertionError, match="measured calm"):
            assert_quiet(prom, lambda: [FAKE], observe=1, lead=3)
        state["slow"] = True
        assert prom.wait_for(lambda: target.address in troubled(prom, 5), 20)
        with pytest.raises(AssertionError, match="starved server") as info:
            assert_quiet(prom, lambda: [FAKE], observe=1, lead=3, tries=2)
        assert f"{target.address}: a scrape failed" in str(info.value)
        assert any("failed" in e for e in starvation(prom, time.time() - 2, 3, 0))
