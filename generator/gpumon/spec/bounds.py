"""Spec checks against hostile or absurd input (issue #15, findings 2, 4, 5 and 7): what a spec
may hold so that every spec that loads renders rules promtool accepts and tests that pass.

Each check reports through ``add(path, message)`` (the spec loader turns the path into
FILE:LINE:COL). Every access is type-guarded: these run on documents that may also have schema
errors. The limits:

- strings: no control characters (tab and newline only in ``description`` and ``summary``), no
  ``{{`` or ``}}`` anywhere (Prometheus expands rule labels and annotations as Go templates),
  at most :data:`MAX_STRING` characters;
- numbers: finite, magnitude at most :data:`MAX_NUMBER` (far below DCGM's 2^47 blank codes);
- durations: each in the bounds of :data:`DURATIONS` (in seconds; windows at least two scrape
  intervals, so they always hold two samples; ``for`` and lookbacks at most 6h, windows at most
  1h: the promtool tests rendered for an alert grow with them, and ``for: 7d``, an
  ``inventory_lookback`` of 7d or a ``flapping_window`` of 1d took minutes in promtool), and
  against each other (:func:`relations`);
- thresholds: one a plausible reading can cross (``> max`` of the range never fires), high ones
  above low ones;
- labels: identity labels are not ``job``, not reserved (``__*``) and not each other; alert label
  keys are Prometheus label names.
"""

from __future__ import annotations

import math
import re
from typing import Any, Callable

from ..durations import format_duration, parse_duration

Add = Callable[[list, str], None]

MAX_STRING = 4096
#: bound on every number in a spec; DCGM blank codes start at 2^47 (about 1.4e14)
MAX_NUMBER = 1e12
#: keys whose strings may span lines
_FREE_TEXT = frozenset({"description", "summary"})
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")
_PROM_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
DAY, HOUR = 86400.0, 3600.0
#: the longest evaluation interval of a rule group whose records others read: under Prometheus'
#: default 5 minute lookback with a minute to spare, so each record is still there at the next
#: evaluation (vmalert's alerts read their group's records of the evaluation before) and in every
#: dashboard query between evaluations
GROUP_INTERVAL_MAX = 240.0
#: why a duration's upper bound is what it is, by path, where it is not plain sense
_WHY_HIGH = {
    ("alerts", key): ("longer, the group's records are older than Prometheus' 5 minute lookback between "
                      "evaluations: dashboards lose them, and on vmalert the alerts reading them never fire")
    for key in ("slow_group_interval", "gaps_group_interval")}
#: (path in the document, lowest, highest) in seconds; "2x" = twice exporter.scrape_interval
DURATIONS: tuple[tuple[tuple[str, ...], float | str, float], ...] = (
    (("exporter", "scrape_interval"), 1.0, HOUR),
    (("exporter", "scrape_timeout"), 0.001, HOUR),
    (("exporter", "collect_interval"), 0.001, 10 * 60.0),
    (("alerts", "for"), 0.0, 6 * HOUR),
    (("alerts", "implausible_for"), 0.0, 6 * HOUR),
    (("alerts", "inventory_lookback"), "2x", 6 * HOUR),
    (("alerts", "gap_window"), "2x", 6 * HOUR),
    (("alerts", "flapping_window"), "2x", HOUR),
    (("alerts", "frozen_window"), "2x", HOUR),
    (("alerts", "slow_group_interval"), 1.0, GROUP_INTERVAL_MAX),
    (("alerts", "gaps_group_interval"), 1.0, GROUP_INTERVAL_MAX),
    (("kubernetes", "restart_window"), "2x", DAY),
    (("kubernetes", "daemonset_for"), 0.0, DAY),
)


#: (alerts key, lowest) for the ratios: below these the rendered alerts (and their tests) cannot
#: tell a healthy target from a sick one: a GPU present in every other scrape (0.5) must count as
#: intermittent, a target up every other scrape as flapping, a scrape at 10% of the timeout as fast
RATIOS = (("gap_min_ratio", 0.7), ("flapping_min_up_ratio", 0.7), ("scrape_slow_ratio", 0.2))


def _d(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _l(value: Any) -> list:
    return value if isinstance(value, list) else []


def walk(node: Any, add: Add, path: list | None = None) -> None:
    """Strings and numbers anywhere in the document (keys too)."""
    path = path or []
    if isinstance(node, dict):
        for key, value in node.items():
            _string(str(key), path + [key], add, key=True)
            walk(value, add, path + [key])
    elif isinstance(node, list):
        for i, value in enumerate(node):
            walk(value, add, path + [i])
    elif isinstance(node, str):
        last = next((p for p in reversed(path) if isinstance(p, str)), "")
        _string(node, path, add, free_text=last in _FREE_TEXT)
    elif isinstance(node, bool) or node is None:
        return
    elif isinstance(node, float) and not math.isfinite(node):
        add(path, f"{node} is not a finite number")
    elif isinstance(node, (int, float)) and _number(node) is None:
        shown = str(node) if len(str(node)) <= 20 else f"a {len(str(abs(node)))}-digit number"
        add(path, f"{shown} is out of bounds (at most {MAX_NUMBER:g} in magnitude)")


def _string(text: str, path: list, add: Add, *, free_text: bool = False, key: bool = False) -> None:
    what = "key" if key else "value"
    if len(text) > MAX_STRING:
        add(path, f"{what} longer than {MAX_STRING} characters")
        return
    bad = _CONTROL.search(text) or (None if free_text else re.search(r"[\t\n]", text))
    if bad:
        add(path, f"{what} holds the control character {bad.group()!r}; "
            + ("only tab and newline are allowed here" if free_text else "write it on one line, without tabs"))
    if "{{" in text or "}}" in text:
        add(path, f"{what} holds {{{{ or }}}}: Prometheus would expand it as a Go template in alert labels "
            "and annotations; remove the braces")


def durations(plain: dict, add: Add) -> None:
    """Every duration within its bounds; thresholds' and overrides' ``for`` as ``alerts.for``."""
    interval = _seconds(_d(plain.get("exporter")).get("scrape_interval"))
    interval = 15.0 if interval is None else interval
    for path, low, high in DURATIONS:
        section = _d(plain.get(path[0]))
        if path[1] in section:
            _bounded(section[path[1]], list(path), low, high, interval, add)
    for i, metric in enumerate(_l(plain.get("metrics"))):
        for j, t in enumerate(_l(_d(metric).get("thresholds"))):
            if "for" in _d(t):
                _bounded(t["for"], ["metrics", i, "thresholds", j, "for"], 0.0, 6 * HOUR, interval, add)
    for name, body in _d(plain.get("overrides")).items():
        for path, settings in [([name], _d(body))] + [([name, "fields", f], _d(s))
                                                       for f, s in _d(_d(body).get("fields")).items()]:
            if "for" in settings:
                _bounded(settings["for"], ["overrides", *path, "for"], 0.0, 6 * HOUR, interval, add)


def _number(value: Any) -> float | None:
    """``value`` as a float when it is a number in bounds, else None (reported by :func:`walk`)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, int) and abs(value) > MAX_NUMBER:
        return None
    value = float(value)
    return value if math.isfinite(value) and abs(value) <= MAX_NUMBER else None


def _seconds(value: Any) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        return parse_duration(value)
    except ValueError:
        return None


def _bounded(value: Any, path: list, low: float | str, high: float, interval: float, add: Add) -> None:
    seconds = _seconds(value)
    if seconds is None:
        if value == "":
            add(path, "empty duration: give one, e.g. 5m (or 0s where zero is allowed)")
        return  # other shapes are the schema's to report
    floor = 2 * interval if low == "2x" else float(low)
    if seconds < floor or seconds > high:
        why = f"twice exporter.scrape_interval ({format_duration(floor)})" if low == "2x" else format_duration(floor)
        add(path, f"{value} is out of bounds: between {why} and {format_duration(high)}"
            + (" (a window must hold at least two scrapes)" if low == "2x" else "")
            + (f" ({_WHY_HIGH[tuple(path)]})" if seconds > high and tuple(path) in _WHY_HIGH else ""))


def relations(plain: dict, add: Add) -> None:
    """Durations against each other: the relations the rendered alerts (and the promtool tests
    rendered for them) rely on. Defaults are gpumon's (``spec.Exporter``, ``spec.AlertSettings``).

    - ``alerts.for`` at least two samples (max of scrape and collect interval): an alert outlasts
      one missed or blank sample;
    - ``alerts.for`` at most 3/4 of ``inventory_lookback``: a lost GPU alerts before it leaves the
      inventory;
    - ``gap_window`` holds enough scrapes that one missed scrape keeps the share at or above
      ``gap_min_ratio`` (ceil(1 / (1 - ratio)) + 1 scrapes), and at most ``inventory_lookback``;

    The bounds were found with promtool on the rendered tests (``gap_window`` 1m at a 15s scrape
    and ``for`` 30s at a 30s collect interval failed them).
    """
    exp, al = _d(plain.get("exporter")), _d(plain.get("alerts"))
    for key, low in RATIOS:
        value = _number(al.get(key))
        if value is not None and value < low:
            add(["alerts", key], f"{value:g} is below {low:g}: the alert could not tell a healthy target from a "
                "sick one (between {low:g} and 1)".replace("{low:g}", f"{low:g}"))

    def sec(section: dict, key: str, default: float) -> float | None:
        return _seconds(section[key]) if key in section else default

    scrape, collect = sec(exp, "scrape_interval", 15.0), sec(exp, "collect_interval", 30.0)
    for_, lookback = sec(al, "for", 300.0), sec(al, "inventory_lookback", 3600.0)
    gap, flap = sec(al, "gap_window", 1800.0), sec(al, "flapping_window", 600.0)
    ratio = _number(al.get("gap_min_ratio", 0.8))
    if None in (scrape, collect, for_, lookback, gap, flap) or scrape <= 0:
        return  # reported elsewhere

    def where(*keys: str) -> list:
        for key in keys:
            section, name = key.split(".")
            if name in _d(plain.get(section)):
                return [section, name]
        return [keys[0].split(".")[0]] if keys[0].split(".")[0] in plain else []

    sample = max(scrape, collect)
    if for_ < 2 * sample:
        add(where("alerts.for", "exporter.collect_interval", "exporter.scrape_interval"),
            f"alerts.for ({format_duration(for_)}) must be at least two samples ({format_duration(2 * sample)}, "
            "twice the longer of scrape_interval and collect_interval): an alert must outlast one missed sample")
    if for_ > 0.75 * lookback:
        add(where("alerts.for", "alerts.inventory_lookback"),
            f"alerts.for ({format_duration(for_)}) must be at most 3/4 of alerts.inventory_lookback "
            f"({format_duration(lookback)}): a lost GPU leaves the inventory before its alert could fire")

    # GpuLost fires ``for`` after a GPU is silent for 4 samples (rules/presence.py lost_window) and
    # resolves when the GPU leaves the lookback: it must fire for a while in between, and its
    # rendered test checks it there, three test steps (ruletests/model.py test_step) wide
    margin = 3 * min(max(60.0, scrape), for_ / 2, 2 * sample)
    if for_ <= 0.75 * lookback and for_ + 4 * sample + margin > lookback:
        add(where("alerts.inventory_lookback", "alerts.for"),
            f"must exceed alerts.for ({format_duration(for_)}) plus GpuLost's window of four samples "
            f"({format_duration(4 * sample)}) by at least {format_duration(margin)}: a lost GPU leaves the "
            "inventory before (or just after) its alert fires")

    if ratio is not None and 0 < ratio < 1:
        need = (math.ceil(1 / (1 - ratio) - 1e-9) + 1) * scrape
        if gap < need:
            add(where("alerts.gap_window", "alerts.gap_min_ratio", "exporter.scrape_interval"),
                f"gap_window ({format_duration(gap)}) must hold at least {format_duration(need)} of scrapes so that "
                f"one missed scrape keeps the share at or above gap_min_ratio ({ratio:g})")
    elif ratio is not None and ratio >= 1:
        add(where("alerts.gap_min_ratio"), "gap_min_ratio 1 alerts on every single missed scrape; use at most 0.99")
    if gap > lookback:
        add(where("alerts.gap_window", "alerts.inventory_lookback"),
            f"gap_window ({format_duration(gap)}) must not exceed alerts.inventory_lookback ({format_duration(lookback)})")


def thresholds(plain: dict, add: Add) -> None:
    """Thresholds of one metric that contradict each other: one alert series twice, or low and high
    thresholds that leave no healthy reading."""
    for i, metric in enumerate(_l(plain.get("metrics"))):
        metric = _d(metric)
        rng = _l(metric.get("range"))
        lo, hi = (_number(rng[0]), _number(rng[1])) if len(rng) == 2 else (None, None)
        if lo is not None and hi is not None and lo > hi:
            continue  # an inverted range is reported on its own
        # a threshold no plausible reading can cross: spec._threshold_problems (issue 11, item 10)
        # two thresholds of one metric with the same alert name and severity are one series twice
        seen: dict[tuple, int] = {}
        for j, t in enumerate(_l(metric.get("thresholds"))):
            t = _d(t)
            direction = "High" if t.get("op") in (">", ">=") else "Low"
            key = (t.get("alert") or f"derived-{direction}", t.get("severity"))
            if key in seen:
                add(["metrics", i, "thresholds", j], f"same alert name and severity as thresholds[{seen[key]}]: both "
                    "would produce the same alert series; give one its own alert name or severity")
            seen.setdefault(key, j)
        _rate_reach(metric, i, add)
        # high (> / >=) and low (< / <=) thresholds must leave healthy readings between them
        values = [(_number(_d(t).get("value")), _d(t).get("op"), j) for j, t in enumerate(_l(metric.get("thresholds")))]
        highs = [(v, j) for v, op, j in values if v is not None and op in (">", ">=")]
        lows = [(v, j) for v, op, j in values if v is not None and op in ("<", "<=")]
        if highs and lows and max(lows)[0] >= min(highs)[0]:
            (low, jl), (high, _) = max(lows), min(highs)
            add(["metrics", i, "thresholds", jl, "value"], f"the low threshold {low:g} is not below the high "
                f"threshold {high:g}: no reading is healthy, one of the alerts always fires")


def _rate_reach(metric: dict, i: int, add: Add) -> None:
    """A rate threshold a counter can hold: rising that fast for its window, its ``for`` and the hour
    around them, it stays below the DCGM blank codes (2^47, readings at or above are dropped as
    "not supported"). Past that the alert can never fire for its ``for``, and its test cannot play."""
    for j, t in enumerate(_l(metric.get("thresholds"))):
        t = _d(t)
        value, window = _number(t.get("value")), _seconds(t.get("rate"))
        if value is None or window is None:
            continue
        span = window + (_seconds(t.get("for")) or 0) + 3600
        if value * span >= 2 ** 46:
            add(["metrics", i, "thresholds", j, "value"], f"a counter rising {value:g}/s passes 2^47, where gpumon "
                f"reads DCGM's blank codes and drops the reading, within {format_duration(2 ** 47 / value)}: "
                "the alert could not hold for its `for`; lower the threshold")


#: the exporter.labels keys that identify a GPU (kept on every alert)
IDENTITY_KEYS = ("cluster", "node", "gpu", "gpu_index", "mig_instance")
#: labels gpumon's rules write on their own series (``rules.names``: FIELD_LABEL, SOURCE_LABEL, and
#: the implausible/kubernetes ``reason``): an identity label of that name would be overwritten
GPUMON_LABELS = ("dcgm_field", "source", "reason")
#: labels every alert carries with a meaning of its own (Prometheus' ``alertname`` and ``ALERTS``'
#: ``alertstate``, gpumon's per-alert ``severity``)
ALERT_LABELS = ("alertname", "alertstate", "severity")
#: ``sources[].labels.node`` value meaning the target's instance without its port
#: (``presets.NODE_FROM_INSTANCE``)
NODE_FROM_INSTANCE = "instance"


def label_problem(value: str) -> str | None:
    """Why ``value`` cannot name a GPU identity label (node, GPU, index), or None."""
    if value == "job":
        return f"{value!r} cannot be a GPU label: job is the scrape job's"
    if value.startswith("__"):
        return f"{value!r} cannot be a GPU label: names starting with __ are Prometheus' own"
    if value in GPUMON_LABELS:
        return f"{value!r} cannot be a GPU label: gpumon's rules write it on their own series"
    if value in ALERT_LABELS:
        return (f"{value!r} cannot be a GPU label: every alert sets its own {value} (an identity label of that "
                "name would be overwritten on the alert that names the GPU)")
    return None


def labels(plain: dict, add: Add, defaults: dict[str, str | None]) -> None:
    """Identity labels distinct and not ``job``/reserved; alert label keys valid for Prometheus.
    ``defaults``: the exporter.labels defaults (``spec.Labels``)."""
    given = _d(_d(plain.get("exporter")).get("labels"))
    lab = {**defaults, **given}
    seen: dict[str, str] = {}
    for key, value in lab.items():
        if not isinstance(value, str):
            continue
        if label_problem(value):
            add(["exporter", "labels", key] if key in given else ["exporter", "labels"], label_problem(value))
        elif value in seen:
            add(["exporter", "labels", key] if key in given else ["exporter", "labels"], f"{value!r} is already exporter.labels.{seen[value]}: each label "
                "names a different thing")
        seen.setdefault(value, key)
    for key in _d(_d(plain.get("alerts")).get("labels")):
        if not _PROM_LABEL.fullmatch(key) or key.startswith("__") or key == "alertname":
            add(["alerts", "labels", key], f"{key!r} is not a label name Prometheus accepts on an alert "
                "(letters, digits and _, not starting with a digit or __, not alertname)")
        elif key == "severity":
            # every alert sets its own severity, which would override this one without a word
            add(["alerts", "labels", key], "severity is set per alert, not for all of them: give it on each "
                "threshold (metrics[].thresholds[].severity) or in an XID policy (metrics[].xid); gpumon's "
                "own alerts carry the severity their runbook explains")
    identity = {lab.get(k) for k in IDENTITY_KEYS if isinstance(lab.get(k), str)}
    for i, metric in enumerate(_l(plain.get("metrics"))):
        for j, name in enumerate(_l(_d(metric).get("alert_labels"))):
            if name == "job" or name in identity or (isinstance(name, str) and name.startswith("__")):
                add(["metrics", i, "alert_labels", j], f"{name!r} is already kept on every alert (job and the "
                    "identity labels) or reserved; list only extra labels")


def source_labels(src: dict, raw: Any, path: list, add: Add, volatile: tuple[str, ...]) -> None:
    """A source's GPU, node and GPU-index labels (``src``: resolved, preset and exporter defaults
    applied; ``raw``: the entry as written) get the checks exporter.labels gets: not job, reserved
    or gpumon's own labels, not a target/pod label (the node may be ``instance``: the target's
    address without its port), and each a different label."""
    given = _d(_d(raw).get("labels"))
    seen: dict[str, str] = {}
    for key in ("gpu", "node", "gpu_index"):
        value = src.get(key)
        if not isinstance(value, str):
            continue
        where = path + (["labels", key] if key in given else [])
        why = label_problem(value)
        if why is None and value in volatile and not (key == "node" and value == NODE_FROM_INSTANCE):
            why = f"{value!r} names a target or pod, not a {'GPU' if key != 'node' else 'node'}"
        if why is None and value in seen:
            why = (f"labels.{key} {value!r} is already labels.{seen[value]}: the GPU, node and GPU index are "
                   "each a different label")
        if why:
            add(where, why)
        else:  # a refused label is reported once, not again as a duplicate
            seen.setdefault(value, key)


def problems(plain: dict, add: Add, label_defaults: dict[str, str | None]) -> None:
    """Every check of this module."""
    walk(plain, add)
    durations(plain, add)
    relations(plain, add)
    thresholds(plain, add)
    labels(plain, add, label_defaults)
