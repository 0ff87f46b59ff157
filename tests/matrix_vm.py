"""The fault-scenario matrix (tests/matrix.py) on the other engine: VictoriaMetrics stores the
virtual scrapes and vmalert evaluates the rendered rules on them in replay mode.

Every scenario's samples (the same :class:`tests.matrix.Scrape` output promtool reads, staleness
markers included) go into **one** VictoriaMetrics through its Prometheus remote-write endpoint
(``/api/v1/write``: the one import path that keeps a staleness marker, which is a NaN with a
particular bit pattern that the JSON and text imports cannot spell). Each scenario gets its own
slice of time, separated from the next by more than the compressed rules' windows, so no scenario
sees another's series (the one longer window, GpuExporterDown's 1 h node-name lookup, finds the same
names in every scenario: docs/matrix.md). **One** ``vmalert -replay.timeFrom/-replay.timeTo`` run per rule file (the plain
spec and the cluster spec) then evaluates every rule over the whole range with range queries, one
rule after the other, and writes recording results and ``ALERTS`` back to VictoriaMetrics; the
firing pages at each check time are read back with ``/api/v1/export`` (raw samples, no lookback)
and compared with the scenario's expected pages.

Where vmalert and VictoriaMetrics genuinely differ from Prometheus a case says so in
``Case.vm_pages`` (the pages expected on this engine), and docs/matrix.md explains why.

Source for the replay mode: VictoriaMetrics ``docs/vmalert.md``, section "Rules backfilling".
"""

from __future__ import annotations

import json
import math
import shutil
import struct
import subprocess
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import httpx

from generator.localprom import LocalVictoriaMetrics, free_port
from generator.render import render
from generator.ruletests.series import MISSING, STALE
from generator.spec import Spec
from tests.matrix import IDENTITY, STEP, Case, Outcome, Scrape, matrix_spec

#: Prometheus' staleness marker: a NaN with this bit pattern (prometheus ``model/value/value.go``)
STALE_NAN_BITS = 0x7FF0000000000002
#: evaluation interval of the groups without their own (promtool's ``evaluation_interval``)
EVAL = STEP // 2
#: virtual time between the end of one scenario and the start of the next: more than the longest
#: compressed range (inventory lookback 5m) plus the longest ``for``
GAP = 20 * 60


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, data: bytes) -> bytes:
    """A length-delimited protobuf field."""
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def snappy_block(data: bytes) -> bytes:
    """``data`` as a snappy block of literals only (valid snappy, no compression): the remote-write
    body encoding, without a snappy dependency. Format: google/snappy ``format_description.txt``."""
    out = bytearray(_varint(len(data)))
    for i in range(0, len(data), 1 << 16):
        chunk = data[i:i + (1 << 16)]
        n = len(chunk) - 1
        if n < 60:
            out.append(n << 2)
        elif n < 256:
            out += bytes([60 << 2, n])
        else:
            out += bytes([61 << 2]) + struct.pack("<H", n)
        out += chunk
    return bytes(out)


def _double(value) -> bytes:
    if value == STALE:
        return struct.pack("<Q", STALE_NAN_BITS)
    return struct.pack("<d", float(value))


def write_request(series: list[tuple[dict[str, str], list[tuple[int, object]]]]) -> bytes:
    """A Prometheus remote-write ``WriteRequest`` (prometheus ``prompb/remote.proto``,
    ``types.proto``): ``series`` is [(labels with ``__name__``, [(timestamp ms, value or STALE)])]."""
    body = bytearray()
    for labels, samples in series:
        ts = b"".join(_field(1, _field(1, k.encode()) + _field(2, v.encode())) for k, v in sorted(labels.items()))
        ts += b"".join(_field(2, b"\x09" + _double(v) + b"\x10" + _varint(t)) for t, v in samples)
        body += _field(1, ts)
    return bytes(body)


def _labels(key: tuple) -> dict[str, str]:
    name, labels = key
    return {"__name__": name, **dict(labels)}


class VictoriaMetrics(LocalVictoriaMetrics):
    """The replay's VictoriaMetrics: :class:`~generator.localprom.LocalVictoriaMetrics` that takes
    remote writes of the past and reads them back at once."""

    def __init__(self):
        # -search.disableCache: the replay reads back what it wrote a second ago for past times,
        # which the rollup result cache would otherwise answer from before the write
        super().__init__(extra_args=["-search.disableCache", "-search.maxPointsPerTimeseries=100000"])

    def write(self, series: list[tuple[dict[str, str], list[tuple[int, object]]]]) -> None:
        """Remote-write ``series`` (see :func:`write_request`), in batches."""
        for i in range(0, len(series), 500):
            body = snappy_block(write_request(series[i:i + 500]))
            res = httpx.post(f"{self.url}/api/v1/write", content=body, timeout=60,
                             headers={"Content-Encoding": "snappy", "Content-Type": "application/x-protobuf",
                                      "X-Prometheus-Remote-Write-Version": "0.1.0"})
            res.raise_for_status()

    def flush(self) -> None:
        """Make everything written so far searchable (``/internal/force_flush``)."""
        httpx.get(f"{self.url}/internal/force_flush", timeout=60).raise_for_status()

    def export(self, match: str, start: int, end: int) -> list[dict]:
        """Raw samples of ``match`` in [start, end] (seconds): ``/api/v1/export`` lines."""
        res = httpx.post(f"{self.url}/api/v1/export", data={"match[]": match, "start": start, "end": end}, timeout=120)
        res.raise_for_status()
        return [json.loads(line) for line in res.text.splitlines() if line.strip()]


def _rfc3339(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def replay(vm: VictoriaMetrics, rules: Path, start: int, end: int, log: Path, rules_delay: str = "1s") -> str:
    """``vmalert`` in replay mode over [start, end] on ``vm``: evaluates every rule of ``rules`` with
    range queries and writes the results (``ALERTS`` included) back. Returns its output.

    The whole range is one range query per rule (``-replay.maxDatapointsPerQuery`` above the
    number of steps): vmalert 1.79 starts the ``for`` of every alert afresh at each chunk boundary.
    ``-replay.rulesDelay`` lets a recording rule's output reach storage before the next rule reads it.
    ``-datasource.queryStep`` is the step of every range query (vmalert 1.79 does not use the
    group's interval there; its default, 5m, leaves one result every 5 minutes): every group is
    evaluated every :data:`EVAL` seconds, the 10 s groups (coverage, gaps) included.
    """
    points = (end - start) // EVAL + 10
    cmd = ["vmalert", f"-rule={rules}", f"-datasource.url={vm.url}", f"-remoteWrite.url={vm.url}",
           f"-replay.timeFrom={_rfc3339(start)}", f"-replay.timeTo={_rfc3339(end)}",
           f"-evaluationInterval={EVAL}s", f"-datasource.queryStep={EVAL}s",
           f"-replay.maxDatapointsPerQuery={points}",
           f"-replay.rulesDelay={rules_delay}", "-remoteWrite.flushInterval=200ms", "-replay.disableProgressBar",
           f"-httpListenAddr=127.0.0.1:{free_port()}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    log.write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        raise RuntimeError(f"vmalert replay failed ({proc.returncode}):\n{(proc.stdout + proc.stderr)[-4000:]}")
    return proc.stdout + proc.stderr


def _page_text(labels: dict[str, str], ids: tuple[str, ...]) -> str:
    """A page as promtool prints it: ``{Hostname="gpu-node-2", alertname="GpuLost", gpu="1"}``."""
    return "{" + ", ".join(f'{k}="{labels[k]}"' for k in sorted(ids) if k in labels) + "}"


def expected(case: Case) -> list[tuple[int, tuple]]:
    """(step, pages) checks of ``case`` on this engine (``Case.vm_pages`` where it differs)."""
    return case.checks(vm=True)


def run(cases: list[Case], keep: Path | None = None) -> tuple[list[Outcome], float, str]:
    """Run every case on one VictoriaMetrics with one vmalert replay per spec (plain / cluster).

    Returns:
        (outcomes, seconds, vmalert's output); an outcome's ``seen`` has the pages seen at every
        check (not only at failed ones), as promtool prints them.
    """
    for binary in ("victoria-metrics", "vmalert"):
        if not shutil.which(binary):
            raise FileNotFoundError(f"{binary} not found: `make test` installs Debian's victoria-metrics package")
    t0 = time.monotonic()
    logs = []
    outcomes: dict[str, Outcome] = {}
    # whole days back from now (inside the retention, a multiple of every interval)
    origin = (int(time.time()) // 86400 - 3) * 86400
    with tempfile.TemporaryDirectory(prefix="gpumon-matrix-vm-") as tmp:
        folder = Path(keep or tmp)
        folder.mkdir(parents=True, exist_ok=True)
        with VictoriaMetrics() as vm:
            for clusters in (False, True):
                chosen = [c for c in cases if c.clusters == clusters]
                if not chosen:
                    continue
                spec = matrix_spec(clusters)
                rules = folder / f"rules-{'cluster' if clusters else 'plain'}.yaml"
                rules.write_text(render(spec)["rules/gpumon.rules.yaml"])
                starts, at = [], origin
                for case in chosen:
                    starts.append(at)
                    _write_case(vm, case, spec, at)
                    at += case.steps * STEP + GAP
                    at -= at % 60
                vm.flush()
                logs.append(replay(vm, rules, origin, at, folder / f"vmalert-{rules.stem}.log"))
                vm.flush()
                ids = IDENTITY + (("cluster",) if clusters else ())
                firing = _firing(vm.export('ALERTS{alertstate="firing",severity=~"critical|warning"}', origin, at), ids)
                for case, start in zip(chosen, starts):
                    ok, seen = True, {}
                    for step, pages in expected(case):
                        got = sorted(firing.get(start + step * STEP + EVAL, ()))
                        want = sorted(_page_text(p.labels(clusters), ids) for p in pages)
                        seen[step] = got
                        ok &= got == want
                    outcomes[case.name] = Outcome(case, ok, seen)
                origin = at   # the next spec's scenarios start after this one's, a gap apart
    return [outcomes[c.name] for c in cases], time.monotonic() - t0, "\n".join(logs)


def _write_case(vm: VictoriaMetrics, case: Case, spec: Spec, start: int) -> None:
    scrape = Scrape(case, spec)
    scrape.run()
    series = []
    for key, row in scrape.series.items():
        samples = [((start + i * STEP) * 1000, v) for i, v in enumerate(row) if v != MISSING]
        if samples:
            series.append((_labels(key), samples))
    vm.write(series)


def _firing(lines: list[dict], ids: tuple[str, ...]) -> dict[int, list[str]]:
    """timestamp (s) -> pages firing then, one entry per ALERTS series (so a page firing twice,
    under two label sets that agree on the identity labels, shows twice)."""
    out: dict[int, list[str]] = {}
    for line in lines:
        text = _page_text(line["metric"], ids)
        for ts, value in zip(line["timestamps"], line["values"]):
            if value is not None and not (isinstance(value, float) and math.isnan(value)) and value == 1:
                out.setdefault(ts // 1000, []).append(text)
    return out


def table(outcomes: list[Outcome]) -> str:
    """Markdown rows: scenario -> pages vmalert fired at each check."""
    rows = ["| # | scenario | pages seen (vmalert replay) |", "|---|---|---|"]
    for i, o in enumerate(outcomes, 1):
        seen = "; ".join(f"t={s * STEP}s: {', '.join(g) or 'nothing'}" for s, g in sorted(o.seen.items()))
        rows.append(f"| {i} | {o.case.name} | {'' if o.ok else 'FAILED: '}{seen} |")
    return "\n".join(rows)


__all__ = ["run", "replay", "table", "VictoriaMetrics", "write_request", "snappy_block", "expected"]
