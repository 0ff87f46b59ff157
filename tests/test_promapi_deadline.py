"""Every request ends within its ``--timeout`` in wall time, and a run within ``--deadline``,
whatever the server trickles: the status line and then one header line at a time never let a
per-read timeout fire (each line resets it), so every read is bounded by the time the request has
left. Hostile servers on 127.0.0.1: a real Prometheus cannot be made to trickle its headers."""

from __future__ import annotations

import socket
import threading
import time

import httpx
import pytest

from gpumon import promhttp
from gpumon.promapi import PromClient, PromError

from .hostile_prom import HostileProm
from .test_hostile_inputs import gpumon


@pytest.fixture(scope="module")
def trickler():
    with HostileProm("trickle-headers") as srv:
        yield srv


def test_a_request_whose_headers_trickle_ends_at_its_timeout(trickler):
    with PromClient(trickler.url, timeout=1.0) as c:
        start = time.monotonic()
        with pytest.raises(PromError) as err:
            c.query("vector(1)")
        took = time.monotonic() - start
    assert took < 2.0, f"{took:.1f}s"
    assert err.value.kind == "timeout" and err.value.url == f"{trickler.url}/api/v1/query"
    assert "sent its answer too slowly" in err.value.message


def test_a_request_whose_headers_trickle_ends_at_the_overall_deadline(trickler):
    with PromClient(trickler.url, timeout=30.0, deadline=1.0) as c:
        start = time.monotonic()
        with pytest.raises(PromError) as err:
            c.query("vector(1)")
        took = time.monotonic() - start
    assert took < 2.0, f"{took:.1f}s"
    assert "--deadline of 1s ran out" in err.value.message


def test_requests_side_by_side_each_keep_their_own_deadline(trickler):
    """The deadline a read is bounded by is its own request's (one per thread, not the client's
    last one)."""
    took, errors = {}, []

    def ask(name, timeout):
        with PromClient(trickler.url, timeout=timeout) as c:
            start = time.monotonic()
            try:
                c.query("vector(1)")
            except PromError as exc:
                errors.append(exc.kind)
            took[name] = time.monotonic() - start

    threads = [threading.Thread(target=ask, args=(n, t)) for n, t in (("short", 0.5), ("long", 2.0))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert errors == ["timeout", "timeout"]
    assert took["short"] < 1.2 and 1.8 < took["long"] < 3.0, took


def test_every_transport_reads_through_the_deadline(monkeypatch):
    """The default transport and those httpx mounts for proxies from the environment."""
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    with PromClient("http://prom.example:9090") as c:
        transports = [c.http._transport, *c.http._mounts.values()]
        assert len(transports) >= 3
        assert all(isinstance(t._pool._network_backend, promhttp.DeadlineBackend) for t in transports)
    with PromClient("http://prom.example:9090", transport=httpx.MockTransport(lambda r: httpx.Response(204))):
        pass  # a test's transport is used as given


@pytest.mark.parametrize("command,mode", [("validate", "trickle-headers"), ("preview", "trickle-headers"),
                                          ("validate", "trickle-headers-after-probe")])
def test_validate_and_preview_end_within_the_deadline(tmp_path, command, mode):
    fmt = ("--format", "json") if command == "validate" else ()
    with HostileProm(mode) as srv:
        proc, took = gpumon(command, "gpumon.yaml", "--prom", srv.url, "--timeout", "1", "--deadline", "4",
                            "-o", tmp_path / "out", *fmt, timeout=30)
    assert proc.returncode in ((2,) if mode == "trickle-headers" else (1, 3)), proc.stdout[-800:] + proc.stderr[-800:]
    assert took < 4 + 4, f"{took:.1f}s"
    assert "too slowly" in proc.stdout + proc.stderr + ((tmp_path / "out").read_text()
                                                       if (tmp_path / "out").exists() else "")


def test_a_host_name_whose_lookup_hangs_ends_at_the_timeout(monkeypatch, trickler):
    """getaddrinfo takes no timeout: a resolver that does not answer (here one that sleeps 20 s, as
    glibc's retries do against a dead nameserver; no real server can be made to) ends the request
    at its timeout, named as a timeout of its URL; a name that resolves connects as before."""
    real = socket.getaddrinfo

    def resolver(host, *args, **kwargs):
        if host == "prom.slow-dns.test":
            time.sleep(20)
        return real("127.0.0.1" if host == "prom.fast-dns.test" else host, *args, **kwargs)
    monkeypatch.setattr(socket, "getaddrinfo", resolver)
    with PromClient("http://prom.slow-dns.test:9090", timeout=1.0) as c:
        start = time.monotonic()
        with pytest.raises(PromError) as err:
            c.query("vector(1)")
        took = time.monotonic() - start
    assert took < 2.0, f"{took:.1f}s"
    assert err.value.kind == "timeout" and err.value.url == "http://prom.slow-dns.test:9090/api/v1/query"
    port = trickler.url.rsplit(":", 1)[1]
    with PromClient(f"http://prom.fast-dns.test:{port}", timeout=1.0) as c:
        with pytest.raises(PromError) as err:
            c.query("vector(1)")   # reached the trickling server through the name: its own timeout
    assert "sent its answer too slowly" in err.value.message
