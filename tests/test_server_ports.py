"""A server whose port another process took between ``free_port()`` and its bind starts again on
a new port (gpumon.localprom: ``_LocalServer._spawn``). With dozens of servers starting at once (the
live vmalert matrix) the race is real: vmalert exited with ``bind: address already in use``.
A stand-in server (a Python script) fails the way Go's ``net.Listen`` does when the port is taken."""

from __future__ import annotations

import socket
import sys
import textwrap

import pytest

from gpumon import localprom

STAND_IN = textwrap.dedent("""
    import http.server, sys
    host, port = sys.argv[1].rsplit(":", 1)

    class Ready(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    try:
        server = http.server.HTTPServer((host, int(port)), Ready)
    except OSError:
        print(f"listen tcp4 {sys.argv[1]}: bind: address already in use", flush=True)
        sys.exit(255)
    server.serve_forever()
""")


class StandIn(localprom._LocalServer):
    NAME = "stand-in"

    def start(self):
        folder = self._folder()
        script = folder / "serve.py"
        script.write_text(STAND_IN)
        self._spawn([sys.executable, str(script), f"127.0.0.1:{self.port}"])
        return self


def _taken(port: int) -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", port))
    sock.listen()
    return sock


def test_a_taken_port_is_replaced_and_the_server_starts():
    server = StandIn(startup_timeout=20)
    first = server.port
    with _taken(first), server:
        assert server.port != first
        assert server.url == f"http://127.0.0.1:{server.port}"
        assert "already in use" not in server.logs()


def test_a_server_failing_otherwise_is_not_retried(monkeypatch):
    taken = []
    monkeypatch.setattr(localprom, "PORT_TAKEN", "a message no server prints")
    server = StandIn(startup_timeout=20)
    with _taken(server.port), pytest.raises(RuntimeError, match="exited with 255"):
        taken.append(server.port)
        server.start()
    assert server.port == taken[0]
