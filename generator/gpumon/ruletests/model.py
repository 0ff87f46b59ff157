"""One promtool test group ("scenario"): input series, expected alerts and expected expression
results, written in promtool's unit-test format.

Time is counted in *steps* of the test interval. Input samples sit on whole steps; rules are
evaluated every half step and every ``eval_time`` is a half step (``k + 0.5``), so no range
window or lookback edge ever falls on a sample. This makes results identical on Prometheus 2.x
(closed ranges) and 3.x (left-open ranges; source: prometheus ``docs/migration.md``) and keeps
the trap of prometheus/prometheus#7887 (a sample exactly at the window edge) out of every test.
"""

from __future__ import annotations

from ..promqltext import matchers, series
import math
from dataclasses import dataclass, field

from ..durations import format_duration
from ..rules.model import Rule
from .gotemplate import expand
from .series import MISSING, STALE, Token, compress


def test_step(spec) -> float:
    """The test interval in seconds for ``spec``: the scrape interval, but at least 60 s (every
    spec window is whole minutes, and finer steps only multiply promtool's work), reduced to a
    common divisor of every rule window so that each window spans whole steps and, with
    half-step evaluation times, never has a sample on its edge.

    Args:
        spec: a :class:`gpumon.spec.Spec`.
    Returns:
        seconds (>= 1).
    """
    exp, al = spec.exporter, spec.alerts
    step = int(max(60, math.ceil(exp.scrape_interval)))
    windows = (al.gap_window, al.inventory_lookback, al.flapping_window,
               max(al.frozen_window, 10 * exp.collect_interval),     # generator/gpumon/rules/values.py
               max(600.0, 4 * exp.sample_interval),                  # GpuLost window (rules/presence.py lost_window)
               max(300.0, 4 * exp.sample_interval))                  # energy rate window
    for w in windows:
        if w and int(w) == w:
            step = math.gcd(step, int(w))
    # the flapping scenario alternates up every step: its window must hold a few of them (a 1m
    # window at a 60s step held one, so the alert could not fire in its own test; issue #15)
    limit = max(1, int(al.flapping_window // 5))
    # scenarios that alternate every step expect ``for`` to outlast one step: a field missing every
    # other step keeps the gap alert true only if it was seen within ``for`` (rules/gaps.py);
    # a target down every other step must not complete GpuExporterDown's ``for``; the same
    # alternation must keep a flapping node "still reporting" within GpuLost's window
    # (rules/presence.py lost_window, 4 sample intervals: a 60 s window at a 60 s step held
    # one recorded sample on Prometheus 3's left-open ranges, found by the spec fuzzer)
    # a ``for`` the spec's overrides set counts like alerts.for
    fors = [al.for_] + [o.for_ for item in spec.overrides
                        for o in (item.settings, *(s for _, s in item.fields)) if o.for_]
    limit = max(1, min(limit, int(min(fors) // 2), int(4 * exp.sample_interval // 2)))
    # the exporter restart scenario needs the zero before a restart inside restart_window
    # (kubernetes_cases.py): a 2m window at a 60 s step saw only the restarted counter
    if spec.kubernetes is not None:
        limit = max(1, min(limit, int(spec.kubernetes.restart_window // 3)))
    if step > limit:
        step = next(d for d in range(limit, 0, -1) if step % d == 0)
    return float(max(step, 1))


def selector(metric: str, labels: dict[str, str]) -> str:
    """``metric{a="1",b="2"}`` with labels in the given order (values escaped)."""
    return series(metric, matchers(labels))


@dataclass(frozen=True)
class Firing:
    """One expected alert of ``rule``: the labels its expression yields (``dynamic``) and its
    value at the evaluation time (needed to expand ``{{ $value }}`` in annotations)."""

    rule: Rule
    dynamic: dict[str, str]
    value: float

    def labels(self) -> dict[str, str]:
        out = dict(self.dynamic)
        out.update(self.rule.label_map)
        return dict(sorted(out.items()))

    def as_dict(self) -> dict:
        labels = self.labels()
        notes = {k: expand(v, labels, self.value) for k, v in self.rule.annotations}
        return {"exp_labels": labels, "exp_annotations": notes}


@dataclass
class Scenario:
    """Builder for one promtool test group.

    Args:
        name: what the scenario shows (becomes the test group's ``name``).
        length: samples per input series (steps).
        step: the test interval in seconds (:func:`test_step`).
    """

    name: str
    length: int
    step: float
    series: dict[str, list[Token]] = field(default_factory=dict)
    alerts: dict[tuple[float, str], list[Firing]] = field(default_factory=dict)
    exprs: list[dict] = field(default_factory=list)

    # ------------------------------------------------------------------ input
    def add(self, metric: str, labels: dict[str, str], samples: list[Token]) -> None:
        """Add one input series; ``samples`` has one token per step (shorter = series ends).

        Raises:
            ValueError: the same series twice, or more samples than the scenario's length.
        """
        key = selector(metric, labels)
        if key in self.series:
            raise ValueError(f"scenario {self.name!r}: series {key} added twice")
        if len(samples) > self.length:
            raise ValueError(f"scenario {self.name!r}: {key} has {len(samples)} samples, length is {self.length}")
        self.series[key] = list(samples)

    def const(self, value: Token) -> list[Token]:
        """``value`` at every step."""
        return [value] * self.length

    # ------------------------------------------------------------------ expectations
    def eval_seconds(self, at: int) -> float:
        """Evaluation time of step ``at``: half a step after its sample."""
        return (at + 0.5) * self.step

    def expect(self, at: int, alertname: str, firing: list[Firing]) -> None:
        """At step ``at`` exactly ``firing`` alerts named ``alertname`` are firing (none: quiet).

        Raises:
            ValueError: ``at`` outside the scenario, or a firing rule with another name.
        """
        if not 0 <= at < self.length:
            raise ValueError(f"scenario {self.name!r}: eval step {at} outside 0..{self.length - 1}")
        for f in firing:
            if f.rule.alert != alertname:
                raise ValueError(f"{f.rule.alert} listed under {alertname}")
        self.alerts.setdefault((self.eval_seconds(at), alertname), []).extend(firing)

    def quiet(self, at: int, *alertnames: str) -> None:
        """No alert of any of ``alertnames`` fires at step ``at``."""
        for name in alertnames:
            self.expect(at, name, [])

    def expect_expr(self, at: int, expr: str, samples: list[tuple[str, float]]) -> None:
        """PromQL ``expr`` evaluated at step ``at`` returns exactly ``samples`` ((series text, value))."""
        self.exprs.append({"expr": expr, "eval_time": format_duration(self.eval_seconds(at)),
                           "exp_samples": [{"labels": s, "value": v} for s, v in samples]})

    # ------------------------------------------------------------------ output
    def as_dict(self) -> dict:
        """The promtool test group."""
        out: dict = {"name": self.name, "interval": format_duration(self.step), "input_series": []}
        for key, samples in self.series.items():
            out["input_series"].append({"series": key, "values": compress(samples)})
        tests = []
        for (seconds, name), firing in sorted(self.alerts.items()):
            items = sorted((f.as_dict() for f in firing), key=lambda d: sorted(d["exp_labels"].items()))
            tests.append({"eval_time": format_duration(seconds), "alertname": name, "exp_alerts": items})
        if tests:
            out["alert_rule_test"] = tests
        if self.exprs:
            out["promql_expr_test"] = self.exprs
        return out


def increase_value(samples: list[Token], at: int, window_steps: int) -> float:
    """What ``increase(x[window])`` evaluated at step ``at`` (+ half a step) returns for a counter
    without resets, computed as Prometheus does (``extrapolatedRate`` in promql/functions.go, the
    same in 2.x and 3.x): the increase between the first and last sample in the window,
    extrapolated towards the window's end by up to 1.1 average sample gaps (else half a gap), and
    towards its start the same way but never below zero. 0.0 with fewer than two samples.
    Times are in steps; the ratio makes the unit irrelevant."""
    lo = max(at - window_steps + 1, 0)
    points = [(i, float(samples[i])) for i in range(lo, min(at, len(samples) - 1) + 1)
              if samples[i] not in (MISSING, STALE)]
    if len(points) < 2:
        return 0.0
    (t0, v0), (t1, v1) = points[0], points[-1]
    result = v1 - v0
    sampled = float(t1 - t0)
    to_start, to_end = t0 - (at + 0.5 - window_steps), (at + 0.5) - t1
    average = sampled / (len(points) - 1)
    threshold = average * 1.1
    if result > 0 and v0 >= 0:
        to_start = min(to_start, sampled * (v0 / result))
    interval = sampled
    interval += to_start if to_start < threshold else average / 2
    interval += to_end if to_end < threshold else average / 2
    return result * (interval / sampled)


def window_value(samples: list[Token], at: int, window_steps: int) -> list[float]:
    """The numeric samples a range ``[window]`` evaluated at step ``at`` (+ half a step) sees:
    steps ``at - window_steps + 1 .. at`` (no sample sits on the edge)."""
    lo = at - window_steps + 1
    out = []
    for i in range(max(lo, 0), min(at, len(samples) - 1) + 1):
        tok = samples[i]
        if tok not in (MISSING, STALE):
            out.append(float(tok))
    return out
