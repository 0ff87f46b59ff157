"""``scrape-interval-mismatch`` (part of the targets check): the exporter job's real
``scrapeInterval``/``scrapeTimeout`` (``/api/v1/targets``) against the spec's
``exporter.scrape_interval``/``scrape_timeout``.

gpumon's rules are built from the spec's interval: rate windows, ``for:`` clauses, gap ratios,
the presence tiers. When the targets are scraped at another interval
the rules still load, and nothing says they are wrong. The decision reuses the spec's own bounds
(:mod:`gpumon.spec.bounds`, and the interval checks of :mod:`gpumon.spec.semantic`): the spec's
durations are checked again with the real interval in place of the spec's; a bound that holds with
the spec's interval and breaks with the real one is an error (the rendered rules rely on it), any
other difference a warning (re-render with the real interval).
"""

from __future__ import annotations

from typing import Iterable, NamedTuple

from ..durations import format_duration
from ..findings import Finding
from ..spec import bounds
from ..spec.positions import _format_path
from ..spec.semantic import _flapping_problems, _rate_problems

ID = "scrape-interval-mismatch"
#: targets named in one finding
SHOWN = 3


class Group(NamedTuple):
    """Targets of the job scraped with one interval and timeout (seconds; one scrape config)."""

    interval: float
    timeout: float | None
    instances: tuple[str, ...]


def spec_document(spec, interval: float) -> dict:
    """The spec's interval-bound settings as a spec document (what :mod:`gpumon.spec.bounds`
    checks), with ``interval`` as ``exporter.scrape_interval``."""
    d = format_duration
    exp, al = spec.exporter, spec.alerts
    doc = {
        "exporter": {"scrape_interval": d(interval), "scrape_timeout": d(min(exp.scrape_timeout, interval)),
                     "collect_interval": d(exp.collect_interval)},
        "alerts": {"for": d(al.for_), "implausible_for": d(al.implausible_for),
                   "inventory_lookback": d(al.inventory_lookback), "gap_window": d(al.gap_window),
                   "flapping_window": d(al.flapping_window), "frozen_window": d(al.frozen_window),
                   "slow_group_interval": d(al.slow_group_interval),
                   "gaps_group_interval": d(al.gaps_group_interval), "gap_min_ratio": al.gap_min_ratio,
                   "flapping_min_up_ratio": al.flapping_min_up_ratio, "scrape_slow_ratio": al.scrape_slow_ratio},
        "metrics": [{"name": m.name, "kind": m.kind,
                     "thresholds": [{"op": t.op, "value": t.value, "for": d(t.for_),
                                     **({"rate": d(t.rate)} if t.rate is not None else {})}
                                    for t in m.thresholds]}
                    for m in spec.metrics],
    }
    if spec.kubernetes is not None:
        doc["kubernetes"] = {"restart_window": d(spec.kubernetes.restart_window),
                             "daemonset_for": d(spec.kubernetes.daemonset_for)}
    return doc


def _interval_problems(doc: dict) -> list[str]:
    """The problems of the spec's checks that depend on the scrape interval, as ``path: message``."""
    out: list[str] = []

    def add(path: list, msg: str) -> None:
        out.append(f"{_format_path(path)}: {msg}" if path else msg)
    bounds.durations(doc, add)
    bounds.relations(doc, add)
    exp = doc["exporter"]
    scrape, collect = bounds._seconds(exp["scrape_interval"]), bounds._seconds(exp["collect_interval"])
    for i, metric in enumerate(doc["metrics"]):
        _rate_problems(metric, i, add, scrape, collect)
    _flapping_problems(doc, add)
    return out


def broken_bounds(spec, interval: float) -> list[str]:
    """The spec's bounds that hold with its own scrape interval and break with ``interval``
    (``path: message``, with the spec's names for the settings)."""
    before = set(_interval_problems(spec_document(spec, spec.exporter.scrape_interval)))
    return [p for p in _interval_problems(spec_document(spec, interval)) if p not in before]


def groups(targets: Iterable) -> list[Group]:
    """The targets (:class:`gpumon.validate.targetfacts.Target`) by interval and timeout, the
    most common first; targets without a ``scrapeInterval`` are left out."""
    by: dict[tuple, list[str]] = {}
    for t in targets:
        if t.scrape_interval:
            by.setdefault((t.scrape_interval, t.scrape_timeout), []).append(t.instance)
    return [Group(i, o, tuple(sorted(names))) for (i, o), names in
            sorted(by.items(), key=lambda kv: (-len(kv[1]), kv[0][0], kv[0][1] or 0))]


def decide(spec, found: list[Group]) -> list[tuple[str, str, str, Group]]:
    """(severity, message, hint, group) for each group scraped otherwise than the spec says;
    nothing when every target agrees with it."""
    exp, d = spec.exporter, format_duration
    out = []
    total = sum(len(g.instances) for g in found)
    for g in found:
        other_interval = abs(g.interval - exp.scrape_interval) > 1e-3
        other_timeout = g.timeout is not None and abs(g.timeout - exp.scrape_timeout) > 1e-3
        if not (other_interval or other_timeout):
            continue
        shown = ", ".join(g.instances[:SHOWN]) + (f" and {len(g.instances) - SHOWN} more"
                                                   if len(g.instances) > SHOWN else "")
        who = (f"the targets ({shown}) are" if len(g.instances) == total
               else f"{len(g.instances)} of the job's {total} targets ({shown}) "
                    + ("is" if len(g.instances) == 1 else "are"))
        said, real = [], ["scraped"]
        if other_interval:
            said.append(f"scrape_interval: {d(exp.scrape_interval)}")
            real.append(f"every {d(g.interval)}")
        if other_timeout:
            said.append(f"scrape_timeout: {d(exp.scrape_timeout)}")
            real.append(f"with a {d(g.timeout)} timeout")
        msg = f"the spec says {', '.join(said)}; {who} {' '.join(real)}"
        change = ", ".join(([f"scrape_interval: {d(g.interval)}"] if other_interval else [])
                           + ([f"scrape_timeout: {d(g.timeout)}"] if other_timeout else []))
        broken = broken_bounds(spec, g.interval) if other_interval else []
        several = len(found) > 1
        if broken:
            msg += (f". At the real interval the rendered rules break the spec's own bounds: "
                    + "; ".join(broken[:3]) + (f" (and {len(broken) - 3} more)" if len(broken) > 3 else ""))
            hint = (f"set {change} in the spec (and lengthen the settings named above until `gpumon render` accepts "
                    "the spec), then re-render and deploy the rules; or scrape the job at the spec's interval")
        elif other_interval:
            hint = (f"re-render with {change} (or scrape the job at the spec's interval): the rules' windows and "
                    "`for:` clauses are sized for the spec's interval")
        else:
            hint = (f"re-render with {change} (or scrape the job with the spec's timeout): GpuExporterScrapeSlow "
                    "compares scrape durations with the spec's timeout where Prometheus exposes no "
                    "scrape_timeout_seconds")
        if several:
            hint += ("; the job's targets are scraped at different intervals (several scrape configs): give the job "
                     "one interval, or render for the longest")
        out.append(("error" if broken else "warning", msg, hint, g))
    return out


def findings(ctx, targets: Iterable, case: str) -> list[Finding]:
    """``scrape-interval-mismatch`` findings for the job's targets (none when they agree with the
    spec, or give no interval)."""
    job = ctx.job
    return [Finding(ID, severity, job, msg, hint, labels=(("job", job), ("scrape_interval", format_duration(g.interval))),
                    case=case)
            for severity, msg, hint, g in decide(ctx.spec, groups(targets))]
