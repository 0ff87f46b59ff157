"""The fault-scenario matrix (issue 11): a simulated fleet (``gpumon simulate``'s :class:`Fleet`
and fault kinds), a fault timeline, and the exact set of pages expected within a time bound.

Each scenario is scraped by a *virtual* scraper: every ``STEP`` seconds of virtual time it asks the
simulator for each target's page (no sockets, no sleeping: a ``slow`` fault's delay is read, not
waited for), turns it into samples as Prometheus would (target labels ``job``/``instance``,
``up``, ``scrape_samples_scraped``, ``scrape_duration_seconds``, staleness markers for series
that vanish or for every series of a failed scrape), and writes them as the input of one
promtool unit-test group. Prometheus' own rule engine (``promtool test rules``) then evaluates the
rules rendered from a time-compressed test spec (10 s scrapes, ``for`` of 30 s) and checks, at
each check time, that the firing pages (``ALERTS`` at severity critical or warning, by alert name
and identity labels: cluster, node, GPU, field) are *exactly* the expected ones, each once.

Run as a script (``python -m tests.matrix``) it writes docs/matrix.md with the table it measured.
"""

from __future__ import annotations

import functools
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from gpumon.render import render
from gpumon.ruletests.series import MISSING, STALE, compress
from gpumon.simfaults import Fault
from gpumon.simulate import Fleet
from gpumon.spec import Spec, parse_spec

ROOT = Path(__file__).resolve().parent.parent
#: seconds between scrapes (and between promtool samples)
STEP = 10
#: seconds between promtool's rule evaluations: one per scrape, at the scrape (the pages are read
#: half a step later). Evaluating twice per scrape read the same samples twice and took the whole
#: run 1.7x as long, for one step's difference in 6 of 52 timelines (windows bounded at a sample)
EVAL = STEP
#: step at which faults start: 2 minutes of healthy history first
AT = 12
JOB = "dcgm-exporter"
#: the bundled spec with time compressed: 10 s scrapes, `for` 30 s, short windows
COMPRESS = {
    "scrape_interval: 15s": "scrape_interval: 10s", "scrape_timeout: 10s": "scrape_timeout: 8s",
    "collect_interval: 30s": "collect_interval: 10s", "  for: 5m\n": "  for: 30s\n",
    "for: 5m}": "for: 30s}", "for: 2m}": "for: 30s}", "for: 10m}": "for: 30s}",
    "inventory_lookback: 1h": "inventory_lookback: 5m", "gap_window: 30m": "gap_window: 3m",
    "flapping_window: 10m": "flapping_window: 2m", "frozen_window: 10m": "frozen_window: 2m",
    "slow_group_interval: 1m": "slow_group_interval: 10s", "gaps_group_interval: 3m": "gaps_group_interval: 10s",
    "      window: 15m": "      window: 2m",
}
#: identity labels a page is told apart by (with the cluster label in cluster scenarios)
IDENTITY = ("alertname", "Hostname", "gpu", "dcgm_field")
PAGES = 'ALERTS{alertstate="firing",severity=~"critical|warning"}'
#: the node the matrix spec declares gone on purpose (alerts.retired)
RETIRED = "gpu-node-5"


@functools.lru_cache(maxsize=2)
def matrix_spec(cluster: bool = False) -> Spec:
    """The matrix's spec: gpumon.yaml with :data:`COMPRESS` (and a ``cluster`` label); parsed once
    per test process (a :class:`~gpumon.spec.Spec` is frozen)."""
    text = (ROOT / "gpumon.yaml").read_text()
    for old, new in COMPRESS.items():
        assert old in text, old
        text = text.replace(old, new)
    if cluster:
        text = text.replace("cluster: null ", "cluster: cluster ")
    # a node decommissioned on purpose (the planned-drain scenario: 5 nodes, only there)
    text = text.replace("  inventory_lookback: 5m", f"  retired: {{nodes: [{RETIRED}]}}\n  inventory_lookback: 5m")
    return parse_spec(text, "matrix.yaml")


@dataclass(frozen=True)
class Page:
    """One expected page: alert name and the identity labels it carries (None = no such label)."""

    alert: str
    node: str | None = None
    gpu: int | None = None
    field: str | None = None
    cluster: str | None = None

    def labels(self, with_cluster: bool) -> dict[str, str]:
        out = {"alertname": self.alert}
        for key, value in (("Hostname", self.node), ("gpu", self.gpu), ("dcgm_field", self.field)):
            if value is not None:
                out[key] = str(value)
        if with_cluster and self.cluster is not None:
            out["cluster"] = self.cluster
        return out

    def text(self) -> str:
        where = " ".join(str(x) for x in (self.cluster, self.node, None if self.gpu is None else f"gpu {self.gpu}",
                                          self.field) if x is not None)
        return f"{self.alert}" + (f" ({where})" if where else "")


@dataclass
class Case:
    """One scenario.

    Args:
        name: what happens.
        pages: the pages expected ``bound`` steps after the faults start (and, unless ``end`` says
            otherwise, still at the end); nothing else may fire.
        faults: active from step ``at``; ``later`` adds more from its step; ``initial`` are active
            before ``at`` only (an exporter upgraded at ``at``).
        nodes / gpus: fleet size; ``clusters`` splits nodes over clusters a/b (cluster spec).
        join: node -> step from which it is scraped (a node joining).
        move: node -> step from which it is scraped at a new address (exporter pod replaced).
        relabel: node -> ((step, label, {value: new value}), ...): from each step on (until a later
            entry for the same label), the node's series whose ``label`` has a listed value carry
            the new one (``Hostname`` of an
            exporter in a pod without NODE_NAME is the pod's name, new with every pod,
            NVIDIA/dcgm-exporter#78; GPU indexes shift after a reboot without a dead GPU).
        double: a node scraped twice (two scrape configs for one target).
        leave: node -> step from which it is no longer scraped (targets removed); ``back``: node ->
            step from which such a node is scraped again (its target back in service discovery).
        end: pages expected at the last step (default: ``pages``).
        before: pages expected just before ``at`` (default: none; e.g. an exporter still on 1.x names).
        timeouts: node -> its own scrape timeout (seconds); with any, every target also gets the
            ``scrape_timeout_seconds`` series (Prometheus ``--enable-feature=extra-scrape-metrics``).
        length: steps in total.
        clear: step from which every fault is gone (default: never); every page must have ended
            within ``resolve`` steps after it.
        restarts: steps at which Prometheus restarts (:class:`Scrape`: no scrape for ``down``
            steps, no staleness markers for anything it wrote before).
        replace: node -> step from which new hardware of the same name serves it (other GPU
            UUIDs, a new address).
        vm_pages: the pages expected on vmalert + VictoriaMetrics where they differ from
            ``pages`` (and ``end``), within ``vm_bound`` steps (default ``bound``), with
            ``vm_why`` saying why (docs/matrix.md).
    """

    name: str
    pages: tuple[Page, ...]
    faults: tuple[Fault, ...] = ()
    initial: tuple[Fault, ...] = ()
    bound: int = 8
    at: int = AT
    later: tuple[tuple[int, tuple[Fault, ...]], ...] = ()
    nodes: int = 3
    gpus: int = 2
    clusters: bool = False
    join: dict = field(default_factory=dict)
    move: dict = field(default_factory=dict)
    relabel: dict = field(default_factory=dict)
    double: str | None = None
    leave: dict = field(default_factory=dict)
    back: dict = field(default_factory=dict)
    end: tuple[Page, ...] | None = None
    before: tuple[Page, ...] = ()
    timeouts: dict = field(default_factory=dict)
    length: int | None = None
    covers: str = ""
    vm_pages: tuple[Page, ...] | None = None
    vm_bound: int | None = None
    vm_why: str = ""
    clear: int | None = None
    resolve: int = 12
    restarts: tuple[int, ...] = ()
    down: int = 1
    replace: dict = field(default_factory=dict)

    @property
    def steps(self) -> int:
        return self.length or self.at + max(self.bound, self.vm_bound or 0) + 3

    def checks(self, vm: bool = False) -> list[tuple[int, tuple[Page, ...]]]:
        """(step, expected pages): quiet before the faults, pages within the bound, the end; with
        ``vm``, the pages expected on vmalert + VictoriaMetrics."""
        pages = self.pages if not vm or self.vm_pages is None else self.vm_pages
        end = self.end if not vm or self.vm_pages is None else None
        bound = self.vm_bound if vm and self.vm_pages is not None and self.vm_bound else self.bound
        out = [(self.at - 1, self.before), (self.at + bound, pages)]
        last = self.steps - 1
        if last > self.at + bound:
            out.append((last, pages if end is None else end))
        return out


# --------------------------------------------------------------------------- the virtual scraper

_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)$")
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')
#: labels the scrape sets; exposed ones are renamed exported_<name> (honor_labels: false)
_TARGET_LABELS = ("job", "instance", "cluster")
#: series the scrape itself writes for a target (never marked stale by a successful scrape)
_SCRAPE_SERIES = ("up", "scrape_samples_scraped", "scrape_duration_seconds", "scrape_timeout_seconds")


def _target_of(key: tuple) -> tuple:
    """The target labels of a series key (name, sorted label pairs): every series of a target
    carries exactly its target's job, instance and cluster (exposed ones are renamed)."""
    return tuple(x for x in key[1] if x[0] in _TARGET_LABELS)


def parse(text: str) -> list[tuple[str, dict[str, str], str]]:
    """(name, labels, value) of every sample line of an exposition."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if m:
            out.append((m.group(1), dict(_LABEL.findall(m.group(2) or "")), m.group(3)))
    return out


class Scrape:
    """Scrapes ``case``'s fleet every :data:`STEP` virtual seconds into promtool series."""

    def __init__(self, case: Case, spec: Spec):
        self.case, self.spec = case, spec
        self.now = 0.0
        self.fleet = Fleet(case.nodes, case.gpus, clock=lambda: self.now)
        # a node replaced by new hardware under the same name: other GPU UUIDs, a new address
        self.new = Fleet(case.nodes, case.gpus, clock=lambda: self.now, uuid_salt="replaced")
        self.series: dict[tuple, list] = {}
        # target labels (job, instance, cluster) -> keys of the series scraped from that target:
        # the staleness checks below look only at the target's own series
        self._by_target: dict[tuple, list[tuple]] = {}

    def down(self, step: int) -> bool:
        """Prometheus is restarting at ``step``: no scrape and no rule evaluation it keeps."""
        return any(r <= step < r + self.case.down for r in self.case.restarts)

    def replaced(self, node: str, step: int) -> bool:
        return self.case.replace.get(node, 1 << 30) <= step

    def targets(self, step: int) -> list[tuple[str, str, dict[str, str]]]:
        """(node, instance, target labels) scraped at ``step``."""
        out = []
        for i, node in enumerate(self.fleet.nodes):
            name = node.name
            if self.case.join.get(name, 0) > step or self.case.leave.get(name, 1 << 30) <= step < \
                    self.case.back.get(name, 1 << 30):
                continue
            port = 9400 if self.case.move.get(name, 1 << 30) > step else 9401
            port = 9402 if self.replaced(name, step) else port
            labels = {"job": JOB}
            if self.case.clusters:
                labels["cluster"] = "a" if i < (self.case.nodes + 1) // 2 else "b"
            out.append((name, f"10.0.0.{i + 1}:{port}", labels))
            if self.case.double == name:
                out.append((name, f"10.0.1.{i + 1}:9400", labels))
        return out

    def faults_at(self, step: int) -> list[Fault]:
        if self.case.clear is not None and step >= self.case.clear:
            return []
        out = list(self.case.faults) if step >= self.case.at else list(self.case.initial)
        for start, more in self.case.later:
            if step >= start:
                out += list(more)
        return out

    def _put(self, key: tuple, step: int, value) -> None:
        row = self.series.get(key)
        if row is None:
            row = self.series[key] = [MISSING] * self.case.steps
            self._by_target.setdefault(_target_of(key), []).append(key)
        row[step] = value

    def run(self) -> None:
        for step in range(self.case.steps):
            self.now = step * STEP
            self.fleet.static_faults = self.new.static_faults = self.faults_at(step)
            if self.down(step):
                # nothing scraped, and no staleness marker after the restart for what was there
                # before it: Prometheus writes none at shutdown and forgets the last scrape
                continue
            for node, instance, tlabels in self.targets(step):
                status, body, delay = (self.new if self.replaced(node, step) else self.fleet).respond(node)
                timeout = self.case.timeouts.get(node, self.spec.exporter.scrape_timeout)
                target = {**tlabels, "instance": instance}
                ok = status == 200 and delay < timeout
                samples = parse(body) if ok else []
                seen = set()
                relabel = {label: new for at, label, new in self.case.relabel.get(node, ()) if at <= step}.items()
                for name, labels, value in samples:
                    for label, new in relabel:
                        if labels.get(label) in new:
                            labels[label] = new[labels.get(label)]
                    for clash in _TARGET_LABELS:
                        if clash in labels:
                            labels[f"exported_{clash}"] = labels.pop(clash)
                    key = (name, tuple(sorted({**labels, **target}.items())))
                    seen.add(key)
                    self._put(key, step, float(value))
                # a series of this target that was there at the last scrape and is not now: stale
                mine = tuple(sorted(target.items()))
                for key in self._by_target.get(mine, ()) if step else ():
                    row = self.series[key]
                    if key not in seen and row[step - 1] not in (MISSING, STALE) and key[0] not in _SCRAPE_SERIES:
                        row[step] = STALE
                for name, value in (("up", 1 if ok else 0), ("scrape_samples_scraped", len(samples)),
                                    ("scrape_duration_seconds", round(min(delay, timeout) or 0.05, 3))):
                    self._put((name, mine), step, value)
                if self.case.timeouts:
                    self._put(("scrape_timeout_seconds", mine), step, timeout)
            # a target no longer scraped: all its series go stale once
            live = {tuple(sorted({**t, "instance": i}.items())) for _, i, t in self.targets(step)}
            for target, keys in self._by_target.items() if step else ():
                if target in live:
                    continue
                for key in keys:
                    row = self.series[key]
                    if row[step - 1] not in (MISSING, STALE) and row[step] == MISSING:
                        row[step] = STALE

    def input_series(self) -> list[dict]:
        """The scraped series as promtool input series (``{"series": ..., "values": ...}``)."""
        out = []
        for (name, labels), row in sorted(self.series.items()):
            inner = ",".join(f'{k}="{v}"' for k, v in labels)
            out.append({"series": f"{name}{{{inner}}}", "values": compress(row)})
        return out


_SCRAPED: dict[tuple, Scrape] = {}


def scraped(case: Case, spec: Spec) -> Scrape:
    """``case`` scraped on ``spec`` (:class:`Scrape`, run), once per test process: both promtools,
    the restart pre-pass and the vmalert replay read the same virtual scrape, which is a pure
    function of the case and the spec (the simulator runs on the virtual clock). Its
    ``promtool_series`` is :meth:`Scrape.input_series`. Read it, never change it."""
    key = (repr(case), spec)
    if key not in _SCRAPED:
        scrape = Scrape(case, spec)
        scrape.run()
        scrape.promtool_series = scrape.input_series()
        _SCRAPED[key] = scrape
    return _SCRAPED[key]


# --------------------------------------------------------------------------- promtool


#: appended to the name of a page counted more than once at one step (:func:`_expr`)
SEVERAL = " as several alerts"


def _expr(case: Case, index: int) -> str:
    """The pages query of case ``index``; promtool reports a failed expression test by its text and
    time only, so a matcher that is always true names the case."""
    ids = IDENTITY + (("cluster",) if case.clusters else ())
    pages = PAGES.replace("}", f',alertname!="case-{index}"}}')
    counted = f"count by ({', '.join(ids)}) ({pages})"
    # a page the identity cannot tell apart (per MIG instance, exporter target or XID code) counted
    # more than once is one cause paged several times at once: its own page name, never expected
    return (f'{counted}\nor\nlabel_replace({counted} > 1, "alertname", "$1{SEVERAL}", "alertname", "(.+)")')


def promtool_group(case: Case, spec: Spec, index: int, lingering: list[dict] = ()) -> dict:
    """The promtool test group of ``case``: its scraped series (and ``lingering``, the recorded
    series a restart leaves behind, :mod:`tests.matrix_restart`) and, at every step, a check that
    no page fires: promtool's report of the failed checks is then the scenario's whole timeline
    (:func:`tests.matrix_timeline.parse_report`)."""
    scrape = scraped(case, spec)
    expr = _expr(case, index)
    tests = [{"expr": expr, "eval_time": f"{step * STEP + STEP // 2}s", "exp_samples": []}
             for step in range(case.steps)]
    return {"name": case.name, "interval": f"{STEP}s", "input_series": scrape.promtool_series + list(lingering),
            "promql_expr_test": tests}


@dataclass
class Outcome:
    case: Case
    ok: bool
    seen: dict[int, list[str]]      # check step -> pages seen (vmalert: at its checks; promtool: every step)
    problems: list[str] = field(default_factory=list)
    timeline: dict = field(default_factory=dict)    # step -> frozenset of Page (promtool)


@functools.lru_cache(maxsize=4)
def rules_text(spec: Spec) -> str:
    """The rule file rendered from ``spec``, once per test process."""
    return render(spec)["rules/gpumon.rules.yaml"]


def _promtool(promtool: str, folder: Path, spec: Spec, groups: list[dict]) -> str:
    """Run one promtool test file of ``groups`` on ``spec``'s rules; its report."""
    (folder / "rules.yaml").write_text(rules_text(spec))
    doc = {"rule_files": ["rules.yaml"], "evaluation_interval": f"{EVAL}s", "tests": groups}
    (folder / "matrix.test.yaml").write_text(yaml.safe_dump(doc, sort_keys=False, width=1 << 20))
    proc = subprocess.run([promtool, "test", "rules", "matrix.test.yaml"], cwd=folder, capture_output=True, text=True)
    text = proc.stdout + proc.stderr
    if re.search(r"^\s*rule: .*, err: ", text, re.M):
        # a rule that failed to evaluate ends its test group: no timeline to read
        raise RuntimeError(f"a rule failed to evaluate:\n{text[:3000]}")
    if proc.returncode != 0 and "FAILED" not in text:
        raise RuntimeError(f"promtool failed without a test failure:\n{text}")
    return text


def _split(groups: list[dict], parts: int) -> list[list[dict]]:
    """``groups`` in up to ``parts`` lists of about equal promtool work (its checks, one per step;
    the longest first to the least loaded), each in the original order."""
    load = [0] * parts
    owner = {}
    for i in sorted(range(len(groups)), key=lambda i: -len(groups[i]["promql_expr_test"])):
        part = load.index(min(load))
        owner[i] = part
        load[part] += len(groups[i]["promql_expr_test"])
    return [chunk for chunk in ([g for i, g in enumerate(groups) if owner[i] == n] for n in range(parts)) if chunk]


def run(cases: list[Case], promtool: str = "promtool", workers: int = 2) -> tuple[list[Outcome], float, str]:
    """Run every case with promtool, grouped by spec (with / without a cluster label), and judge
    each scenario's whole timeline (:func:`tests.matrix_timeline.judge`). A spec's test groups are
    split over ``workers`` promtool processes run side by side (each group is evaluated on its
    own, so the split changes no result).

    Returns:
        (outcomes, seconds, promtool's output).
    """
    from tests import matrix_restart, matrix_timeline
    t0 = time.monotonic()
    jobs = []
    with tempfile.TemporaryDirectory(prefix="gpumon-matrix-") as tmp:
        for clusters in (False, True):
            chosen = [c for c in cases if c.clusters == clusters]
            if not chosen:
                continue
            spec = matrix_spec(clusters)
            rules_text(spec)    # rendered here, once, not by two promtool threads at the same time
            folder = Path(tmp) / ("cluster" if clusters else "plain")
            folder.mkdir()
            lingering = matrix_restart.lingering(promtool, folder, spec, {cases.index(c): c for c in chosen})
            groups = [promtool_group(c, spec, cases.index(c), lingering.get(cases.index(c), ())) for c in chosen]
            for n, part in enumerate(_split(groups, workers)):
                (folder / f"part{n}").mkdir()
                jobs.append((folder / f"part{n}", spec, part))
        with ThreadPoolExecutor(max_workers=workers) as pool:
            reports = list(pool.map(lambda job: _promtool(promtool, *job), jobs))
    timelines = {}
    for report in reports:
        timelines.update(matrix_timeline.parse_report(report, STEP, Page))
    outcomes = []
    for c in cases:
        timeline = timelines.get(cases.index(c), {})
        verdict = matrix_timeline.judge(c, timeline, STEP)
        seen = {s: sorted(p.text() for p in ps) for s, ps in timeline.items()}
        outcomes.append(Outcome(c, verdict.ok, seen, verdict.problems, timeline))
    return outcomes, time.monotonic() - t0, "\n".join(reports)


def _seen(o: Outcome, engine_pages: tuple | None) -> str:
    """One engine's cell: the timeline (promtool) or the checks (vmalert), and what failed."""
    from tests import matrix_timeline
    c = o.case
    if o.timeline or not o.seen:
        text = matrix_timeline.describe(o.timeline, STEP, c.steps - 1)
    else:
        text = "; ".join(f"t={s * STEP}s: {', '.join(g) or 'nothing'}" for s, g in sorted(o.seen.items()))
        text = "as expected at each check" if o.ok else text
    return text if o.ok else "FAILED: " + "; ".join(o.problems) + ("<br>" if o.problems else "") + text


def _expected(c: Case) -> str:
    pages = ", ".join(p.text() for p in c.pages) or "nothing"
    out = f"{pages} (≤ {c.bound * STEP}s after the fault at {c.at * STEP}s)"
    if c.before:
        out = f"before: {', '.join(p.text() for p in c.before)}; then {out}"
    if c.end is not None:
        out += f"; at the end ({(c.steps - 1) * STEP}s): {', '.join(p.text() for p in c.end) or 'nothing'}"
    if c.clear is not None:
        out += f"; cleared at {c.clear * STEP}s, all ended ≤ {c.resolve * STEP}s later"
    return out


def table(outcomes: list[Outcome], vm: list[Outcome] | None = None) -> str:
    """Markdown: scenario -> expected pages -> each page's firing runs at every 10 s step
    (promtool), and with ``vm`` the vmalert + VictoriaMetrics result at its checks."""
    head = "| # | scenario | covers | expected | pages seen, start-end (promtool, every step) |"
    rows = [head + (" vmalert + VictoriaMetrics |" if vm else ""), "|---|---|---|---|---|" + ("---|" if vm else "")]
    for i, o in enumerate(outcomes, 1):
        c = o.case
        row = f"| {i} | {c.name} | {c.covers} | {_expected(c)} | {_seen(o, None)} |"
        if vm:
            v = vm[i - 1]
            text = _seen(v, c.vm_pages)
            if c.vm_pages is not None:
                pages = ", ".join(p.text() for p in c.vm_pages) or "nothing"
                text = f"{'expected there' if v.ok else 'FAILED, expected there'}: {pages} " \
                       f"(≤ {(c.vm_bound or c.bound) * STEP}s; see below){'' if v.ok else ' ' + text}"
            row += f" {text} |"
        rows.append(row)
    return "\n".join(rows)


#: docs/matrix.md up to the tables
INTRO = """# Fault-scenario matrix (real output)

Written by `python -m tests.matrix` (tests/test_matrix.py and tests/test_matrix_vm.py run the same
scenarios in `make test`). Each scenario is a simulated fleet (`gpumon simulate`'s fault kinds) scraped
every 10 s of virtual time by a virtual scraper (tests/matrix.py: `up`, scrape metrics and staleness
markers as Prometheus writes them), on the rules rendered from the bundled spec with time compressed
(10 s scrapes, `for` of 30 s, 3 min gap window, 2 min XID policy window, 5 min inventory lookback), on
two engines:

* **promtool** (`promtool test rules`, Prometheus' rule engine): one test group per scenario, the rules
  evaluated at every 10 s step's scrape, and at *every* step a check that no page fires; promtool's report of the failed checks is the exact
  set of pages at each step, so each page's whole life (start and end) is known;
* **vmalert + VictoriaMetrics** (Debian's `victoria-metrics` 1.79): every scenario's samples go into one
  VictoriaMetrics by remote write (the one import path that keeps staleness markers), each scenario in a
  slice of time of its own, 20 minutes apart; `vmalert -replay.timeFrom/-replay.timeTo` evaluates
  every rule of each rule file (plain spec, cluster spec) over the whole range, in layers of chained rules
  (one run per layer, see below), and writes recording results and `ALERTS` back; the firing pages are read back raw (`/api/v1/export`) at three checks per scenario
  (before the fault, at the bound, at the end). The replay runs the 44 scenarios that are not lifecycles,
  bus-off or a target that stays scraped without a node name (tests/test_matrix_vm.py says why for each):
  the replay harness has no restart, and the rules that hold a lost GPU's page past the inventory lookback
  (and bus-off's single page) read their own last result, which `vmalert -replay` cannot give a rule (it
  evaluates each rule over the whole range in one query). In replay, a lost GPU would page `GpuLost` only
  for the inventory lookback from the GPUs seen in it;
* **live vmalert + VictoriaMetrics** (1.79 and 1.151): the 16 lifecycles, which the replay leaves out, are
  played in real time, each on its own VictoriaMetrics and vmalert, all at once: every 10 s the step's scraped samples
  are remote-written with the wall-clock time, vmalert evaluates at the wall clock, and a restart stops
  vmalert by PID and starts a new one on the same store (tests/test_matrix_vmlive.py). The pages of every
  step are read back and judged as promtool's (see "Live vmalert" below).

A page is a firing alert at severity critical or warning, told apart by alert name, cluster, node
(`Hostname`), GPU index and `dcgm_field`. On promtool the whole timeline is judged: no page before the
fault (but the stated ones), each expected page starts within its bound and fires in one run (a page
that goes off and on again counts twice), no other page at any step, the stated pages at the end, and,
where the fault clears, every page ends within the stated time after it. Alertmanager inhibitions come on
top (tests/test_alertmanager.py).

Lifecycles: the lifecycle scenarios run for up to 80 steps (13 min), past the inventory lookback twice.
A **restart** of Prometheus is modelled as it happens: no scrape for one step, no staleness marker for
anything scraped or recorded before it; each recorded series that existed at the last evaluation before
the restart is left behind as one sample without a marker (tests/matrix_restart.py). promtool's rule
engine itself does not restart (the `for` state of the alerts is kept across it). A **replaced node**
serves other GPU UUIDs under the same name at a new address; a **planned decommission** lists the node
under `alerts.retired` in the spec (the matrix spec retires `gpu-node-5`, which only that scenario has).
"""

#: docs/matrix.md after the table: what the per-step timelines showed, and the open scenarios
FINDINGS = """
## What the timelines show

* **A GPU off the bus pages once.** XID 79 pages `GpuXidCritical`; when the GPU's series then vanish,
  `job_gpu:gpumon_xid_lost:max` holds that page (same labels) from the first evaluation the GPU is out of the
  inventory until it reports again, and `GpuLost` leaves the GPU out. Checked only before the fault, at the bound
  and at the end, the same scenario had looked right while it paged twice: `GpuXidCritical` for 30 s, then
  `GpuLost` 80 s later. Holding the XID page from the lost window on (instead of from the first evaluation)
  still left a 40 s hole, which the per-step timeline showed as two runs of the same page.
* **A lost GPU stays paged.** `GpuLost` used to resolve when the inventory lookback passed, the GPU still gone.
  It now reads `job_gpu:gpumon_known:group`, the GPUs that ever reported, which holds its own last value, so
  the page ends only when the GPU reports again (scenario "a GPU lost, then back") or the spec lists it or its
  node under `alerts.retired` (scenario "a planned decommission"). A node replaced by new hardware under the same
  name pages `GpuLost` for each old GPU until their UUIDs are retired.
* **A GPU is known by its UUID.** Compared by all its identity labels, a GPU that reported under a new node name
  or index was lost for ever: where the exporter's `Hostname` is its pod's name (no `NODE_NAME`,
  NVIDIA/dcgm-exporter#78), every pod restart paged `GpuLost` for each GPU of the node; after a GPU died and the
  node rebooted without it, the GPUs after it were renumbered and paged too (three pages for one dead GPU).
  Both scenarios now page as the fault is: nothing, and the dead GPU once.
* **An XID set for days pages once.** dcgm-exporter keeps the last XID until it restarts; whether it is new was
  asked of the series' full label set, at one instant one policy window ago. A job's pod labels, a new exporter
  target or node name (new series of the same XID) and a failed scrape one window before each paged it again.
  It is now asked per GPU (`UUID`) and code, over the XID hold window, at every level. Still open: a Prometheus
  outage longer than that window, one policy window before, makes it new once more (the two open scenarios).
* **One page per GPU, whatever serves it.** `GpuTelemetryFrozen` and `GpuMetricIntermittent` were keyed by the
  exporter target (`instance`): a pod replaced mid-fault is a new target, so the page ended and fired again a `for`
  later. Both are now keyed by the GPU, the old target's samples carrying the page until the new one's show the
  fault (scenarios "... the exporter pod is replaced mid-fault: still one page"); a replaced pod that reads the
  counter counting again ends the frozen page at its second scrape. A device-wide field missing on a MIG GPU was
  missed once per MIG instance, and a re-partition ended that page and started two; it is one page per GPU now.
  `GpuIdentityLabelMissing` is one page per job (its value counts the targets): an exporter rollout that writes
  `hostname` node by node paged once per node as it went. The harness counts the alerts behind each page at
  every step: one cause paged as several alerts the page identity cannot tell apart (another MIG instance,
  target or code) fails as "`<alert>` as several alerts".
* **A flapping target near the threshold pages once.** A target failing one scrape in 7 or 8 sat at
  `flapping_min_up_ratio`: `GpuExporterFlapping` fired and resolved 9-10 times in 15 minutes on both promtools. It
  now holds, once pending or firing (its own `ALERTS` series), until the success share is half way from the
  threshold to 1 (95 % for 90 %) or `up` stops changing, and ends a window after the target recovers.
* **Restarts.** A restart in the middle of a fault keeps one page on promtool (whose rule engine keeps the `for`
  state; a real Prometheus restores it from `ALERTS_FOR_STATE`). A field back just before a restart used to page
  again for up to the 5 min lookback: the missing set recorded at the last evaluation before the restart had no
  staleness marker. The presence alerts now read the missing sets as of the inventory group's last
  evaluation (and the unlabelled sets as of the coverage group's): the group's last rule records `rule_group:gpumon_evaluation:timestamp`, and a series older than it by
  more than 15 s is left out (scenario "a field missing on one GPU comes back, Prometheus restarts right after": one
  run, over by the first evaluation after the restart). The 15 s are vmalert's write lag: it reads what it recorded
  back from VictoriaMetrics, where one evaluation's heartbeat can become readable before the missing set it closes
  (live on vmalert 1.151, `GpuNodeMetricMissing` ended for 4 s and paged again without them).
* **A node removed from service discovery** pages `GpuLost` for each of its GPUs: its targets drop out of
  `job_instance:gpumon_target_node_known:group` (held while a target has an `up` series), so the node has no
  target left. The pages go on past the inventory lookback and end when the node's target is back (scenario "a node
  removed from service discovery, back 20 steps later"). A target that is still there but down pages
  `GpuExporterDown` only; every target of a job or
  cluster gone pages `GpuExporterTargetMissing` only.
* **1.x names.** The GPUs of a node serving dcgm-exporter 1.x names (`uuid` read as `UUID`) are known and
  reporting: one of them lost pages `GpuLost` beside the node's `GpuExporterLegacyNames`, and that one page goes on
  across the upgrade to 4.x names.
* **An XID older than the policy window** does not make a later loss an XID page: `GpuXidCritical` ends with the
  window and the loss pages `GpuLost` (two pages, for an XID and, later, a GPU gone).

Open (tests/matrix_cases.py `OPEN`, expected to fail):

* Prometheus down for longer than the inventory lookback forgets a lost GPU (the known set reads itself over that
  lookback): `GpuLost` ends though the GPU is still gone. This is a limit, not a defect to fix: after an outage
  longer than every window a rule reads, a GPU that stopped reporting before it cannot be told apart from a series
  that is gone on purpose (nothing written in the window says it was ever there). `alerts.inventory_lookback` is
  the longest outage it outlasts: set it above the longest Prometheus or vmalert outage you expect.
* An XID that stays set (the exporter keeps the last one until it restarts) pages once more one policy window
  after a Prometheus outage longer than the XID hold window (8 sample intervals: 4 min for the bundled
  spec): with no sample of it one window ago, it reads as new. Holding the last XID per GPU in a record that
  reads itself (as the known set does) would close it, at the cost of one more per-GPU record.
"""


def main(argv: list[str] | None = None) -> int:
    """Run the matrix (promtool, and vmalert unless ``--promtool-only``) and write docs/matrix.md
    (the differences section is kept)."""
    from tests import matrix_vm
    from tests.matrix_cases import CASES
    only = "--promtool-only" in (sys.argv[1:] if argv is None else argv)
    outcomes, seconds, _ = run(CASES)
    vm, vm_seconds = (None, 0.0) if only else matrix_vm.run(CASES)[:2]
    text = table(outcomes, vm)
    passed = sum(o.ok for o in outcomes)
    out = ROOT / "docs" / "matrix.md"
    old = out.read_text() if out.exists() else ""
    marker = "\n## Where vmalert + VictoriaMetrics differ"
    tail = old[old.index(marker):] if marker in old else ""
    head = f"{promtool_version()}: {passed} of {len(outcomes)} scenarios passed in {seconds:.1f} s."
    if vm is not None:
        head += (f" vmalert + VictoriaMetrics: {sum(o.ok for o in vm)} of {len(vm)} passed in {vm_seconds:.1f} s "
                 f"(one VictoriaMetrics, two replays).")
    else:
        head += " vmalert + VictoriaMetrics was not run for this table (`python -m tests.matrix --promtool-only`)."
    out.write_text(f"{INTRO}\n{head}\n\n{text}\n{FINDINGS}{tail}")
    print(text)
    print(f"{head} wrote {out.relative_to(ROOT)}")
    return 0 if passed == len(outcomes) and (vm is None or all(o.ok for o in vm)) else 1


def promtool_version(promtool: str = "promtool") -> str:
    """promtool's version line, e.g. ``promtool, version 2.42.0``."""
    proc = subprocess.run([promtool, "--version"], capture_output=True, text=True)
    return (proc.stdout or proc.stderr).splitlines()[0].split(" (")[0]


if __name__ == "__main__":
    # run as the module tests.matrix, not as __main__: the scenarios (tests/matrix_cases.py) hold
    # tests.matrix.Page, which a timeline of __main__.Page never equals
    from tests import matrix as _module
    sys.exit(_module.main())
