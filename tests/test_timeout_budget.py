"""Per-query timeouts share one budget: a server that stalls on some queries and answers others
must not cost ``--timeout`` per stalled query. A count of timeouts in a row alone was reset by
every answered query in between (a server answering every other query stalled 22 of 45 queries
at --timeout 1, one by one). The server is a mock: a real Prometheus cannot be made to stall on
chosen queries."""

from __future__ import annotations

import itertools
import re
import threading
import time

import pytest

from gpumon import promapi
from gpumon.promapi import PromClient, PromError

from .hostile_prom import HostileProm, after_probe, healthy, stall
from .test_hostile_inputs import gpumon


class Alternating:
    """Answers the probe, then every other request; stalls on the rest (and counts them)."""

    def __init__(self):
        self.count, self.stalled, self.lock = itertools.count(), 0, threading.Lock()

    def __call__(self, h, path, params):
        with self.lock:
            stalls = next(self.count) % 2 == 1
            self.stalled += stalls
        return stall(h, path, params) if stalls else healthy(h, path, params)


def test_timeouts_in_all_use_up_the_clients_budget():
    responder = Alternating()
    with HostileProm("healthy") as srv:
        srv.server.responder = responder
        # 1.5 s: a healthy answer from this process' own server can take over 0.3 s on a loaded
        # machine (counted as one more timeout); a stall lasts hostile_prom.STALL (20 s)
        client = PromClient(srv.url, timeout=1.5)
        outcomes = []
        for _ in range(4 * promapi.TIMEOUT_BUDGET):
            start = time.monotonic()
            try:
                client.query("vector(1)")
                outcomes.append("ok")
            except PromError as exc:
                assert exc.kind == "timeout"
                outcomes.append("not sent" if "not sent" in exc.message else "timeout")
            if outcomes[-1] == "not sent":
                assert time.monotonic() - start < 0.1
        client.close()
    assert outcomes.count("timeout") == promapi.TIMEOUT_BUDGET, outcomes
    assert responder.stalled == promapi.TIMEOUT_BUDGET
    assert outcomes[-1] == "not sent"


@pytest.mark.slow
def test_validate_against_a_server_stalling_on_every_other_query_stops_early():
    responder = Alternating()
    with HostileProm("healthy") as srv:
        srv.server.responder = after_probe(responder)
        proc, seconds = gpumon("validate", "gpumon.yaml", "--prom", srv.url, "--timeout", "1", "--deadline", "300",
                               "--concurrency", "2", timeout=120)
    # inconclusive (3) when nothing failed; the answers that land between the stalls come from a server
    # with no rules and no targets, which are failures (1) when they are among them: which requests
    # stall depends on the order validate sends them in, so the summary line decides
    errors = re.search(r"checks run; (\d+) error", proc.stdout)
    assert errors, proc.stdout[-1500:]
    assert proc.returncode == (1 if int(errors.group(1)) else 3), proc.stdout[-1500:]
    assert "inconclusive" in proc.stdout.splitlines()[-1]
    assert "the server stopped answering in time" in proc.stdout
    # the budget plus the queries in flight when it ran out, not one timeout per stalled query
    assert responder.stalled <= promapi.TIMEOUT_BUDGET + 2, responder.stalled
