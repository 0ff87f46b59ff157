"""The fault-scenario matrix (tests/matrix.py) on a *live* vmalert: the scenarios vmalert's replay
mode cannot play (restarts, clears, replaced nodes, nodes leaving service discovery, a GPU lost for
longer than the inventory lookback, rules that read their own last result), played in real time.

Each scenario gets its own VictoriaMetrics and its own vmalert on 127.0.0.1 (nothing shared: no
label or tenant trick can change what a rule sees), all scenarios of an engine at once, so an
engine's whole set takes about its longest scenario (82 steps of 10 s). Every :data:`STEP`
seconds of wall time the scenario's virtual scrape of that step (:func:`tests.matrix.scraped`:
the same samples promtool reads, staleness markers included) is remote-written to the
scenario's VictoriaMetrics with the step's wall-clock timestamp, :data:`LEAD` seconds ahead of it,
and made searchable at once (``/internal/force_flush``; VictoriaMetrics makes a series it has never
seen searchable only ~10 s after its first sample otherwise, which Prometheus' scrape does not
do). vmalert evaluates the rendered matrix rules at the wall clock every :data:`EVAL` seconds (the
10 s groups at their own interval) and writes its recording results and ``ALERTS`` back by remote
write, as deployed: nothing is flushed for it, so its own write lag is the real one.

A restart (``Case.restarts``) stops vmalert by PID at the restart step and starts a new one, on the
same VictoriaMetrics and with ``-remoteRead.url`` pointing there (so it restores its alerts' ``for``
state from ``ALERTS_FOR_STATE``, as Prometheus does from its TSDB), after ``Case.down`` steps
without scrapes. Whatever the old vmalert wrote stays in VictoriaMetrics without a staleness
marker: the restart of the model (tests/matrix_restart.py) happens for real here.

After the run each scenario's ``ALERTS`` samples are read back raw (``/api/v1/export``) and the
pages at step ``s`` are those of each group's last evaluation before step ``s + 1``'s samples are
written (:func:`timeline`). Steps while vmalert is down are not observed: they keep the pages of
the step before (Alertmanager holds a page that long), and so does the first step after a restart
for a page the new vmalert wrote as pending there (it restores its alerts' ``for`` state only after
its first evaluation). The timeline is judged exactly as
promtool's (:func:`tests.matrix_timeline.judge`), with ``Case.vm_pages`` where this engine
differs.
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from gpumon.localprom import LocalVictoriaMetrics, LocalVmalert, rfc3339_seconds
from gpumon.ruletests.series import MISSING
from tests import matrix_timeline
from tests.engines import VmEngine
from tests.matrix import IDENTITY, PAGES, STEP, Case, Page, matrix_spec, rules_text, scraped
from tests.matrix_vm import alert_steps, firing_at, post_series
from tests.notifier_sink import NotifierSink

#: vmalert's ``-evaluationInterval`` (the groups without their own): promtool's, half a step
EVAL = STEP // 2
#: seconds before a step that its samples are written: searchable by every evaluation from the step on
LEAD = 1.0
#: vmalert's ``-remoteWrite.flushInterval`` (gpumon.localprom.LocalVmalert), seconds
FLUSH = 1.0
#: seconds after the servers are up until step 0 (rounded up to a whole step)
WARMUP = 5
#: the series that shows each inventory evaluation (the inventory group's heartbeat, rules/fresh.py)
HEARTBEAT = 'rule_group:gpumon_evaluation:timestamp{rule_group="gpumon.inventory"}'
#: vmalert's own figures that tell a gap in a group's pages from the engine's side (a group that
#: missed iterations or took long, failed queries, notifications or writes): read from its
#: ``/metrics`` before each stop, printed for a scenario that fails
HEALTH = re.compile(r'^vmalert_(iteration_missed_total|execution_errors_total|alerts_send_errors_total|'
                    r'remotewrite_errors_total|remotewrite_dropped_rows_total|iteration_duration_seconds\{.*quantile="1"\})')


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a running process (``/proc/<pid>/stat``); 0 when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class LiveOutcome:
    """One scenario on one engine: the verdict on its per-step timeline and what the run measured."""

    case: Case
    verdict: matrix_timeline.Verdict
    #: steps (vmalert up) at which no inventory evaluation showed: a harness or load problem
    missed: list[int] = field(default_factory=list)
    #: seconds each vmalert start took (the first and one per restart)
    starts: list[float] = field(default_factory=list)
    #: the most seconds a step's samples became searchable after the step's time (a positive value: the
    #: evaluations right at the step read the step before; load on the test process)
    late: float = 0.0
    cpu: float = 0.0
    log: str = ""
    #: per vmalert run, its :data:`HEALTH` figures (counters above 0, the slowest iteration per group)
    health: list[str] = field(default_factory=list)
    #: for a failed scenario, what the store holds: each ALERTS series' samples (firing and pending)
    #: and the heartbeats, as runs of seconds after step 0 (:func:`runs`)
    samples: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.verdict.ok

    @property
    def starved(self) -> list[str]:
        """Why this run says more about the machine than about the rules (empty: nothing says so):
        steps without an inventory evaluation, samples written over half a step late, and vmalert's
        own figures of an engine that could not keep up (:func:`starvation`)."""
        out = [f"no inventory evaluation at steps {self.missed}"] if self.missed else []
        if self.late > STEP / 2:
            out.append(f"samples searchable {self.late:+.1f} s after their step")
        return out + [reason for text in self.health for reason in starvation(text)]

    @property
    def timeline(self) -> matrix_timeline.Timeline:
        return self.verdict.timeline


#: vmalert's figures of a run that could not keep up with the wall clock: missed iterations, failed
#: notifications and remote writes (each a timeout under load in the runs seen), dropped rows
_STARVED_COUNTERS = ("iteration_missed_total", "alerts_send_errors_total", "remotewrite_errors_total",
                     "remotewrite_dropped_rows_total")


#: how :meth:`Scenario.read_health` reports a vmalert that did not answer its ``/metrics``
UNREADABLE = "/metrics unreadable"


class Replayed(UserWarning):
    """Scenarios failed the first pass and were played again (:mod:`tests.test_matrix_vmlive`): the
    first pass' report, the stored samples of each failed scenario among it, cut to
    :data:`REPLAYED_MAX` characters, so a run that passed on the second pass still shows why the
    first failed."""

    def __init__(self, report: str):
        super().__init__("live vmalert scenarios played again after failing the first pass:\n"
                         + (report if len(report) <= REPLAYED_MAX else report[:REPLAYED_MAX] + "\n..."))


#: the most characters of a first pass' report a :class:`Replayed` warning carries
REPLAYED_MAX = 12000


def starvation(health: str) -> list[str]:
    """The lines of one vmalert run's :data:`HEALTH` text (:meth:`Scenario.read_health`) that show
    an engine starved of CPU rather than a rule's result: a counter of :data:`_STARVED_COUNTERS`
    above 0, or a group whose slowest iteration took longer than :data:`EVAL` (its next one was
    late), or a ``/metrics`` that did not answer within 5 s. Execution errors are not among them: a
    query the engine refuses is the rules' fault."""
    out = []
    for line in health.splitlines():
        if line.startswith(UNREADABLE):
            out.append(line)
            continue
        name, _, value = line.rpartition(" ")
        try:
            number = float(value)
        except ValueError:
            continue
        counter = any(name.startswith(f"vmalert_{c}") for c in _STARVED_COUNTERS)
        if (counter and number > 0) or (name.startswith("vmalert_iteration_duration_seconds") and number > EVAL):
            out.append(line)
    return out


def judge(case: Case, timeline: matrix_timeline.Timeline) -> matrix_timeline.Verdict:
    """``timeline`` judged as promtool's, against ``Case.vm_pages`` (and ``vm_bound``) where set."""
    if case.vm_pages is None:
        return matrix_timeline.judge(case, timeline, STEP)
    return matrix_timeline.judge(case, timeline, STEP, pages=case.vm_pages, bound=case.vm_bound or case.bound,
                                 end=case.vm_pages)


def down_steps(case: Case) -> set[int]:
    """Steps at which vmalert is stopped (a restart: ``down`` steps from each of ``restarts``)."""
    return {s for r in case.restarts for s in range(r, r + case.down)}


def timeline(firing: dict[int, list[str]], t0: int, case: Case, every: dict[str, int],
             pending: dict[int, list[str]] | None = None) -> matrix_timeline.Timeline:
    """Step -> pages, from ``firing`` (second -> pages, :func:`tests.matrix_vm._firing`): at step
    ``s`` each group's last evaluation before ``t0 + (s + 1) * STEP``, when step ``s + 1``'s samples
    become readable. A step while vmalert is down keeps the pages of the step before.

    The first step after a restart also keeps a page of the step before that the new vmalert's
    evaluation read there wrote as *pending* (``pending``: second -> pending alerts, as ``firing``):
    vmalert restores its alerts' ``for`` state from ``ALERTS_FOR_STATE`` only after a group's first
    evaluation (app/vmalert/rule/group.go, "restore the rules state after the first evaluation"), so
    that evaluation writes every restored alert as pending and the next one as firing again, while
    Alertmanager holds the page sent before the restart (its ``endsAt`` is hours ahead). A restore
    that failed stays pending for the rule's whole ``for`` and shows as a gap at the next step."""
    out: dict[int, frozenset] = {}
    down = down_steps(case)
    for s in range(case.steps):
        if s in down:
            pages = out.get(s - 1, frozenset())
        else:
            when = t0 + (s + 1) * STEP - 1
            pages = _pages(firing_at(firing, when, every), case)
            if s - 1 in down:
                pages |= out.get(s - 1, frozenset()) & _pages(firing_at(pending or {}, when, every), case)
        if pages:
            out[s] = pages
    return out


def _pages(texts: list[str], case: Case) -> frozenset:
    """The pages of ALERTS label texts, with their cluster only in a scenario of several clusters."""
    pages = frozenset(matrix_timeline.page_of(t, Page) for t in texts)
    return pages if case.clusters else frozenset(Page(p.alert, p.node, p.gpu, p.field) for p in pages)


class Scenario:
    """One scenario on its own VictoriaMetrics and vmalert, stepped in real time from ``t0``."""

    def __init__(self, case: Case, engine: VmEngine, rules: Path, notifier: str, restore: bool = True):
        self.case, self.engine, self.rules, self.notifier = case, engine, rules, notifier
        self.restore = restore
        scrape = scraped(case, matrix_spec(case.clusters))
        self.rows = [({"__name__": name, **dict(labels)}, row) for (name, labels), row in scrape.series.items()]
        self.vm: LocalVictoriaMetrics | None = None
        self.vmalert: LocalVmalert | None = None
        self.starts: list[float] = []
        self.late = -LEAD
        self.cpu = 0.0
        self.logs: list[str] = []
        self.health: list[str] = []
        self.client = httpx.Client(timeout=30)

    def start_store(self) -> None:
        """Start the scenario's VictoriaMetrics."""
        # -search.disableCache: vmalert reads what was written a second ago (tests/live_alerting.py)
        self.vm = LocalVictoriaMetrics(binary=self.engine.victoria_metrics, extra_args=["-search.disableCache"])
        self.vm.start()

    def push(self, step: int, t0: int) -> None:
        """Write step ``step``'s samples at their wall-clock time and make them searchable."""
        ts = (t0 + step * STEP) * 1000
        series = [(labels, [(ts, row[step])]) for labels, row in self.rows if row[step] != MISSING]
        for attempt in range(3):
            try:
                post_series(self.client.post, self.vm.url, series)
                self.client.get(f"{self.vm.url}/internal/force_flush").raise_for_status()
                self.late = max(self.late, round(time.time() - ts / 1000, 2))
                return
            except httpx.TransportError:
                # VictoriaMetrics closes a keep-alive connection left idle (a long restart): a
                # write on it fails before it arrives, and goes again on a new connection
                if attempt == 2:
                    raise

    def start_vmalert(self) -> None:
        """Start a vmalert on the scenario's VictoriaMetrics (at step 0 and after each restart)."""
        # 1.79 has no -rule.evalDelay; the current vmalert evaluates 30 s in the past unless told
        # that VictoriaMetrics answers up to now (-search.latencyOffset=0s, LocalVictoriaMetrics)
        extra = [f"-remoteRead.url={self.vm.url}", "-remoteRead.lookback=1h"] if self.restore else []
        extra += ["-rule.evalDelay=0s"] if self.engine.current else []
        # a firing alert is sent once, not at every evaluation: the pages are read from ALERTS, and each
        # send happens inside the group's evaluation (tests/notifier_sink.py)
        extra += ["-rule.resendDelay=1h"]
        t = time.monotonic()
        self.vmalert = LocalVmalert([self.rules], self.vm.url, self.notifier, evaluation_interval=f"{EVAL}s",
                                    binary=self.engine.vmalert, extra_args=extra)
        self.vmalert.start()
        self.starts.append(round(time.monotonic() - t, 2))

    def stop_vmalert(self) -> None:
        """Stop vmalert by PID (a restart, or the end), keeping its CPU seconds and log."""
        if self.vmalert:
            self.cpu += _cpu_seconds(self.vmalert.proc.pid)
            self.health.append(self.read_health())
            self.logs.append(self.vmalert.logs())
            self.vmalert.stop()
            self.vmalert = None

    def read_health(self) -> str:
        """The running vmalert's :data:`HEALTH` lines that say something: counters above 0, and
        each group's slowest iteration when it took over a second."""
        try:
            text = self.client.get(f"{self.vmalert.url}/metrics", timeout=5).text
        except httpx.HTTPError as exc:
            return f"{UNREADABLE}: {exc!r}"
        out = []
        for line in text.splitlines():
            if not HEALTH.match(line):
                continue
            value = float(line.rsplit(" ", 1)[1])
            if value > (1.0 if "iteration_duration" in line else 0.0):
                out.append(line)
        return "\n".join(out) or "nothing missed, failed or slow"

    def play(self, t0: int) -> None:
        """Step through the scenario from wall time ``t0`` (Unix seconds): write each step's samples
        (none while vmalert is restarting), stop vmalert at each restart step and start it again
        after ``down`` steps, and stop it once the last step's evaluations are written."""
        down = down_steps(self.case)
        for step in range(self.case.steps):
            at = t0 + step * STEP
            if step in down and step - 1 not in down:
                _sleep_until(at)
                self.finish_evaluations(at)
                self.stop_vmalert()
                continue
            if step in down:
                continue
            _sleep_until(at - LEAD)
            self.push(step, t0)
            if self.vmalert is None:
                self.start_vmalert()
        # the last step's evaluations, and vmalert's remote-write flush (1 s) after them
        _sleep_until(t0 + self.case.steps * STEP + 2)
        self.stop_vmalert()

    def finish_evaluations(self, at: float, limit: float = 2 * EVAL) -> None:
        """Wait, at most ``limit`` seconds, until every group has run its last rule in its last
        evaluation before ``at`` (Unix seconds), so that a stop at ``at`` does not cut it.

        On a loaded machine an iteration can take seconds: a SIGTERM in the middle cancels the
        rules not yet run (vmalert writes the group's first records and not its ALERTS or its
        heartbeat), and the step before the restart then reads no page, as if the alert had
        ended. In production Alertmanager holds the page across such a cut; here the pages are
        read back from the store, so the harness lets the evaluation finish, as a stop a moment
        later would. Rules of a group run in order (concurrency 1), so its last rule's
        ``lastEvaluation`` tells the whole iteration ran. Then its remote writes get their flush
        (:data:`FLUSH`): vmalert 1.79 stopped right after an evaluation lost that evaluation's
        ``ALERTS`` (stored up to the evaluation before, the heartbeat of the last one)."""
        deadline = time.time() + limit
        while time.time() < deadline:
            try:
                groups = self.client.get(f"{self.vmalert.url}/api/v1/rules", timeout=5).json()["data"]["groups"]
            except (httpx.HTTPError, ValueError, KeyError):
                return  # not answering: the stop goes ahead, read_health says why
            if all(not g["rules"] or rfc3339_seconds(g["rules"][-1].get("lastEvaluation", "")) >= at - g["interval"]
                   for g in groups):
                time.sleep(FLUSH + 1)
                return
            time.sleep(0.2)

    def export(self, match: str, start: int, end: int) -> list[dict]:
        """Raw samples of ``match`` in [start, end] (seconds): ``/api/v1/export`` lines."""
        res = self.client.post(f"{self.vm.url}/api/v1/export", data={"match[]": match, "start": start, "end": end})
        res.raise_for_status()
        return [json.loads(line) for line in res.text.splitlines() if line.strip()]

    def outcome(self, t0: int, every: dict[str, int]) -> LiveOutcome:
        """Read the pages back and judge the timeline."""
        self.client.get(f"{self.vm.url}/internal/force_flush").raise_for_status()
        end = t0 + (self.case.steps + 1) * STEP
        ids = IDENTITY + (("cluster",) if self.case.clusters else ())
        firing, pending = ({}, {})
        for state, into in (("firing", firing), ("pending", pending)):
            for line in self.export(PAGES.replace('"firing"', f'"{state}"'), t0 - 600, end):
                text = "{" + ", ".join(f'{k}="{line["metric"][k]}"' for k in sorted(ids) if k in line["metric"]) + "}"
                for ts, value in zip(line["timestamps"], line["values"]):
                    if value is not None and not (isinstance(value, float) and math.isnan(value)) and value == 1:
                        into.setdefault(ts // 1000, []).append(text)
        seen = timeline(firing, t0, self.case, every, pending)
        beats = {ts // 1000 for line in self.export(HEARTBEAT, t0 - 600, end) for ts in line["timestamps"]}
        down = down_steps(self.case)
        missed = [s for s in range(self.case.steps) if s not in down and s - 1 not in down and s
                  and not any(t0 + s * STEP <= b < t0 + (s + 1) * STEP for b in beats)]
        verdict = judge(self.case, seen)
        samples = [] if verdict.ok else self.samples(t0, end)
        return LiveOutcome(self.case, verdict, missed, self.starts, self.late, self.cpu,
                           "\n".join(self.logs)[-3000:], list(self.health), samples)

    def samples(self, t0: int, end: int) -> list[str]:
        """Each ALERTS series (firing and pending), heartbeat and gpumon record of the expected
        pages' nodes the store holds, one line each: its labels that tell it apart, and its
        samples' times as :func:`runs` of seconds after ``t0`` (a hole in a record the alert reads,
        or a pending run inside a firing one, tells a blip of the rule's condition from a write that
        never arrived)."""
        nodes = "|".join(sorted({p.node for p in self.case.pages if p.node})) or "none"
        out = []
        for match in ('ALERTS{alertstate=~"firing|pending"}', HEARTBEAT,
                      f'{{__name__=~"job_(gpu|node):.+",Hostname=~"{nodes}"}}'):
            for line in self.export(match, t0 - 600, end):
                labels = {k: v for k, v in sorted(line["metric"].items()) if k in SHOWN}
                when = [ts // 1000 - t0 for ts, v in zip(line["timestamps"], line["values"])
                        if v is not None and not (isinstance(v, float) and math.isnan(v))]
                out.append(f"{labels}: {runs(when)}")
        return out

    def close(self) -> None:
        """Stop every server of the scenario."""
        self.stop_vmalert()
        if self.vm:
            self.cpu += _cpu_seconds(self.vm.proc.pid)
            self.vm.stop()
        self.client.close()


#: the labels that tell gpumon's pages and heartbeats apart in :meth:`Scenario.samples`
SHOWN = ("__name__", "alertname", "alertstate", "Hostname", "gpu", "dcgm_field", "rule_group")


def runs(seconds: list[int], gap: int = 2 * EVAL) -> str:
    """Sorted ``seconds`` as runs ``a-b`` (consecutive samples at most ``gap`` apart), comma-separated:
    [0, 5, 10, 30, 35] -> "0-10, 30-35"; a lone sample is just its second."""
    out, start, last = [], None, None
    for s in sorted(seconds):
        if start is not None and s - last > gap:
            out.append(f"{start}-{last}" if last != start else f"{start}")
            start = None
        start = s if start is None else start
        last = s
    if start is not None:
        out.append(f"{start}-{last}" if last != start else f"{start}")
    return ", ".join(out) or "none"


def _sleep_until(when: float) -> None:
    time.sleep(max(0.0, when - time.time()))


def run(cases: list[Case], engine: VmEngine, keep: Path | None = None, restore: bool = True) \
        -> tuple[list[LiveOutcome], dict[str, float]]:
    """Play every case at once on ``engine``, each on its own VictoriaMetrics and vmalert (with
    ``restore`` false, a restarted vmalert does not restore its alerts' state: no ``-remoteRead.url``).

    Returns:
        (an outcome per case, in order; {"wall": seconds, "cpu": CPU seconds of every server}).
    """
    t_start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gpumon-matrix-vmlive-") as tmp, NotifierSink() as hook:
        folder = Path(keep or tmp)
        folder.mkdir(parents=True, exist_ok=True)
        rules, every = {}, {}
        for clusters in {c.clusters for c in cases}:
            path = rules[clusters] = folder / f"rules-{'cluster' if clusters else 'plain'}.yaml"
            path.write_text(rules_text(matrix_spec(clusters)))
            every.update(alert_steps(path))
        scenarios = [Scenario(c, engine, rules[c.clusters], hook.url, restore) for c in cases]
        try:
            with ThreadPoolExecutor(max_workers=len(scenarios)) as pool:
                list(pool.map(Scenario.start_store, scenarios))
                t0 = (int(time.time()) + WARMUP) // STEP * STEP + STEP
                for f in [pool.submit(s.play, t0) for s in scenarios]:
                    f.result()
            outcomes = [s.outcome(t0, every) for s in scenarios]
        finally:
            for s in scenarios:
                s.close()
    for o, s in zip(outcomes, scenarios):
        o.cpu = s.cpu
    return outcomes, {"wall": time.monotonic() - t_start, "cpu": sum(s.cpu for s in scenarios)}


__all__ = ["run", "timeline", "judge", "starvation", "LiveOutcome", "Scenario", "down_steps", "Replayed"]
