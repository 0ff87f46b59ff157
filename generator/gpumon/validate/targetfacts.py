"""The exporter job's targets as validate sees them: a fact several checks read
(``ctx.targets``, :mod:`gpumon.validate.facts`), computed once per run. Does not import the run
context; ``ctx`` below is it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import NamedTuple

from ..durations import format_duration, parse_duration
from ..promapi import Answer, PromError
from ..promqltext import matcher


class Target(NamedTuple):
    """One active target of the exporter job, as the checks read it: the ``instance`` label (its
    scrape URL when it has none), ``health`` (``up``, ``down``, ``unknown``), the last scrape's
    error text and duration (seconds), ``scrapeInterval`` and ``scrapeTimeout`` in seconds (None
    when absent or unparsable) and the scrape URL. A tuple, not the API's object: at 64,000 GPUs
    (8,000 targets) the answer's objects cut to these fields still held 5.5 MB for the whole run,
    these tuples and their strings about 2.2 MB."""

    instance: str
    health: str
    last_error: str
    scrape_duration: float
    scrape_interval: float | None
    scrape_timeout: float | None
    scrape_url: str


@dataclass(frozen=True)
class Targets:
    """What the server says about the exporter job's targets.

    ``api`` is the ``/api/v1/targets`` answer (a PromError with kind ``not-found`` where the API
    does not exist: Mimir, Cortex); ``up`` (the targets not up, and their count labelled
    :data:`COUNTED`), ``empty`` (``scrape_samples_scraped == 0``) and
    ``flapping`` ({instance: share of successful scrapes} over ``window``) come from instant
    queries (``up`` only where the targets API does not exist: it is read only then). ``targets``
    are the job's active targets from the API (:class:`Target`). ``down`` are the instances
    whose GPUs per-GPU checks leave alone (down, flapping, or scraped with 0 samples: one outage,
    one finding, from the targets check). ``missing`` is true when the job has no target at all
    (every per-GPU check is skipped). ``scrape_interval`` (seconds) is the targets' own
    ``scrapeInterval`` when the API gives it (the spec may be wrong about it), else the spec's.
    """

    api: "Answer | PromError"
    up: "Answer | PromError | None"
    empty: "Answer | PromError"
    flapping: dict[str, float]
    window: str
    targets: tuple[Target, ...] = ()
    down: frozenset[str] = frozenset()
    missing: bool = False
    scrape_interval: float = 15.0


def targets(ctx) -> Targets:
    """Ask the targets API, then two instant queries at once (three where the API does not
    exist: the targets not up and their count), and derive :class:`Targets`."""
    job = ctx.job
    shared: dict = {}
    res = ctx.run({"targets": ("targets", lambda t: _compact(t, shared) if _job(t) == job else None)})["targets"]
    window = format_duration(min(ctx.spec.alerts.flapping_window, ctx.lookback))
    up_sel = f"up{{{matcher('job', job)}}}"
    no_api = isinstance(res, PromError) and res.kind == "not-found"
    # where there is no targets API: the targets not up, and how many there are (not every
    # target's ``up``: a sample per node, 8,000 of them for 64,000 GPUs)
    up_query = f'{up_sel} != 1 or label_replace(count({up_sel}), "{COUNTED}", "all", "", "")'
    extra = ctx.queries_at_now({**({"up": up_query} if no_api else {}),
                                "samples": f"scrape_samples_scraped{{{matcher('job', job)}}} == 0",
                                # flapping: often down, and changing state (not just down since a while)
                                "flapping": f"avg_over_time({up_sel}[{window}]) < "
                                            f"{ctx.spec.alerts.flapping_min_up_ratio:g}"
                                            f" and on (job, instance) changes({up_sel}[{window}]) >= 4"})
    extra.setdefault("up", None)
    flapping = {} if isinstance(extra["flapping"], PromError) else \
        {i["metric"].get("instance", ""): float(i["value"][1]) for i in extra["flapping"].data}
    base = Targets(res, extra["up"], extra["samples"], flapping, window,
                   scrape_interval=ctx.spec.exporter.scrape_interval)
    if isinstance(res, PromError):
        if res.kind != "not-found":
            return base  # the targets check reports the failed query; nothing is known to be down
        up = extra["up"]
        if isinstance(up, PromError):
            return base
        if not up.data:
            return replace(base, missing=True)
        return replace(base, down=frozenset(i["metric"].get("instance", "?") for i in not_up(up)))
    # the job's targets, each made a :class:`Target` as the answer was decoded
    found = tuple(t for t in res.data if isinstance(t, Target))
    if not found:
        return replace(base, missing=True)
    intervals = [t.scrape_interval for t in found if t.scrape_interval]
    down = {t.instance for t in found if t.instance in flapping or t.health == "down"}
    if not isinstance(extra["samples"], PromError):
        down |= {i["metric"].get("instance", "?") for i in extra["samples"].data}
    return replace(base, targets=found, down=frozenset(down),
                    scrape_interval=max(intervals) if intervals else base.scrape_interval)


#: the label marking the count of the job's targets in the ``up`` answer (never an exporter label)
COUNTED = "gpumon_targets"


def not_up(up: Answer) -> list[dict]:
    """The samples of the ``up`` answer (where there is no targets API) of targets not up: every
    one but the count of all targets."""
    return [i for i in up.data if COUNTED not in i["metric"]]


def _compact(target: dict, shared: dict) -> Target:
    """``target`` (an object of the targets API) as a :class:`Target`; its health, error text and
    durations shared through ``shared`` ({text: value}: ``up``, ``15s``, an empty error are one
    object each, not one per target)."""
    def text(value) -> str:
        value = value if isinstance(value, str) else ""
        return shared.setdefault(value, value)

    def duration(value) -> float | None:
        key = ("seconds", value)
        if key not in shared:
            shared[key] = seconds(value) if isinstance(value, str) else None
        return shared[key]
    labels = target.get("labels") or {}
    url = target.get("scrapeUrl") or ""
    return Target(labels.get("instance", url or "?"), text(target.get("health")), text(target.get("lastError")),
                  float(target.get("lastScrapeDuration") or 0), duration(target.get("scrapeInterval")),
                  duration(target.get("scrapeTimeout")), url)


def _job(target: dict) -> str | None:
    return (target.get("labels") or {}).get("job")


def seconds(text: str | None) -> float | None:
    """A Prometheus duration string in seconds, None when absent or unparsable."""
    try:
        return parse_duration(text) if text else None
    except ValueError:
        return None
