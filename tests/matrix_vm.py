"""The fault-scenario matrix (tests/matrix.py) on the other engine: VictoriaMetrics stores the
virtual scrapes and vmalert evaluates the rendered rules on them in replay mode.

Every scenario's samples (the same :class:`tests.matrix.Scrape` output promtool reads, staleness
markers included) go into **one** VictoriaMetrics through its Prometheus remote-write endpoint
(``/api/v1/write``: the one import path that keeps a staleness marker, which is a NaN with a
particular bit pattern that the JSON and text imports cannot spell). Each scenario gets its own
slice of time, separated from the next by more than the compressed rules' windows, so no scenario
sees another's series (the one longer window, GpuExporterDown's 1 h node-name lookup, finds the same
names in every scenario: docs/matrix.md). ``vmalert -replay.timeFrom/-replay.timeTo`` then
evaluates every rule of each rule file (the plain spec and the cluster spec) over the whole range
with range queries, one rule after the other, in layers of chained rules (one vmalert run per
layer, :mod:`tests.matrix_layers`), and writes recording results and ``ALERTS`` back to
VictoriaMetrics; the
firing pages at each check time are read back with ``/api/v1/export`` (raw samples, no lookback)
and compared with the scenario's expected pages.

vmalert's remote writes go through :class:`FlushingWriteProxy` (``-remoteWrite.url``; the queries,
``-datasource.url``, go to VictoriaMetrics directly). It forwards each write unchanged and answers
vmalert only after two more steps, each standing in for something the live setup has and the
replay lacks:

* **Staleness markers.** Live vmalert writes a staleness marker for every series a rule wrote at
  its previous evaluation and not at this one (``executor.getStaleSeries`` in vmalert 1.79); replay
  mode (``app/vmalert/replay.go``: ``ExecRange`` results pushed as they are) writes none. The sparse
  recording rules (a ``job_gpu:dcgm_field_missing:group`` series exists only while the field is
  missing) depend on them: without a marker, VictoriaMetrics' bare-selector lookbehind, sized from
  the median gap between the series' own samples, keeps a series whose samples are far apart
  visible for up to that gap. Measured on the first spec: the missing-GPU-temperature series of
  gpu-node-1 and gpu-node-3 hold only one sample per scenario (its last step, where the recorded
  inventory outlives the raw field by one step), ~1,500 s apart, and a range query over the whole
  replay showed them "missing" from 485 s to the end, so ``GpuNodeMetricMissing`` paged for them in
  every scenario. The proxy adds the markers live vmalert would write, at the first step of the
  replay's evaluation grid (:data:`EVAL`) after each sample that has no successor
  (:func:`staleness_markers`), for every recorded series (``ALERTS`` aside: :data:`UNMARKED`).
* **A flush.** VictoriaMetrics 1.79 makes a series it has never seen searchable only about 10 s after
  its first sample (new samples of a known series in ~0.2 s); ``GET /internal/force_flush`` makes
  everything searchable at once. A layer's vmalert run ends only after its remote-write queue is
  flushed, and the proxy answers each write only after the flush, so everything a layer wrote, new
  series included, is searchable when the next layer starts. That is legitimate because live
  vmalert evaluates a group every 30 s or more, so by the next evaluation a new series is
  searchable anyway; the 10 s matter only when rules are replayed back to back.

Measured on the first spec (34 scenarios, one run with ``-replay.rulesDelay=1s``): flush without
markers, 82 failing checks (the same 82 with ``-replay.rulesDelay=3s``); markers without flush, 12
(pages that did not come); both, none.

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
import threading
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx

from gpumon.localprom import LocalVictoriaMetrics
from gpumon.loopback import ServedInThread, free_port
from gpumon.ruletests.series import MISSING, STALE
from gpumon.spec import Spec
from tests import matrix_layers
from tests.engines import VmEngine
from tests.matrix import IDENTITY, STEP, Case, Outcome, matrix_spec, rules_text, scraped

#: Prometheus' staleness marker: a NaN with this bit pattern (prometheus ``model/value/value.go``)
STALE_NAN_BITS = 0x7FF0000000000002
#: evaluation interval of the groups without their own: half a step, so vmalert evaluates between scrapes
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


def post_series(post, url: str, series: list[tuple[dict[str, str], list[tuple[int, object]]]]) -> None:
    """Remote-write ``series`` (see :func:`write_request`) to ``url``'s ``/api/v1/write`` in batches of
    500, with ``post`` (``httpx.post`` or a client's); raises httpx.HTTPStatusError on a refusal."""
    for i in range(0, len(series), 500):
        res = post(f"{url}/api/v1/write", content=snappy_block(write_request(series[i:i + 500])), timeout=60,
                   headers={"Content-Encoding": "snappy", "Content-Type": "application/x-protobuf",
                            "X-Prometheus-Remote-Write-Version": "0.1.0"})
        res.raise_for_status()


def _labels(key: tuple) -> dict[str, str]:
    name, labels = key
    return {"__name__": name, **dict(labels)}


class VictoriaMetrics(LocalVictoriaMetrics):
    """The replay's VictoriaMetrics: :class:`~gpumon.localprom.LocalVictoriaMetrics` that takes
    remote writes of the past and reads them back at once."""

    def __init__(self, binary: str = "victoria-metrics"):
        # -search.disableCache: the replay reads back what it wrote a second ago for past times,
        # which the rollup result cache would otherwise answer from before the write
        super().__init__(extra_args=["-search.disableCache", "-search.maxPointsPerTimeseries=100000"], binary=binary)

    def write(self, series: list[tuple[dict[str, str], list[tuple[int, object]]]]) -> None:
        """Remote-write ``series`` (see :func:`write_request`), in batches."""
        post_series(httpx.post, self.url, series)

    def flush(self) -> None:
        """Make everything written so far searchable (``/internal/force_flush``)."""
        httpx.get(f"{self.url}/internal/force_flush", timeout=60).raise_for_status()

    def export(self, match: str, start: int, end: int) -> list[dict]:
        """Raw samples of ``match`` in [start, end] (seconds): ``/api/v1/export`` lines."""
        res = httpx.post(f"{self.url}/api/v1/export", data={"match[]": match, "start": start, "end": end}, timeout=120)
        res.raise_for_status()
        return [json.loads(line) for line in res.text.splitlines() if line.strip()]


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        n |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return n, pos


def snappy_decode(buf: bytes) -> bytes:
    """Decode a snappy block (google/snappy ``format_description.txt``): what vmalert's remote
    write sends (``golang/snappy`` ``Encode``), without a snappy dependency."""
    size, pos = _read_varint(buf, 0)
    out = bytearray()
    while pos < len(buf):
        tag = buf[pos]
        pos += 1
        kind = tag & 3
        if kind == 0:                                   # literal
            n = tag >> 2
            if n >= 60:
                extra = n - 59
                n = int.from_bytes(buf[pos:pos + extra], "little")
                pos += extra
            out += buf[pos:pos + n + 1]
            pos += n + 1
            continue
        if kind == 1:                                   # copy, 1-byte offset
            length, offset = ((tag >> 2) & 7) + 4, (tag >> 5) << 8 | buf[pos]
            pos += 1
        elif kind == 2:                                 # copy, 2-byte offset
            length, offset = (tag >> 2) + 1, int.from_bytes(buf[pos:pos + 2], "little")
            pos += 2
        else:                                           # copy, 4-byte offset
            length, offset = (tag >> 2) + 1, int.from_bytes(buf[pos:pos + 4], "little")
            pos += 4
        start = len(out) - offset
        if offset >= length:
            out += out[start:start + length]
        else:                                           # overlapping copy: repeats the last `offset` bytes
            for i in range(length):
                out.append(out[start + i])
    if len(out) != size:
        raise ValueError(f"snappy: {len(out)} bytes decoded, header says {size}")
    return bytes(out)


def _pb_fields(buf: bytes):
    """(field number, value) of a protobuf message: bytes for length-delimited and fixed64 fields,
    int for varints (the only wire types a remote-write request uses)."""
    pos = 0
    while pos < len(buf):
        key, pos = _read_varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _read_varint(buf, pos)
        elif wire == 1:
            value, pos = buf[pos:pos + 8], pos + 8
        elif wire == 2:
            n, pos = _read_varint(buf, pos)
            value, pos = buf[pos:pos + n], pos + n
        elif wire == 5:
            value, pos = buf[pos:pos + 4], pos + 4
        else:
            raise ValueError(f"protobuf wire type {wire} not expected in a WriteRequest")
        yield number, value


def parse_write_request(body: bytes) -> list[tuple[dict[str, str], list[tuple[int, float]]]]:
    """The inverse of :func:`write_request` (uncompressed body): [(labels, [(timestamp ms, value)])]."""
    series = []
    for number, ts in _pb_fields(body):
        if number != 1:
            continue
        labels, samples = {}, []
        for fnum, value in _pb_fields(ts):
            if fnum == 1:
                label = dict(_pb_fields(value))
                labels[label.get(1, b"").decode()] = label.get(2, b"").decode()
            elif fnum == 2:
                sample = dict(_pb_fields(value))
                t = sample.get(2, 0)
                samples.append((t - (1 << 64) if t >= 1 << 63 else t, struct.unpack("<d", sample.get(1, bytes(8)))[0]))
        series.append((labels, samples))
    return series


def staleness_markers(samples: list[tuple[int, float]], step_ms: int) -> list[int]:
    """Timestamps (ms) where live vmalert would write a staleness marker for a rule's series that
    has ``samples`` on a ``step_ms`` evaluation grid: the first evaluation after each sample that
    has no sample (vmalert's ``executor.getStaleSeries``: a series sent at the previous evaluation
    and not at this one gets a stale NaN at this evaluation's time)."""
    times = sorted({t for t, _ in samples})
    return [t + step_ms for t, nxt in zip(times, times[1:] + [None]) if nxt is None or nxt - t > step_ms]


#: series the proxy writes no staleness markers for: the replay sends an alert's ``ALERTS`` and
#: ``ALERTS_FOR_STATE`` as one single-sample series per evaluation step, spread over several writes,
#: so no one write shows where such a series ends. gpumon reads ``ALERTS`` only through
#: ``max_over_time(ALERTS{...}[3m])`` (an explicit window, which no lookback and no marker changes),
#: and this test reads it as raw samples, so the markers live vmalert writes for them change nothing
UNMARKED = ("ALERTS", "ALERTS_FOR_STATE")

#: the remote-write headers the proxy passes on to VictoriaMetrics
FORWARDED_HEADERS = ("Content-Encoding", "Content-Type", "X-Prometheus-Remote-Write-Version")


class FlushingWriteProxy(ServedInThread):
    """vmalert's ``-remoteWrite.url`` during a replay, in front of VictoriaMetrics ``vm_url``.

    For every ``POST /api/v1/write`` it

    1. forwards the body to ``{vm_url}/api/v1/write`` (headers :data:`FORWARDED_HEADERS` copied);
    2. if ``step`` (seconds) is given, writes the staleness markers live vmalert would have written
       for the series in it (:func:`staleness_markers`; replay mode writes none, see the module
       docstring), one evaluation step after a sample without successor: ``steps`` maps a recorded
       name to its own step where that is not ``step`` (:func:`group_steps`);
    3. calls ``GET {vm_url}/internal/force_flush``, so a series VictoriaMetrics has never seen is
       searchable at once rather than about 10 s later;
    4. only then answers vmalert, with VictoriaMetrics' status for the forwarded body.

    ``log`` keeps (monotonic start, end, bytes, status) per request; ``markers`` counts the
    staleness markers written; ``repeated`` counts recorded series (label sets, :data:`UNMARKED`
    aside) that arrived in more than one write, where a marker computed from one write could fall
    on a sample of another (0 in every run of the matrix: each recording rule sends each of its
    series once, with all its samples).
    """

    def __init__(self, vm_url: str, step: int | None = None, steps: dict[tuple, int] | None = None):
        self.vm_url = vm_url.rstrip("/")
        self.step_ms = step * 1000 if step else None
        #: (recorded name, dcgm_field or None) -> its evaluation step (ms), where it is not ``step``
        self.steps_ms = {key: s * 1000 for key, s in (steps or {}).items()}
        self.port = free_port()
        self.lock = threading.Lock()
        self.log: list[tuple[float, float, int, int]] = []
        self.seen: set[tuple] = set()
        self.repeated = 0
        self.markers = 0
        outer = self
        client = httpx.Client(timeout=120)

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):  # noqa: N802 - http.server API
                t0 = time.monotonic()
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Content-Encoding", "snappy") != "snappy":
                    # vmalert after 1.79 first sends VictoriaMetrics' own remote-write protocol
                    # (zstd) and switches to Prometheus' (snappy) for good on a 415: the proxy
                    # reads Prometheus' only (VictoriaMetrics/VictoriaMetrics#8462)
                    self.send_response(415)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                headers = {h: self.headers[h] for h in FORWARDED_HEADERS if self.headers.get(h)}
                try:
                    res = client.post(f"{outer.vm_url}/api/v1/write", content=body, headers=headers)
                    status, text = res.status_code, res.content
                    if status < 300 and outer.step_ms:
                        outer._write_markers(client, body)
                    if status < 300:
                        client.get(f"{outer.vm_url}/internal/force_flush").raise_for_status()
                except (httpx.HTTPError, ValueError) as err:
                    status, text = 502, str(err).encode()
                with outer.lock:
                    outer.log.append((t0, time.monotonic(), len(body), status))
                self.send_response(status)
                self.send_header("Content-Length", str(len(text)))
                self.end_headers()
                self.wfile.write(text)

            def log_message(self, *args):  # keep test output clean
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def _write_markers(self, client: httpx.Client, body: bytes) -> None:
        merged: dict[tuple, list[tuple[int, float]]] = {}
        for labels, samples in parse_write_request(snappy_decode(body)):
            if labels.get("__name__") in UNMARKED:
                continue
            merged.setdefault(tuple(sorted(labels.items())), []).extend(samples)
        stale = []
        for key, samples in merged.items():
            with self.lock:
                self.repeated += key in self.seen
                self.seen.add(key)
            labels = dict(key)
            step = self.steps_ms.get((labels.get("__name__"), labels.get("dcgm_field")),
                                     self.steps_ms.get((labels.get("__name__"), None), self.step_ms))
            marks = staleness_markers(samples, step)
            if marks:
                stale.append((dict(key), [(t, STALE) for t in marks]))
        post_series(client.post, self.vm_url, stale)
        with self.lock:
            self.markers += sum(len(s) for _, s in stale)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def _rfc3339(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def replay(vm: VictoriaMetrics, rules: Path, start: int, end: int, log: Path, rules_delay: str = "0s",
           extra: list[str] = (), stale_markers: bool = True, vmalert: str = "vmalert",
           own_steps: bool = False) -> str:
    """``vmalert`` in replay mode over [start, end] on ``vm``: evaluates every rule of ``rules`` with
    range queries and writes the results (``ALERTS`` included) back. Returns its output.

    The rules run in layers (:mod:`tests.matrix_layers`), one vmalert run per layer, each run
    ending with its remote-write queue flushed: a chained rule reads what the rules before it wrote
    because their run has ended, not because ``-replay.rulesDelay`` slept long enough, so the delay
    between rules is 0.

    The whole range is one range query per rule (``-replay.maxDatapointsPerQuery`` above the
    number of steps): vmalert 1.79 starts the ``for`` of every alert afresh at each chunk boundary.
    ``-datasource.queryStep`` is the step of every range query (vmalert 1.79 does not use the
    group's interval there; its default, 5m, leaves one result every 5 minutes): every group is
    evaluated every :data:`EVAL` seconds, the 10 s groups (coverage, gaps) included.
    vmalert writes through :class:`FlushingWriteProxy` (staleness markers unless ``stale_markers``
    is false, and a flush); the proxy's summary line ends the output. ``vmalert``: the binary;
    ``own_steps``: it evaluates each group over a range at the group's own interval (vmalert after
    1.79: ``-datasource.queryStep`` applies to instant queries only), so a series' staleness marker
    goes one group interval after its last sample.
    """
    points = (end - start) // EVAL + 10
    steps = group_steps(rules) if own_steps else None
    out = ""
    with FlushingWriteProxy(vm.url, step=EVAL if stale_markers else None, steps=steps) as proxy:
        for n, text in enumerate(matrix_layers.layers(rules.read_text())):
            part = rules.with_name(f"{rules.stem}.layer{n}.yaml")
            part.write_text(text)
            out += _replay(vm, proxy, part, start, end, log.with_name(f"{log.stem}.layer{n}.log"), rules_delay,
                           points, [*extra], vmalert)
    slowest = max((b - a for a, b, _, _ in proxy.log), default=0.0)
    summary = (f"write proxy: {len(proxy.log)} writes (slowest {slowest:.2f} s with the flush), "
               f"{proxy.markers} staleness markers, {proxy.repeated} recorded series in more than one write\n")
    log.write_text(out + summary)
    return out + summary


def group_steps(rules: Path) -> dict[tuple[str, str | None], int]:
    """(recorded name, its rule's ``dcgm_field`` label or None) -> interval (seconds) of the group
    that writes it, for the groups of ``rules`` with an ``interval`` of their own (the others are
    evaluated every :data:`EVAL` seconds). The field tells apart one name recorded in two groups
    (the missing sets of required fields in the inventory, of optional ones in coverage)."""
    import yaml
    from gpumon.durations import parse_duration
    out = {}
    for group in yaml.safe_load(rules.read_text())["groups"]:
        for rule in group["rules"] if "interval" in group else ():
            if "record" in rule:
                out[(rule["record"], (rule.get("labels") or {}).get("dcgm_field"))] = int(parse_duration(group["interval"]))
    return out


def _replay(vm, proxy, rules, start, end, log, rules_delay, points, extra, vmalert) -> str:
    cmd = [vmalert, f"-rule={rules}", f"-datasource.url={vm.url}", f"-remoteWrite.url={proxy.url}",
           f"-replay.timeFrom={_rfc3339(start)}", f"-replay.timeTo={_rfc3339(end)}",
           f"-evaluationInterval={EVAL}s", f"-datasource.queryStep={EVAL}s",
           f"-replay.maxDatapointsPerQuery={points}",
           f"-replay.rulesDelay={rules_delay}", "-remoteWrite.flushInterval=200ms", "-replay.disableProgressBar",
           f"-httpListenAddr=127.0.0.1:{free_port()}", *extra]
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


def run(cases: list[Case], keep: Path | None = None, engine: "VmEngine | None" = None) -> tuple[list[Outcome], float, str]:
    """Run every case on one VictoriaMetrics with one vmalert replay per spec (plain / cluster), of
    ``engine``'s build (default: ``victoria-metrics`` and ``vmalert`` on PATH, Debian's).

    Returns:
        (outcomes, seconds, vmalert's output); an outcome's ``seen`` has the pages seen at every
        check (not only at failed ones), as promtool prints them.
    """
    vm_binary, vmalert = (engine.victoria_metrics, engine.vmalert) if engine else ("victoria-metrics", "vmalert")
    for binary in (vm_binary, vmalert):
        if not shutil.which(binary):
            raise FileNotFoundError(f"{binary} not found: `make test` installs Debian's victoria-metrics package "
                                    "and builds the current one (`make tools`)")
    t0 = time.monotonic()
    logs = []
    outcomes: dict[str, Outcome] = {}
    # whole days back from now (inside the retention, a multiple of every interval)
    origin = (int(time.time()) // 86400 - 3) * 86400
    with tempfile.TemporaryDirectory(prefix="gpumon-matrix-vm-") as tmp:
        folder = Path(keep or tmp)
        folder.mkdir(parents=True, exist_ok=True)
        with VictoriaMetrics(vm_binary) as vm:
            for clusters in (False, True):
                chosen = [c for c in cases if c.clusters == clusters]
                if not chosen:
                    continue
                spec = matrix_spec(clusters)
                rules = folder / f"rules-{'cluster' if clusters else 'plain'}.yaml"
                rules.write_text(rules_text(spec))
                starts, at = [], origin
                for case in chosen:
                    starts.append(at)
                    _write_case(vm, case, spec, at)
                    at += case.steps * STEP + GAP
                    at -= at % 60
                vm.flush()
                logs.append(replay(vm, rules, origin, at, folder / f"vmalert-{rules.stem}.log", vmalert=vmalert,
                                   own_steps=bool(engine and engine.current)))
                vm.flush()
                ids = IDENTITY + (("cluster",) if clusters else ())
                firing = _firing(vm.export('ALERTS{alertstate="firing",severity=~"critical|warning"}', origin, at), ids)
                every = alert_steps(rules) if engine and engine.current else {}
                for case, start in zip(chosen, starts):
                    ok, seen = True, {}
                    for step, pages in expected(case):
                        got = sorted(firing_at(firing, start + step * STEP + EVAL, every))
                        want = sorted(_page_text(p.labels(clusters), ids) for p in pages)
                        seen[step] = got
                        ok &= got == want
                    outcomes[case.name] = Outcome(case, ok, seen)
                origin = at   # the next spec's scenarios start after this one's, a gap apart
    return [outcomes[c.name] for c in cases], time.monotonic() - t0, "\n".join(logs)


def _write_case(vm: VictoriaMetrics, case: Case, spec: Spec, start: int) -> None:
    scrape = scraped(case, spec)
    series = []
    for key, row in scrape.series.items():
        samples = [((start + i * STEP) * 1000, v) for i, v in enumerate(row) if v != MISSING]
        if samples:
            series.append((_labels(key), samples))
    vm.write(series)


def alert_steps(rules: Path) -> dict[str, int]:
    """alert name -> interval (seconds) of the group that evaluates it, for the groups of ``rules``
    with an ``interval`` of their own (the others: :data:`EVAL`)."""
    import yaml
    from gpumon.durations import parse_duration
    return {rule["alert"]: int(parse_duration(group["interval"]))
            for group in yaml.safe_load(rules.read_text())["groups"] if "interval" in group
            for rule in group["rules"] if "alert" in rule}


def firing_at(firing: dict[int, list[str]], when: int, every: dict[str, int]) -> list[str]:
    """The pages firing at ``when`` (seconds): each ALERTS series' sample of the group's last
    evaluation at or before ``when``, i.e. in (``when`` - its group's interval, ``when``]. A group
    evaluated every :data:`EVAL` seconds wrote at ``when`` itself; one with a longer interval of its
    own (vmalert after 1.79 replays each group at its own interval, ``every``: alert name ->
    interval) may have written last up to that interval before (read at ``when`` only, its pages
    were never seen: vmalert 1.151's 10 s group wrote at :data:`STEP` multiples, the checks fall
    :data:`EVAL` after them)."""
    out = []
    for ts in range(when - max(every.values(), default=EVAL) + 1, when + 1):
        for text in firing.get(ts, ()):
            name = text.split('alertname="', 1)[1].split('"', 1)[0]
            if ts > when - every.get(name, EVAL):
                out.append(text)
    return out


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
