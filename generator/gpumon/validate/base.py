"""What every validate check shares: the run context (spec, client, time, concurrent queries,
progress) and the GPU identity read from a series' labels."""

from __future__ import annotations

import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from functools import cached_property

from .. import promqltext, redact
from ..durations import format_duration
from ..findings import Finding
from ..promapi import Answer, PromClient, PromError
from ..rules import RuleGroup, build_groups
from ..spec import Spec
from . import facts
from .gpus import Gpu, device, device_id, device_in_cluster, other_spelling  # noqa: F401  (checks import them from here)


class Context:
    """A validate run: the spec, the API client, the evaluation time, the query helpers and the
    facts checks share (:mod:`gpumon.validate.facts`), each computed on first use:

    * ``targets``: the exporter job's targets, which are down, whether there are any;
    * ``inventory``: the GPUs seen now and within the lookback, per tracked metric;
    * ``rule_groups``: the ``/api/v1/rules`` answer (loaded groups: :func:`facts.loaded_groups`).

    A check reads the facts it needs and never changes them, so its findings do not depend on
    which other checks ran. A new shared fact is one more ``cached_property`` here.

    Args:
        spec: the loaded spec.
        client: a :class:`~gpumon.promapi.PromClient`.
        lookback: seconds of history the presence and continuity checks look at.
        concurrency: queries in flight at once (small: validate must not load the server).
        progress: show a progress line on stderr when it is a TTY and the run takes > 1 s.
        label_limit: warn about series with more label names than this (None: no check).
        groups: the rule groups built from ``spec`` (:func:`gpumon.rules.build_groups`): what the
            server should have loaded; built here when not given (:meth:`build_groups_ahead`).
    """

    def __init__(self, spec: Spec, client: PromClient, lookback: float = 3600.0, concurrency: int = 4,
                 progress: bool = True, label_limit: int | None = None,
                 groups: list[RuleGroup] | None = None):
        self.spec, self.client, self.lookback = spec, client, lookback
        self._groups: list[RuleGroup] | Future | None = groups
        self.label_limit = label_limit  # max label names per series (Mimir: 30), None = not checked
        self.job = spec.exporter.job
        self.labels = spec.exporter.labels
        self.now = time.time()
        self.concurrency = max(1, concurrency)
        self.pool = ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="gpumon-q")
        self._ahead: dict[tuple, object] = {}  # call -> Future of a prefetched query (:meth:`prefetch`)
        self.queries = 0
        self.done = 0
        self._lock = threading.Lock()
        self._started = time.monotonic()
        self._show = progress and sys.stderr.isatty()
        self._shown = False
        #: warnings of every partial answer of the run (Thanos/Mimir): what was not seen cannot be
        #: called missing, so :func:`gpumon.validate.validate` makes the run's errors inconclusive
        self.partial_warnings: list[str] = []

    # ------------------------------------------------------------------ shared facts
    @cached_property
    def targets(self) -> facts.Targets:
        """The exporter job's targets (:class:`facts.Targets`)."""
        return facts.targets(self)

    @cached_property
    def inventory(self) -> facts.Inventory:
        """GPUs seen now and within the lookback (:class:`facts.Inventory`)."""
        return facts.inventory(self)

    @cached_property
    def sources(self) -> facts.Sources:
        """Which source serves each GPU of every metric with ``sources`` (:class:`facts.Sources`)."""
        return facts.sources(self)

    @cached_property
    def rule_groups(self) -> "Answer | PromError":
        """The server's ``/api/v1/rules`` answer."""
        return self.run({"rules": ("rules",)})["rules"]

    @cached_property
    def history(self) -> float | None:
        """Seconds of the job's history the server holds within the lookback: the most scrapes any
        target of the job has in it (``max(count_over_time(up{job}[lookback]))``) times the scrape
        interval; None when the query failed or found none. Asked only when a message needs it: a
        server younger than ``--lookback`` has not seen what "never seen in the last 1h" names."""
        ans = self.queries_at_now({"history": f"max(count_over_time({self.sel('up')}[{format_duration(self.lookback)}]))"})
        ans = ans["history"]
        if isinstance(ans, PromError) or not ans.data:
            return None
        try:
            return float(ans.data[0]["value"][1]) * self.scrape_interval
        except (KeyError, IndexError, TypeError, ValueError):
            return None

    def window_text(self) -> str:
        """``the last 1h`` (the lookback), or ``the 40s of history the server holds for the job``
        when that is shorter by more than two scrapes (a server started after the lookback began)."""
        held = self.history
        if held is not None and held < self.lookback - 2 * self.scrape_interval:
            return f"the {format_duration(max(held, self.scrape_interval))} of history the server holds for the job"
        return f"the last {format_duration(self.lookback)}"

    @property
    def scrape_interval(self) -> float:
        """Seconds between scrapes: the targets API's scrapeInterval when known (the spec may be
        wrong about it), else the spec's."""
        return self.targets.scrape_interval

    @property
    def skip_gpu_checks(self) -> bool:
        """True when the job has no target at all: per-GPU checks have nothing to look at."""
        return self.targets.missing

    def target_down(self, instance: str) -> bool:
        """True when ``instance`` is down, flapping or scraped empty: the targets check reports it
        once, so per-GPU checks leave its GPUs alone."""
        return instance in self.targets.down

    @cached_property
    def expected_groups(self) -> list[RuleGroup]:
        """The rule groups gpumon renders for the spec (``rule_groups`` is what the server loaded)."""
        groups = self._groups
        return build_groups(self.spec) if groups is None else groups.result() if isinstance(groups, Future) else groups

    def build_groups_ahead(self) -> None:
        """Start building :attr:`expected_groups` in a thread of its own, when not given: called
        once the first queries are out, the build (0.2 s: every alert's annotations rendered)
        runs while the run waits for the server, not before the first request leaves."""
        if self._groups is None:
            self._groups = Future()
            threading.Thread(target=_resolve, args=(self._groups, build_groups, self.spec),
                             name="gpumon-groups", daemon=True).start()

    # ------------------------------------------------------------------ identity
    @property
    def id_labels(self) -> tuple[str, ...]:
        """Labels to ``group by`` for a GPU: job, instance, identity, both spellings of node and
        UUID, model and driver (so one query also feeds the inventory)."""
        lab = self.labels
        extra = (other_spelling(lab.node), other_spelling(lab.gpu), lab.model, lab.driver_version)
        return tuple(dict.fromkeys(("job", "instance") + lab.identity + extra))

    def gpu(self, metric: dict) -> Gpu:
        """The :class:`Gpu` a result's label set describes."""
        lab = self.labels
        node_label = lab.node if metric.get(lab.node) else other_spelling(lab.node) if metric.get(other_spelling(lab.node)) else ""
        uuid_label = lab.gpu if metric.get(lab.gpu) else other_spelling(lab.gpu) if metric.get(other_spelling(lab.gpu)) else ""
        return Gpu(metric.get("job", self.job), metric.get(node_label, ""), metric.get(uuid_label, ""),
                   metric.get(lab.gpu_index, ""), metric.get(lab.mig_instance, ""),
                   metric.get(lab.cluster, "") if lab.cluster else "", node_label, uuid_label)

    def sel(self, metric: str, *more: str, **matchers: str) -> str:
        """``metric{job="<job>",...}``: equality ``matchers`` (escaped here), then ``more``,
        matchers already formatted (e.g. a regex built with ``promqltext.matcher``)."""
        inner = ",".join((promqltext.matchers({"job": self.job, **matchers}),) + more)
        return promqltext.series(metric, inner)

    # ------------------------------------------------------------------ queries
    def _tick(self) -> None:
        with self._lock:
            self.done += 1
            if self._show and time.monotonic() - self._started > 1.0:
                self._shown = True
                sys.stderr.write(f"\rgpumon validate: {self.done}/{self.queries} queries")
                sys.stderr.flush()

    def run(self, calls: dict[str, tuple], each=None) -> dict[str, "Answer | PromError"]:
        """Run ``{key: (method name, *args)}`` on the client concurrently (bounded).

        ``each(key)``, when given, returns for a query's key a callable (or None) given every
        sample of its answer as it is decoded (:meth:`gpumon.promapi.PromClient.query`'s
        ``each``; the answer's ``data`` is then ``[]``): a large answer is read into what the
        caller keeps without ever being held decoded, instead of several waiting decoded at once
        (the reporting parts of a 64,000-GPU fleet). The callables must be thread-safe.

        Returns:
            {key: Answer, or the PromError it raised}.
        """
        with self._lock:
            ahead = {key: self._ahead.pop(call) for key, call in calls.items() if call in self._ahead}
            self.queries += len(calls) - len(ahead)
        sinks = {key: each(key) for key in calls} if each else {}
        futures = {key: ahead.get(key) or self.pool.submit(self._one, call, sinks.get(key))
                   for key, call in calls.items()}
        out = {key: future.result() for key, future in futures.items()}
        for key in ahead:
            # started before this run knew it streams: hand its samples over now
            if sinks.get(key) and not isinstance(out[key], PromError):
                for item in out[key].data:
                    sinks[key](item)
                out[key] = Answer([], out[key].warnings, out[key].infos)
        return out

    def _one(self, call: tuple, each=None) -> "Answer | PromError":
        name, *args = call
        try:
            answer = getattr(self.client, name)(*args, **({"each": each} if each else {}))
        except PromError as exc:
            return exc
        finally:
            self._tick()
        if answer.partial:
            with self._lock:
                self.partial_warnings += answer.warnings
        return answer

    def prefetch(self, calls) -> None:
        """Start ``calls`` (``(method name, *args)``, as :meth:`run` takes them) now, in the same
        bounded pool, for a later :meth:`run` or :meth:`queries_at_now` of the same call to take
        over: calls that do not depend on another's answer (the values, counters,
        duplicates and metadata checks') share the queue with the inventory's rounds instead of
        running in rounds of their own, so the server always has ``concurrency`` queries to work
        on and no round waits for its slowest query while the other cores idle. Each is still
        sent once."""
        with self._lock:
            for call in calls:
                if call not in self._ahead:
                    self._ahead[call] = self.pool.submit(self._one, call)
                    self.queries += 1

    def queries_at_now(self, exprs: dict[str, str], each=None) -> dict[str, "Answer | PromError"]:
        """Instant queries ``{key: expr}`` at the run's evaluation time, concurrently (``each``:
        see :meth:`run`)."""
        return self.run({k: ("query", e, self.now) for k, e in exprs.items()}, each)

    def close(self) -> None:
        self.pool.shutdown(wait=True)
        if self._shown:
            sys.stderr.write("\r" + " " * 60 + "\r")
            sys.stderr.flush()


@dataclass
class CheckResult:
    """What one check module returns: findings plus the JUnit cases (``check/subject``) it ran."""

    findings: list[Finding] = field(default_factory=list)
    cases: list[str] = field(default_factory=list)


def partial(findings: list[Finding], answer: Answer | None, case: str, check: str, subject: str) -> list[Finding]:
    """A partial answer (``warnings``) cannot prove a failure: turn its errors into
    ``inconclusive`` findings, or add one when nothing failed."""
    if answer is None or not answer.partial:
        return findings
    note = "partial response: " + redact.clip("; ".join(answer.warnings), 300)
    out = [replace(f, severity="inconclusive", message=f"{f.message} ({note})") if f.severity == "error" else f
           for f in findings]
    if not any(f.severity == "inconclusive" for f in out):
        out.append(Finding(check, "inconclusive", subject, f"cannot tell: {note}",
                           "a store or querier did not answer (Thanos/Mimir partial response); retry, or check the "
                           "store gateways", labels=(), case=case))
    return out


def query_failed(exc: PromError, check: str, subject: str, case: str) -> Finding:
    """A query error inside a check: the check could not look, so it is inconclusive."""
    return Finding(check, "inconclusive", subject, f"query failed: {exc}", exc.hint, case=case)


def answered(check: str, metrics, answers: dict, findings: list[Finding]):
    """Yield ``(metric, JUnit case, answer)`` for each metric whose query (``answers[metric.name]``)
    answered; a failed query becomes an inconclusive finding appended to ``findings`` instead."""
    for m in metrics:
        case, ans = f"{check}/{m.name}", answers[m.name]
        if isinstance(ans, PromError):
            findings.append(query_failed(ans, check, m.name, case))
            continue
        yield m, case, ans


def ago(seconds: float) -> str:
    """``'5m ago'``-style age."""
    s = int(max(0, seconds))
    return f"{s // 3600}h{s % 3600 // 60:02d}m ago" if s >= 3600 else f"{s // 60}m{s % 60:02d}s ago" if s >= 60 else f"{s}s ago"


def utc(ts: float) -> str:
    """RFC 3339 UTC time, second resolution."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def gpu_count(gpus) -> int:
    """How many physical GPUs ``gpus`` (:class:`Gpu` objects or keys, one per series label set)
    are: distinct :func:`device` s, so MIG instances and duplicate reports count once."""
    return len({device(g) for g in gpus})


def gpu_list(gpus, limit: int = 8) -> str:
    """``gpu-node-1 gpu 0 (GPU-..), ...`` with ``(+N more)`` past ``limit``."""
    items = sorted(gpus, key=lambda g: (g.job, g.cluster, g.node, int(g.index) if g.index.isdigit() else -1, g.index, g.mig))
    text = ", ".join(str(g) for g in items[:limit])
    return text + (f" (+{len(items) - limit} more)" if len(items) > limit else "")


def _resolve(future: Future, fn, *args) -> None:
    """Run ``fn(*args)`` into ``future`` (its result, or the exception it raised)."""
    try:
        future.set_result(fn(*args))
    except BaseException as exc:  # noqa: BLE001  (handed to whoever reads the result)
        future.set_exception(exc)
