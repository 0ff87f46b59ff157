"""The exporter job's targets as validate sees them: a fact several checks read
(``ctx.targets``, :mod:`gpumon.validate.facts`), computed once per run. Does not import the run
context; ``ctx`` below is it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..durations import format_duration, parse_duration
from ..promapi import Answer, PromError
from ..promqltext import matcher


@dataclass(frozen=True)
class Targets:
    """What the server says about the exporter job's targets.

    ``api`` is the ``/api/v1/targets`` answer (a PromError with kind ``not-found`` where the API
    does not exist: Mimir, Thanos Query); ``up`` (the targets not up, and their count labelled
    :data:`COUNTED`), ``empty`` (``scrape_samples_scraped == 0``) and
    ``flapping`` ({instance: share of successful scrapes} over ``window``) come from instant
    queries (``up`` only where the targets API does not exist: it is read only then). ``targets`` are the job's active targets from the API. ``down`` are the instances
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
    targets: tuple[dict, ...] = ()
    down: frozenset[str] = frozenset()
    missing: bool = False
    scrape_interval: float = 15.0


def targets(ctx) -> Targets:
    """Ask the targets API, then two instant queries at once (three where the API does not
    exist: the targets not up and their count), and derive :class:`Targets`."""
    job = ctx.job
    strings: dict = {}
    res = ctx.run({"targets": ("targets", lambda t: _slim(t, strings) if _job(t) == job else None)})["targets"]
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
    # the job's targets, each :func:`_slim` as the answer was decoded (one the client did not
    # recognise as a target while decoding is still left out here)
    found = tuple(t for t in res.data if _job(t) == job)
    if not found:
        return replace(base, missing=True)
    intervals = [s for s in (seconds(t.get("scrapeInterval")) for t in found) if s]
    down = {instance(t) for t in found if instance(t) in flapping or t.get("health") == "down"}
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


#: the fields of a target the checks read (``/api/v1/targets`` sends more: discovered labels,
#: global URL, last scrape time, ...)
_KEPT = ("health", "lastError", "lastScrapeDuration", "scrapeInterval", "scrapeTimeout", "scrapeUrl")


def _slim(target: dict, strings: dict) -> dict:
    """``target`` with only :data:`_KEPT` and its ``job`` and ``instance`` labels, text values
    interned in ``strings`` (``up``, ``15s``, an empty error: one string, not one per target): at
    64,000 GPUs (8,000 targets) the full entries held about 10 MB for the whole run."""
    def kept(value):
        return strings.setdefault(value, value) if isinstance(value, str) else value
    labels = target.get("labels") or {}
    out = {k: kept(target[k]) for k in _KEPT if k in target}
    out["labels"] = {k: kept(labels[k]) for k in ("job", "instance") if k in labels}
    return out


def _job(target: dict) -> str | None:
    return (target.get("labels") or {}).get("job")


def instance(target: dict) -> str:
    """A target's ``instance`` label (its scrape URL when it has none)."""
    return (target.get("labels") or {}).get("instance", target.get("scrapeUrl", "?"))


def seconds(text: str | None) -> float | None:
    """A Prometheus duration string in seconds, None when absent or unparsable."""
    try:
        return parse_duration(text) if text else None
    except ValueError:
        return None
