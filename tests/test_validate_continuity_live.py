"""The continuity check against a REAL Prometheus (each build) scraping targets whose label sets
change under a running target, at one address all along (a static target, a host-network
exporter restarted): a label set that began within the lookback is judged on the scrapes since it
was first seen, not on the scrapes before it existed.

Five targets, scraped every second, their bodies changed by a ticker: ``spell`` (an exporter
upgrade respelled ``Hostname`` as ``hostname``), ``mig`` (a MIG instance created), ``miggap`` (a
MIG instance created that then misses every other scrape: a gap), ``back`` (a GPU that fell off
the bus for 12 s within the lookback and came back: a gap), ``steady``."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from click.testing import CliRunner

from gpumon.cli import cli
from gpumon.localprom import LocalPrometheus

SPEC = """\
version: 1
exporter:
  job: dcgm-exporter
  scrape_interval: 1s
  scrape_timeout: 1s
  collect_interval: 1s
metrics:
  - name: DCGM_FI_DEV_GPU_TEMP
    kind: gauge
    unit: celsius
    presence: required
"""


def _gpu(node: str, uuid: str, node_label: str = "Hostname", mig: str = "") -> str:
    extra = f',GPU_I_ID="{mig}"' if mig else ""
    return f'DCGM_FI_DEV_GPU_TEMP{{gpu="0",UUID="{uuid}",{node_label}="{node}"{extra}}} 50\n'


def _body(name: str, changed: bool, tick: int) -> str:
    if name == "spell":
        return _gpu("spell", "GPU-s", "hostname" if changed else "Hostname")
    if name == "mig":
        return _gpu("mig", "GPU-m", mig="1" if changed else "")
    if name == "miggap":
        return _gpu("miggap", "GPU-g") if not changed else _gpu("miggap", "GPU-g", mig="1") if tick % 2 else "other 1\n"
    if name == "back":
        return "other 1\n" if 8 <= tick < 20 else _gpu("back", "GPU-b")
    return _gpu("steady", "GPU-t")


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802
        body = self.server.body().encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_label_sets_new_within_the_lookback_are_judged_since_first_seen(engine, tmp_path):
    (tmp_path / "spec.yaml").write_text(SPEC)
    state = {"changed": False, "tick": 0}
    servers = {}
    for name in ("spell", "mig", "miggap", "back", "steady"):
        srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        srv.body = lambda name=name: _body(name, state["changed"], state["tick"])
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers[name] = srv
    try:
        targets = [f"127.0.0.1:{srv.server_port}" for srv in servers.values()]
        with LocalPrometheus({"dcgm-exporter": targets}, binary=engine.prometheus) as prom:
            time.sleep(8)
            start = time.monotonic()
            def tick():
                while not state.get("stop"):
                    state["tick"] = int(time.monotonic() - start)
                    time.sleep(0.1)
            threading.Thread(target=tick, daemon=True).start()
            time.sleep(12)
            state["changed"] = True
            time.sleep(18)
            result = CliRunner().invoke(cli, ["validate", str(tmp_path / "spec.yaml"), "--prom", prom.url,
                                              "--lookback", "30s", "--checks", "continuity", "--format", "json"])
            state["stop"] = True
    finally:
        for srv in servers.values():
            srv.shutdown()
    report = json.loads(result.output[result.output.index("{"):])
    messages = [f["message"] for f in report["findings"] if f["check"] == "series-intermittent"]
    assert len(messages) == 1, report["findings"]
    assert "miggap gpu 0 (GPU-g MIG 1)" in messages[0] and "back gpu 0 (GPU-b)" in messages[0], messages
    assert "spell" not in messages[0] and "(GPU-m" not in messages[0], messages
