"""The pure parts of the fleet-scale benchmark (``bench/fleet.py``): no servers, no subprocesses,
so ``tests/test_bench_fleet.py`` covers them in the fast tier.

- :func:`fault_set` / :func:`render_pages`: dcgm-exporter 4.x pages of N nodes x 8 GPUs rendered
  once by :class:`gpumon.simulate.Fleet` (the real label set ``gpu, UUID, pci_bus_id, device,
  modelName, Hostname, DCGM_FI_DRIVER_VERSION`` and the fields of dcgm-exporter's
  ``default-counters.csv``), with the benchmark's faults;
- :func:`scrape_config`: one scrape target per node on one port (a per-node ``__metrics_path__``
  and an explicit ``instance`` label), so 2,000 targets need not 2,000 sockets;
- :func:`write_history`: an OpenMetrics file of a page's series over the past, for
  ``promtool tsdb create-blocks-from openmetrics``;
- :func:`floor_groups`: the *floor* rule groups of issue 16, one ``group by (identity)`` recording
  rule per metric;
- :func:`parse_rule_metrics` / :func:`eval_figures` / :func:`ratio`: figure arithmetic from the
  ``prometheus_rule_group_*`` metrics Prometheus exposes on its own ``/metrics``
  (https://prometheus.io/docs/prometheus/latest/configuration/recording_rules/ and
  rules/manager.go: ``last_duration_seconds``, ``interval_seconds``, ``iterations_missed_total``).
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field
from typing import IO, Iterable

from gpumon.simfaults import Fault
from gpumon.simulate import Fleet
from gpumon.spec import Spec

#: GPUs per node: a DGX/HGX H100 board
GPUS_PER_NODE = 8
#: path prefix of the per-node pages on the generator's one port
PAGE_PATH = "/metrics/"
#: port written into the explicit ``instance`` label (dcgm-exporter's default port)
INSTANCE_PORT = 9400
#: name prefix of the floor groups (everything else loaded is gpumon's)
FLOOR_PREFIX = "floor."
#: group-name prefix of the second gpumon rule file a run may load beside the first (``--also-rules``)
ALSO_PREFIX = "also."


def fault_set(nodes: int, copies: int = 1) -> list[Fault]:
    """The benchmark's faults, ``copies`` times on distinct nodes (copy k uses nodes 5k+1..5k+5).

    One copy is: a field missing on 4 GPUs of a node (``DCGM_FI_DEV_GPU_UTIL``), a field missing
    on a whole node (``DCGM_FI_PROF_PIPE_TENSOR_ACTIVE``), a GPU gone (every field of GPU 7), the
    DCGM FP64 blank value 2^47+2 (dcgm_structs.h ``DCGM_FP64_NOT_SUPPORTED``) on one GPU's
    ``DCGM_FI_DEV_POWER_USAGE``, and one node's exporter answering HTTP 500 (exporter down).
    Copies that do not fit in ``nodes`` are left out (a 16-GPU smoke fleet gets one partial copy).
    """
    out: list[Fault] = []
    for k in range(copies):
        base = 5 * k
        name = [f"gpu-node-{base + i + 1}" for i in range(5)]
        if base + 1 > nodes:
            break
        out += [Fault("drop", metric="DCGM_FI_DEV_GPU_UTIL", node=name[0], gpu=g) for g in range(4)]
        pieces = [Fault("drop", metric="DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", node=name[1]),
                  Fault("drop", node=name[2], gpu=7),
                  Fault("sentinel", metric="DCGM_FI_DEV_POWER_USAGE", node=name[3], gpu=1),
                  Fault("http500", node=name[4])]
        out += [f for f, n in zip(pieces, range(2, 6)) if base + n <= nodes]
    return out


#: the one counter whose value must move: ``GpuTelemetryFrozen`` alerts on ``increase(...[10m]) == 0``
ENERGY = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"
#: its rate, mJ per second (345 W, the simulator's average draw)
ENERGY_RATE = 345_000
#: the clock the pages are rendered at; the energy counter is ``rendered value + ENERGY_RATE x (t - this)``
RENDER_CLOCK = 1_700_000_000.0


@dataclass(frozen=True)
class Page:
    """One node's pre-rendered scrape answer. Every series has a fixed value except the energy
    counter, kept apart (``energy``: (sample line up to the value, value at RENDER_CLOCK)) so each
    scrape writes it rising with the wall clock, as a real GPU's does."""

    node: str
    status: int
    head: bytes = b""
    energy: tuple[tuple[str, int], ...] = ()
    tail: bytes = b""

    def render(self, now: float) -> bytes:
        """The page as scraped at ``now`` (Unix seconds)."""
        if not self.energy:
            return self.head + self.tail
        extra = int(ENERGY_RATE * (now - RENDER_CLOCK))
        return self.head + "".join(f"{prefix} {base + extra}\n" for prefix, base in self.energy).encode() + self.tail

    @property
    def body(self) -> bytes:
        """The page at RENDER_CLOCK."""
        return self.render(RENDER_CLOCK)


def _split_page(node: str, status: int, text: str) -> Page:
    head, energy, tail = [], [], []
    for line in text.splitlines(keepends=True):
        if line.startswith(ENERGY + "{"):
            prefix, _, value = line.rstrip("\n").rpartition(" ")
            energy.append((prefix, int(value)))
        else:
            (tail if energy else head).append(line)
    return Page(node, status, "".join(head).encode(), tuple(energy), "".join(tail).encode())


def render_pages(nodes: int, faults: list[Fault] = ()) -> dict[str, Page]:
    """{node name: Page} for ``nodes`` x 8 GPUs, rendered once (the generator then only writes
    bytes). Node names are ``gpu-node-1..N`` (:class:`gpumon.simulate.Fleet`); values are one
    fixed reading per series (the benchmark measures cost, not alerts) except the energy counter,
    which rises (:meth:`Page.render`)."""
    fleet = Fleet(nodes, GPUS_PER_NODE, faults=list(faults), clock=lambda: RENDER_CLOCK)
    out = {}
    for node in fleet.nodes:
        status, body, _delay = fleet.respond(node.name)
        out[node.name] = _split_page(node.name, status, body) if status == 200 else Page(node.name, status)
    return out


def instance_of(node: str) -> str:
    """The ``instance`` label of a node's target (``gpu-node-1:9400``)."""
    return f"{node}:{INSTANCE_PORT}"


def scrape_config(job: str, address: str, nodes: Iterable[str], interval: float, timeout: float) -> dict:
    """The ``scrape_configs`` entry: one target per node, all on ``address`` (host:port of the
    generator), told apart by ``__metrics_path__`` with the ``instance`` label set explicitly
    (Prometheus keeps an ``instance`` given in the target's labels; docs:
    https://prometheus.io/docs/prometheus/latest/configuration/configuration/#static_config)."""
    return {"job_name": job, "scrape_interval": f"{interval:g}s", "scrape_timeout": f"{timeout:g}s",
            "static_configs": [{"targets": [address],
                                "labels": {"__metrics_path__": PAGE_PATH + n, "instance": instance_of(n)}}
                               for n in nodes]}


_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{.*\})? (\S+)$")


def page_series(body: str) -> list[tuple[str, str, str]]:
    """(metric name, ``{labels}`` text or "", value text) of every sample line of a page."""
    out = []
    for line in body.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if m:
            out.append((m.group(1), m.group(2) or "", m.group(3)))
    return out


def write_history(out: IO[str], pages: dict[str, Page], job: str, start: float, end: float, step: float) -> int:
    """Write the series of ``pages`` (healthy ones: status 200) as OpenMetrics samples every
    ``step`` seconds from ``start`` to ``end`` (inclusive, Unix seconds; the energy counter rising
    as :meth:`Page.render` has it), plus ``up`` = 1 per
    target, with ``job`` and ``instance`` added as a scrape would. Families are contiguous and each
    series' samples ascend in time, as ``promtool tsdb create-blocks-from openmetrics`` wants;
    ends with ``# EOF``. Returns the number of samples written."""
    times = []
    t = start
    while t <= end + 1e-9:
        times.append(t)
        t += step
    stamps = [f"{t:.3f}" for t in times]
    families: dict[str, list[str]] = {}
    for node, page in pages.items():
        if page.status != 200:
            continue
        extra = f'job="{job}",instance="{instance_of(node)}"'
        families.setdefault("up", []).append(f'up{{{extra}}} 1')
        for name, labels, value in page_series(page.body.decode("utf-8")):
            inner = labels[1:-1] + "," + extra if labels else extra
            families.setdefault(name, []).append(f"{name}{{{inner}}} {value}")
    count = 0
    for name, series in families.items():
        out.write(f"# TYPE {name} gauge\n")  # types are not stored in blocks; gauge needs no _total
        for prefix in series:
            if name == ENERGY:  # rising, continuous with what the live pages serve
                inner, _, base = prefix.rpartition(" ")
                out.write("".join(f"{inner} {int(base) + int(ENERGY_RATE * (t - RENDER_CLOCK))} {s}\n"
                                  for t, s in zip(times, stamps)))
            else:
                out.write("".join(f"{prefix} {s}\n" for s in stamps))
            count += len(stamps)
    out.write("# EOF\n")
    return count


def history_chunks(start: float, end: float, step: float, step_bytes: int, max_bytes: int) -> list[tuple[float, float]]:
    """Split the sample times ``start, start + step, ... <= end`` into consecutive (first, last)
    time ranges whose OpenMetrics text (``step_bytes`` per sample time, all series) stays under
    ``max_bytes``, so a backfill of any fleet size and history never writes a larger file. The
    ranges keep the grid: every sample time falls in exactly one range."""
    count = int((end - start) / step + 1e-9) + 1
    per = max(1, max_bytes // max(1, step_bytes))
    return [(start + i * step, start + (min(count, i + per) - 1) * step) for i in range(0, count, per)]


def floor_record(metric: str) -> str:
    """The floor's recording rule name for ``metric`` (``level:metric:operations``)."""
    return f"job_gpu:{metric}:floor_group"


def floor_groups(spec: Spec, interval: float) -> list[dict]:
    """The two floor rule groups of issue 16, evaluated every ``interval`` seconds (the scrape
    interval): ``floor.required`` has one ``group by (job, <identity labels>) (M{job=...})`` per
    required metric of the spec, ``floor.spec`` one per spec'd metric. Rule-group dicts as in a
    Prometheus rule file."""
    from gpumon.rules.promql import by, gpu_ids, job_sel

    def group(name: str, metrics) -> dict:
        return {"name": FLOOR_PREFIX + name, "interval": f"{interval:g}s",
                "rules": [{"record": floor_record(m.name), "expr": f"group by ({by(gpu_ids(spec))}) ({job_sel(spec, m.name)})"}
                          for m in metrics]}

    return [group("required", spec.required_metrics), group("spec", spec.metrics)]


_RULE_METRIC = re.compile(r'^(prometheus_rule_group_[a-z_]+)\{[^}]*rule_group="[^";]*;([^"]*)"[^}]*\} (\S+)$')


def parse_rule_metrics(text: str) -> dict[str, dict[str, float]]:
    """{group name: {metric suffix: value}} from Prometheus' own ``/metrics`` text, for the
    ``prometheus_rule_group_*`` families (``rule_group="<file>;<group>"``): e.g.
    ``{"gpumon.values": {"last_duration_seconds": 1.2, "interval_seconds": 30, ...}}``."""
    out: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        m = _RULE_METRIC.match(line)
        if m:
            out.setdefault(m.group(2), {})[m.group(1)[len("prometheus_rule_group_"):]] = float(m.group(3))
    return out


@dataclass
class GroupSamples:
    """One rule group's evaluations seen during a window: durations (s) of distinct evaluations
    (told apart by ``last_evaluation_timestamp_seconds``), its interval and counter deltas."""

    interval: float = 0.0
    rules: int = 0
    durations: list[float] = field(default_factory=list)
    seen: float | None = None
    iterations: tuple[float, float] | None = None  # first and last iterations_total
    missed: tuple[float, float] | None = None       # first and last iterations_missed_total

    def add(self, metrics: dict[str, float]) -> None:
        """Fold one scrape of the group's metrics in."""
        self.interval = metrics.get("interval_seconds", self.interval)
        self.rules = int(metrics.get("rules", self.rules))
        stamp = metrics.get("last_evaluation_timestamp_seconds")
        if stamp:  # the first sample only marks the start: its evaluation predates the window
            if self.seen is not None and stamp != self.seen:
                self.durations.append(metrics.get("last_duration_seconds", 0.0))
            self.seen = stamp
        for key, attr in (("iterations_total", "iterations"), ("iterations_missed_total", "missed")):
            if key in metrics:
                first = getattr(self, attr)
                setattr(self, attr, (metrics[key] if first is None else first[0], metrics[key]))


@dataclass(frozen=True)
class GroupFigure:
    """What the benchmark prints per rule group: evaluations seen, median and mean seconds per
    evaluation, busy seconds per minute (mean / interval x 60) and evaluations skipped."""

    name: str
    rules: int
    interval: float
    evaluations: int
    median: float
    mean: float
    per_minute: float
    missed: int


def unmeasured(figures: dict[str, "GroupFigure"], groups: list[str]) -> list[str]:
    """The rule groups of ``groups`` (names) with no evaluation finished inside the sampling
    window: :func:`eval_figures` leaves them out, so a gpumon total without them is too low (a 3m
    group needs a window of at least 3 minutes, two intervals to be sure)."""
    return [g for g in groups if g not in figures]


def eval_figures(samples: dict[str, GroupSamples]) -> dict[str, GroupFigure]:
    """{group: GroupFigure} for groups with at least one evaluation in the window. Busy seconds per
    minute are ``median(last_duration_seconds) / interval_seconds * 60``: what the group costs
    Prometheus per minute of wall time (it may exceed 60 on a group that runs late). The median,
    not the mean: on a shared machine one evaluation that waited for a core (or for a TSDB
    compaction) would otherwise dominate a short window; the mean is printed beside it."""
    out = {}
    for name, s in samples.items():
        if not s.durations or not s.interval:
            continue
        mean = statistics.fmean(s.durations)
        missed = int(s.missed[1] - s.missed[0]) if s.missed else 0
        median = statistics.median(s.durations)
        out[name] = GroupFigure(name, s.rules, s.interval, len(s.durations), median, mean, median / s.interval * 60,
                                missed)
    return out


def total_per_minute(figures: dict[str, GroupFigure], floor: bool, name: str | None = None) -> float:
    """Sum of busy seconds per minute over gpumon's groups (``floor`` False) or one floor group."""
    if floor:
        f = figures.get(name)
        return f.per_minute if f else 0.0
    return sum(f.per_minute for n, f in figures.items() if not n.startswith((FLOOR_PREFIX, ALSO_PREFIX)))


def also_per_minute(figures: dict[str, GroupFigure]) -> float:
    """Sum of busy seconds per minute over the second rule file's groups (:func:`prefixed`)."""
    return sum(f.per_minute for n, f in figures.items() if n.startswith(ALSO_PREFIX))


def prefixed(groups: list[dict], prefix: str = ALSO_PREFIX) -> list[dict]:
    """A copy of gpumon rule ``groups`` (a rule file's ``groups``) that can run in the same Prometheus
    as the original without touching it: group names get ``prefix``, recorded series names
    ``also:`` (and every reference to them in expressions), alert names ``Also`` (and their
    ``ALERTS{alertname=...}`` reads), and ``rule_group`` labels and matchers name the renamed groups.
    Both copies then read the same raw series at the same time, so their costs compare side by
    side on one server under one load."""
    records = sorted({r["record"] for g in groups for r in g["rules"] if "record" in r}, key=len, reverse=True)
    alerts = {r["alert"] for g in groups for r in g["rules"] if "alert" in r}
    group_names = sorted((g["name"] for g in groups), key=len, reverse=True)
    token = re.compile(r"(?<![A-Za-z0-9_:])(" + "|".join(re.escape(n) for n in records) + r")(?![A-Za-z0-9_:])")
    quoted = re.compile(r'"(' + "|".join(re.escape(n) for n in group_names) + r')"')
    alertname = re.compile(r'alertname(=~?)"([A-Za-z0-9_|]+)"')

    # a split group's readers match its parts' heartbeats by a regex of their escaped names
    parts = re.compile(r'rule_group=~"([^"]*)"')

    def escaped(name: str) -> str:
        dot = re.search(r"(\\*)\.", name)
        return (prefix.replace(".", dot.group(1) + ".") if dot else prefix) + name

    def fix(text: str) -> str:
        text = token.sub(lambda m: "also:" + m.group(1), text) if records else text
        text = quoted.sub(lambda m: f'"{prefix}{m.group(1)}"', text)
        text = parts.sub(lambda m: 'rule_group=~"' + "|".join(
            escaped(a) if a.replace("\\", "") in group_names else a for a in m.group(1).split("|")) + '"', text)
        return alertname.sub(lambda m: f'alertname{m.group(1)}"' + "|".join(
            "Also" + a if a in alerts else a for a in m.group(2).split("|")) + '"', text)

    out = []
    for g in groups:
        rules = []
        for r in g["rules"]:
            r = dict(r)
            if "record" in r:
                r["record"] = "also:" + r["record"]
            if "alert" in r:
                r["alert"] = "Also" + r["alert"]
            r["expr"] = fix(str(r["expr"]))
            if r.get("labels"):
                r["labels"] = {k: (prefix + v if k == "rule_group" and v in group_names else v)
                               for k, v in r["labels"].items()}
            rules.append(r)
        out.append({**g, "name": prefix + g["name"], "rules": rules})
    return out


def rule_families(groups: Iterable[dict]) -> dict[tuple[str, str], tuple[float, float]]:
    """{(group, rule name): (seconds its rules took in the group's last evaluation, summed over the
    rules of that name, e.g. one per field; the group's interval, s)} from ``/api/v1/rules``'
    ``data.groups`` (each rule's ``evaluationTime``; Prometheus web/api/v1/api.go). Which rules
    of a group cost what, per evaluation."""
    out: dict[tuple[str, str], tuple[float, float]] = {}
    for g in groups:
        interval = float(g.get("interval") or 0.0)
        for r in g.get("rules") or ():
            key = (g["name"], r.get("name", ""))
            out[key] = (out.get(key, (0.0, interval))[0] + float(r.get("evaluationTime") or 0.0), interval)
    return out


def costliest(snapshots: list[dict[tuple[str, str], tuple[float, float]]], top: int = 8,
              floor: bool = False) -> list[tuple[str, str, float, float]]:
    """The ``top`` rule families by busy seconds per minute (median over ``snapshots`` of
    :func:`rule_families` x 60 / interval): (group, rule name, median s per evaluation, s/min),
    gpumon's groups only (``floor`` False) or the floors' only."""
    rows = []
    for key in {k for snap in snapshots for k in snap}:
        if key[0].startswith(FLOOR_PREFIX) != floor:
            continue
        seen = [snap[key] for snap in snapshots if key in snap]
        med = statistics.median(s for s, _ in seen)
        interval = seen[-1][1]
        rows.append((key[0], key[1], med, med * 60 / interval if interval else 0.0))
    return sorted(rows, key=lambda r: (-r[3], r[0], r[1]))[:top]


def ratio(a: float, b: float) -> float:
    """a / b, or infinity when b is 0 and a is not (nan when both are 0)."""
    if b:
        return a / b
    return float("nan") if not a else float("inf")


def recorded_names(groups: Iterable[dict]) -> list[str]:
    """Distinct ``record`` names of rule-group dicts, in order."""
    seen: dict[str, None] = {}
    for g in groups:
        for r in g.get("rules", ()):
            if "record" in r:
                seen.setdefault(r["record"], None)
    return list(seen)


def name_regex(names: Iterable[str]) -> str:
    """An anchored PromQL regex (``a|b``) for exact metric names; ``:`` and ``_`` need no escape,
    other regex metacharacters cannot occur in a metric name."""
    return "|".join(names)


def naive_queries(spec: Spec, uuids: Iterable[str]) -> list[str]:
    """The naive validator's queries: one ``count(M{job=..., UUID="..."})`` per spec'd metric and
    GPU, label values escaped by :func:`gpumon.promqltext.matchers`."""
    from gpumon.promqltext import matchers

    gpu = spec.exporter.labels.gpu
    return [f"count({m.name}{{{matchers({'job': spec.exporter.job, gpu: u})}}})" for u in uuids for m in spec.metrics]


def naive_required_queries(spec: Spec, uuids: Iterable[str]) -> list[str]:
    """The naive validator users write first: one ``count(M{job=..., UUID="..."})`` per
    *required* metric and GPU (:func:`naive_queries` asks every spec'd metric)."""
    from gpumon.promqltext import matchers

    gpu = spec.exporter.labels.gpu
    return [f"count({m.name}{{{matchers({'job': spec.exporter.job, gpu: u})}}})" for u in uuids
            for m in spec.required_metrics]
