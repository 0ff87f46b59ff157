"""An Alertmanager stand-in that answers every notification at once and keeps none, in a process
of its own: for the live vmalert matrix (tests/matrix_vmlive.py), which reads the pages back from
``ALERTS`` and needs vmalert's notifications only to be accepted.

vmalert sends a rule's notifications inside the group's evaluation, so a receiver that answers late
makes every group late. Served from the test process itself (a thread beside the harness' writers,
one interpreter lock), dozens of vmalerts timed out against it on a loaded machine
(``context deadline exceeded``), their groups missed iterations, and pages ended and started again.
In its own process, in its own session (a scheduler group of its own, gpumon.priority), it answers
within milliseconds.

``python tests/notifier_sink.py`` prints its URL on the first line of stdout and serves until stopped.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from http.server import BaseHTTPRequestHandler

from gpumon.loopback import BurstServer


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 - http.server API
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


class NotifierSink:
    """The sink as a child process, stopped by PID on exit: ``with NotifierSink() as sink: sink.url``."""

    def __init__(self):
        self.proc: subprocess.Popen | None = None
        self.url = ""

    def __enter__(self) -> NotifierSink:
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__))], stdout=subprocess.PIPE,
                                     text=True, start_new_session=True)
        self.url = self.proc.stdout.readline().strip()
        if not self.url.startswith("http://127.0.0.1:"):
            self.__exit__()
            raise RuntimeError(f"the notifier sink did not start (exit {self.proc.returncode})")
        return self

    def __exit__(self, *exc) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
        if self.proc:
            self.proc.wait(timeout=10)
            self.proc.stdout.close()


def main() -> None:
    server = BurstServer(("127.0.0.1", 0), _Handler)
    print(f"http://127.0.0.1:{server.server_address[1]}/", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
