"""The checks a JSON Schema cannot express: durations against intervals, thresholds against
ranges, XID policies, alert names, flapping, legacy names, sources, runbook URLs."""

from __future__ import annotations

import dataclasses
import difflib
from typing import Any

from ruamel.yaml.comments import CommentedMap

from . import kube, sidecar, presets, bounds, metricnames
from ..alertnames import builtin_alerts
from ..durations import format_duration, parse_duration
from ..overrides import LINK_SCHEME
from .model import AlertSettings, DCGM_BLANK_MIN, Exporter, Labels, Metric, VOLATILE_LABELS
from .positions import _format_path, _position
from .problems import Problem


def _duration_or_none(value: Any) -> float | None:
    try:
        return parse_duration(value) if isinstance(value, str) else None
    except ValueError:
        return None


def _semantic_problems(doc: CommentedMap, plain: dict, name: str) -> list[Problem]:
    """Checks a schema cannot express. Runs on documents that may also have schema errors, so
    every access is type-guarded."""
    out: list[Problem] = []

    def add(path: list, msg: str) -> None:
        line, col = _position(doc, path)
        out.append(Problem(name, line, col, _format_path(path), msg))

    exp = plain.get("exporter") if isinstance(plain.get("exporter"), dict) else {}
    interval_text = exp.get("scrape_interval", format_duration(Exporter.scrape_interval))
    interval = _duration_or_none(interval_text)
    timeout = _duration_or_none(exp.get("scrape_timeout", format_duration(Exporter.scrape_timeout)))
    if interval is not None and timeout is not None and timeout > interval:
        add(["exporter", "scrape_timeout"], f"scrape_timeout ({format_duration(timeout)}) must not exceed "
            f"scrape_interval ({interval_text}); Prometheus rejects such a scrape config")
    labels = exp.get("labels") if isinstance(exp.get("labels"), dict) else {}
    for key, value in labels.items():
        if value in VOLATILE_LABELS or (isinstance(value, str) and value.startswith("exported_")):
            add(["exporter", "labels", key], f"{value!r} changes on restarts and with honor_labels; "
                "it must not identify a node or GPU (use Hostname/hostname, UUID, gpu, GPU_I_ID)")
    seen: dict[str, int] = {}
    metrics = plain.get("metrics") if isinstance(plain.get("metrics"), list) else []
    for i, metric in enumerate(metrics):
        if not isinstance(metric, dict):
            continue
        mname = metric.get("name")
        if mname in seen:
            add(["metrics", i, "name"], f"duplicate metric {mname!r} (first at metrics[{seen[mname]}])")
        seen.setdefault(mname, i)
        rng = metric.get("range")
        if (isinstance(rng, list) and len(rng) == 2 and all(isinstance(v, (int, float)) for v in rng)
                and rng[0] > rng[1]):
            add(["metrics", i, "range"], f"range minimum {rng[0]} is above its maximum {rng[1]}")
        elif (metric.get("kind") == "counter" and isinstance(rng, list) and len(rng) == 2
              and isinstance(rng[0], (int, float)) and not isinstance(rng[0], bool) and rng[0] > 0):
            # a counter starts again at 0 whenever the exporter or DCGM restarts: every restart
            # would read as implausible, on every GPU of the node at once (found by the fuzzer)
            add(["metrics", i, "range", 0], f"a counter's range cannot start above 0 ({rng[0]}): counters restart "
                "from 0 with the exporter, and every restart would read as implausible")
        if (metric.get("kind") == "counter" and isinstance(rng, list) and len(rng) == 2
                and isinstance(rng[1], (int, float)) and not isinstance(rng[1], bool)):
            # a counter's total only grows while the GPU works (energy: 18,000,000 mJ a minute at
            # 300 W): any maximum is crossed by a healthy GPU in time, and the whole fleet then
            # reads as implausible (found by the spec fuzzer: [0, 5] on the energy counter)
            add(["metrics", i, "range", 1], f"a counter's range has no maximum ({rng[1]}): its total grows for as "
                "long as the exporter runs, so every healthy GPU would cross it; use null, and bound its "
                "per-second rate with a threshold (`rate: 5m`)")
        if metric.get("frozen_check") and metric.get("kind") != "counter":
            add(["metrics", i, "frozen_check"], "frozen_check needs kind: counter (it checks that the counter increases)")
        elif metric.get("frozen_check") and any(
                isinstance(t, dict) and "rate" in t and t.get("op") == ">" and t.get("value") == 0
                for t in (metric.get("thresholds") if isinstance(metric.get("thresholds"), list) else [])):
            # frozen_check says a healthy counter rises; `> 0` on its rate pages whenever it does
            add(["metrics", i, "frozen_check"], "frozen_check expects this counter to rise on a healthy GPU, but a "
                "rate threshold > 0 pages whenever it rises; raise the threshold or drop frozen_check")
        _rate_problems(metric, i, add, interval, _duration_or_none(exp.get("collect_interval", format_duration(Exporter.collect_interval))))
        _threshold_problems(metric, i, add)
        _xid_problems(metric, i, add)
        _source_problems(metric, i, add, exp)
    _alert_name_problems(metrics, add)
    _legacy_name_problems(metrics, add)
    _shared_source_problems(metrics, add, exp)
    _flapping_problems(plain, add)
    _runbook_problems(plain.get("alerts") if isinstance(plain.get("alerts"), dict) else {}, add)
    if metrics and all(isinstance(m, dict) and m.get("presence") in ("optional", "sparse") for m in metrics):
        add(["metrics"], "no metric has presence: required; the GPU inventory, coverage and presence alerts are "
            "built from the required fields: mark the fields every GPU must report `presence: required` "
            "(e.g. DCGM_FI_DEV_GPU_TEMP)")
    kube.problems(plain, add)
    sidecar.problems(plain, add)
    bounds.problems(plain, add, {f.name: f.default for f in dataclasses.fields(Labels)})
    metricnames.problems(plain, add)
    return out


def _rate_problems(metric: dict, i: int, add, scrape: float | None, collect: float | None) -> None:
    """Thresholds on a counter compare its per-second rate (``rate:``), never the ever-growing
    total; the window must hold at least two distinct readings (2 x max(scrape, collect))."""
    thresholds = metric.get("thresholds") if isinstance(metric.get("thresholds"), list) else []
    floor = 2 * max(scrape or 0, collect or 0)
    for j, t in enumerate(thresholds):
        if not isinstance(t, dict):
            continue
        if metric.get("kind") == "counter" and "rate" not in t:
            add(["metrics", i, "thresholds", j], "a threshold on a counter compares an ever-growing total; add "
                "`rate: 5m` to compare its per-second rate (reset safe)")
        elif "rate" in t and metric.get("kind") != "counter":
            add(["metrics", i, "thresholds", j, "rate"], "rate needs kind: counter (a gauge is compared as it is)")
        elif "rate" in t and t.get("op") in ("<", "<=", "==", "!="):
            # a healthy error counter stays flat (rate 0): `< x` would page every GPU, and the
            # generated tests model a rate rising past the threshold (found by the spec fuzzer)
            add(["metrics", i, "thresholds", j, "op"], f"a rate threshold compares with > or >= (a counter rising "
                f"too fast), not {t.get('op')}; a counter that stops rising is what frozen_check catches")
        elif "rate" in t and isinstance(t.get("value"), (int, float)) and not isinstance(t["value"], bool) and (
                t["value"] < 0 or (t["value"] == 0 and t.get("op") == ">=")):
            add(["metrics", i, "thresholds", j, "value"], f"threshold {t.get('op')} {t['value']} on a rate always "
                "fires: a counter's rate is never negative; use > 0 to page on any increase")
        elif "rate" in t:
            window = _duration_or_none(t["rate"])
            if window is not None and floor and window < floor:
                add(["metrics", i, "thresholds", j, "rate"], f"rate window {t['rate']} is shorter than 2 x max(scrape, "
                    f"collect interval) = {format_duration(floor)}: rate() would often see one sample and return nothing")


def _threshold_problems(metric: dict, i: int, add) -> None:
    """A threshold no plausible reading can cross renders an alert that can never fire: thresholds
    only look at readings inside the range (and below the DCGM blank codes), so ``> 183`` on a
    range of [5, 110] is dead (issue 11, item 10)."""
    rng = metric.get("range") if isinstance(metric.get("range"), list) and len(metric["range"]) == 2 else [None, None]
    lo, hi = (v if isinstance(v, (int, float)) and not isinstance(v, bool) else None for v in rng)
    if lo is not None and hi is not None and lo > hi:
        return  # an inverted range is its own error
    thresholds = metric.get("thresholds") if isinstance(metric.get("thresholds"), list) else []
    for j, t in enumerate(thresholds):
        if not isinstance(t, dict) or not isinstance(t.get("value"), (int, float)) or t.get("op") not in (">", ">=", "<", "<=") \
                or "rate" in t:       # the range bounds readings, not rates
            continue
        op, v = t["op"], t["value"]
        # without a maximum, readings below the DCGM blank codes (< 2^47) are plausible
        dead = {">": not (hi if hi is not None else DCGM_BLANK_MIN - 1) > v,
                ">=": not (hi if hi is not None else DCGM_BLANK_MIN - 1) >= v,
                "<": lo is not None and not lo < v, "<=": lo is not None and not lo <= v}[op]
        # the other way round: every plausible reading crosses it, so the alert always fires and a
        # healthy GPU pages (found by the spec fuzzer: `> -49` on a range of [-44, 224])
        always = {">": lo is not None and lo > v, ">=": lo is not None and lo >= v,
                  "<": hi is not None and hi < v, "<=": hi is not None and hi <= v}[op]
        if dead:
            side = (f"the plausible maximum {hi}" if hi is not None else "the DCGM blank codes (2^47)") \
                if op in (">", ">=") else f"the plausible minimum {lo}"
            add(["metrics", i, "thresholds", j, "value"],
                f"threshold {op} {v} can never fire: thresholds only see plausible readings and {side} "
                f"does not pass it; {'lower' if op in ('>', '>=') else 'raise'} the threshold or widen `range`")
        elif always:
            side = f"the plausible minimum {lo}" if op in (">", ">=") else f"the plausible maximum {hi}"
            add(["metrics", i, "thresholds", j, "value"],
                f"threshold {op} {v} always fires: {side} already crosses it, so every plausible reading "
                f"pages; {'raise' if op in ('>', '>=') else 'lower'} the threshold or narrow `range`")


def _xid_problems(metric: dict, i: int, add) -> None:
    """An XID policy belongs on a code field, names each code once, and replaces thresholds there."""
    xid = metric.get("xid")
    if not isinstance(xid, dict):
        return
    if metric.get("unit") != "code":
        add(["metrics", i, "xid"], "an XID policy needs unit: code (the value is the code of the last XID)")
    if metric.get("thresholds"):
        add(["metrics", i, "thresholds"], "thresholds on an XID code compare codes as numbers and stay firing until "
            "the exporter restarts; the xid policy already alerts per code")
    seen: dict[int, str] = {}
    for level in ("critical", "warning", "info", "ignore"):
        codes = xid.get(level) if isinstance(xid.get(level), list) else []
        for j, code in enumerate(codes):
            if isinstance(code, int) and code in seen:
                add(["metrics", i, "xid", level, j], f"XID {code} is already listed under {seen[code]}")
            seen.setdefault(code, level)


def _alert_names(metrics: list) -> list[tuple[str, str, list]]:
    """(alert name, severity, path of its threshold) for every threshold, with the default name
    the loader derives when ``alert`` is not given."""
    out = []
    for i, metric in enumerate(metrics):
        if not isinstance(metric, dict) or not isinstance(metric.get("name"), str):
            continue
        camel = Metric(name=metric["name"], kind="gauge", unit="none", presence="optional").camel
        for j, t in enumerate(metric.get("thresholds") if isinstance(metric.get("thresholds"), list) else []):
            if isinstance(t, dict) and isinstance(t.get("severity"), str):
                name = t.get("alert") or f"Gpu{camel}{'High' if t.get('op') in ('>', '>=') else 'Low'}"
                path = ["metrics", i, "thresholds", j] + (["alert"] if "alert" in t else ["severity"])
                out.append((str(name), t["severity"], path))
    return out


def _alert_name_problems(metrics: list, add) -> None:
    """One alert name must mean one severity: with kube-prometheus-stack's default inhibit rule
    (``equal: [namespace, alertname]``) one GPU's critical alert would mute every GPU's warning of
    the same name (issue 11, item 11). gpumon's own alert names are taken."""
    first: dict[str, tuple[str, list]] = {}
    for name, severity, path in _alert_names(metrics):
        if name in builtin_alerts():
            add(path, f"alert name {name!r} is one of gpumon's own alerts; name the threshold differently")
        elif name in first and first[name][0] != severity:
            add(path, f"alert {name!r} is already used at severity {first[name][0]} ({_format_path(first[name][1])}); "
                f"give the {severity} level its own name (e.g. {name}{severity.capitalize()}): an inhibit rule "
                "equal on alertname would let one GPU's critical mute every GPU's warning")
        first.setdefault(name, (severity, path))


def _flapping_problems(plain: dict, add) -> None:
    """GpuExporterFlapping needs a success share below ``flapping_min_up_ratio`` *and* more than two
    up/down changes in ``flapping_window``: at least two successful scrapes, one success in
    ``int(1/ratio) + 1``. A ratio so low that the window cannot hold that is an alert that can never
    fire (found by the spec fuzzer: 0.014 over 10m of 15s scrapes)."""
    alerts = plain.get("alerts") if isinstance(plain.get("alerts"), dict) else {}
    exporter = plain.get("exporter") if isinstance(plain.get("exporter"), dict) else {}
    ratio = alerts.get("flapping_min_up_ratio")
    window = _duration_or_none(alerts.get("flapping_window", format_duration(AlertSettings.flapping_window)))
    interval = _duration_or_none(exporter.get("scrape_interval", format_duration(Exporter.scrape_interval)))
    if not isinstance(ratio, (int, float)) or isinstance(ratio, bool) or not 0 < ratio <= 1 or not window or not interval:
        return
    period = int(1 / ratio) + 1
    if period + 1 > window / interval:
        add(["alerts", "flapping_min_up_ratio"], f"flapping_min_up_ratio {ratio:g} means one success in {period} "
            f"scrapes, but flapping_window ({format_duration(window)}) holds only {int(window // interval)} scrapes: "
            "GpuExporterFlapping could never fire; raise the ratio or lengthen the window")


def _legacy_name_problems(metrics: list, add) -> None:
    """A 1.x name stands for one field: listed under two metrics (or as another metric's own
    name) it would be counted, and alerted on, twice (found by the spec fuzzer, issue #15)."""
    owner: dict[str, int] = {m["name"]: i for i, m in enumerate(metrics)
                             if isinstance(m, dict) and isinstance(m.get("name"), str)}
    for i, metric in enumerate(metrics):
        names = metric.get("legacy_names") if isinstance(metric, dict) else None
        for j, legacy in enumerate(names if isinstance(names, list) else []):
            if not isinstance(legacy, str):
                continue
            if legacy in owner and owner[legacy] != i:
                add(["metrics", i, "legacy_names", j], f"{legacy!r} is already "
                    f"{'the name' if legacy == metrics[owner[legacy]].get('name') else 'a legacy name'} of "
                    f"metrics[{owner[legacy]}]; a 1.x name belongs to one field")
            owner.setdefault(legacy, i)


def _shared_source_problems(metrics: list, add, exp: dict) -> None:
    """A source series carries one field: listed under two metrics it would be read as both, and
    the rule tests rendered for them built the same input series twice (found by the spec fuzzer)."""
    owner: dict[tuple, tuple[int, int]] = {}
    for i, metric in enumerate(metrics):
        entries = metric.get("sources") if isinstance(metric, dict) else None
        for j, raw in enumerate(entries if isinstance(entries, list) else []):
            preset = raw if isinstance(raw, str) else (raw.get("preset") if isinstance(raw, dict) else None)
            if isinstance(preset, str) and preset not in presets.PRESETS:
                continue  # reported by _source_problems
            src = _source_fields(raw, metric, exp)
            if src is None or not isinstance(src["name"], str):
                continue
            key = (src["name"], src["job"])
            if key in owner and owner[key][0] != i:
                add(["metrics", i, "sources", j], f"{src['name']!r} (job {src['job']!r}) is already "
                    f"metrics[{owner[key][0]}].sources[{owner[key][1]}]: a source series carries one field")
            owner.setdefault(key, (i, j))


def _source_fields(raw: Any, metric: dict, exp: dict) -> dict | None:
    """A source entry (preset name or mapping) with its preset applied: keys ``name``, ``job``,
    ``unit``, ``label``, ``gpu_prefix``, ``gpu``, ``node``, ``gpu_index``, ``preset`` (None where
    neither the entry nor its preset says); None when the entry is not a string or mapping."""
    if isinstance(raw, str):
        raw = {"preset": raw}
    if not isinstance(raw, dict):
        return None
    preset = presets.PRESETS.get(raw.get("preset")) if isinstance(raw.get("preset"), str) else None
    labels = raw.get("labels") if isinstance(raw.get("labels"), dict) else {}
    out = {"preset": raw.get("preset") if preset else None, "name": raw.get("name"), "job": raw.get("job"),
           "unit": raw.get("unit"), "label": raw.get("label"), "gpu_prefix": raw.get("gpu_prefix"),
           "gpu": labels.get("gpu"), "node": labels.get("node"), "gpu_index": labels.get("gpu_index")}
    if preset is not None:
        series = preset.series.get(metric.get("name"))
        legacy = metric.get("legacy_names") if isinstance(metric.get("legacy_names"), list) else []
        if raw.get("preset") == "dcgm-exporter-1.x" and legacy and isinstance(legacy[0], str):
            series = (legacy[0], None)  # the spec's own 1.x name wins over the table
        if series is not None:
            out["name"] = out["name"] or series[0]
            out["unit"] = out["unit"] or series[1]
        for key in ("job", "gpu", "node", "gpu_index"):
            out[key] = out[key] or getattr(preset, key)
        out["gpu_prefix"] = out["gpu_prefix"] or preset.gpu_prefix
        out["label"] = out["label"] or raw["preset"]
    job = exp.get("job") if isinstance(exp.get("job"), str) else None
    same_job = out["job"] is None or out["job"] == job
    lab = exp.get("labels") if isinstance(exp.get("labels"), dict) else {}
    if same_job:   # the exporter's own job: its labels, unless the entry (or preset) says otherwise
        out["gpu"] = out["gpu"] or lab.get("gpu", Labels.gpu)
        out["node"] = out["node"] or lab.get("node", Labels.node)
        out["gpu_index"] = out["gpu_index"] or (lab.get("gpu_index", Labels.gpu_index) if preset is None or
                                                preset.gpu_index is None else None)
    out["job"] = out["job"] or job
    out["unit"] = out["unit"] or metric.get("unit")
    out["label"] = out["label"] or out["name"]
    out["gpu_prefix"] = out["gpu_prefix"] or "keep"
    return out


def _source_problems(metric: dict, i: int, add, exp: dict) -> None:
    """Sources must name a known preset the metric is in, convert to the metric's unit, say which
    labels hold the GPU and node (a foreign job has no exporter labels), differ from the primary
    and from each other (issue 13)."""
    sources = metric.get("sources")
    if not isinstance(sources, list):
        return
    labels_seen: dict[str, int] = {}
    series_seen: dict[tuple, int] = {}
    for j, raw in enumerate(sources):
        path = ["metrics", i, "sources", j]
        preset = raw if isinstance(raw, str) else (raw.get("preset") if isinstance(raw, dict) else None)
        if isinstance(preset, str) and preset not in presets.PRESETS:
            hint = difflib.get_close_matches(preset, list(presets.PRESETS), n=1, cutoff=0.5)
            add(path + ([] if isinstance(raw, str) else ["preset"]), f"unknown source preset {preset!r}"
                + (f"; did you mean {hint[0]!r}?" if hint else f"; presets: {', '.join(sorted(presets.PRESETS))}"))
            continue
        src = _source_fields(raw, metric, exp)
        if src is None:
            continue
        if src["name"] is None:
            if src["preset"]:
                covered = sorted(presets.PRESETS[src["preset"]].series)
                add(path, f"preset {src['preset']!r} has no series for {metric.get('name')!r}; it covers "
                    f"{', '.join(covered)} (or give `name:`)")
            else:
                add(path, "a source needs a preset or a series `name`")
            continue
        unit = metric.get("unit")
        if isinstance(unit, str) and isinstance(src["unit"], str) and presets.conversion(src["unit"], unit) is None:
            add(path + (["unit"] if isinstance(raw, dict) and "unit" in raw else []),
                f"source unit {src['unit']!r} cannot convert to the metric's unit {unit!r}")
        if src["gpu"] is None:
            add(path, f"source {src['name']!r} (job {src['job']!r}) does not say which label holds the GPU UUID: "
                "add labels: {gpu: <label>} (e.g. uuid); without it no reading can be matched to a GPU")
        bounds.source_labels(src, raw, path, add, VOLATILE_LABELS)
        if src["node"] is None:
            add(path, f"source {src['name']!r} (job {src['job']!r}) does not say which label holds the node: add "
                "labels: {node: <label>}, or node: instance for the target's address without the port")
        if src["name"] == metric.get("name") and src["job"] == exp.get("job"):
            add(path, f"{src['name']!r} under the exporter's job is the metric itself, not another source")
        key = (src["name"], src["job"])
        if key in series_seen:
            add(path, f"{src['name']!r} (job {src['job']!r}) is already sources[{series_seen[key]}]")
            continue
        series_seen[key] = j
        if src["label"] == presets.PRIMARY:
            add(path, f"source label {presets.PRIMARY!r} is the primary's; give `label:` another value")
        elif src["label"] in labels_seen:
            add(path, f"source label {src['label']!r} is already sources[{labels_seen[src['label']]}]'s; "
                "give `label:` another value")
        labels_seen.setdefault(src["label"], j)


def _runbook_problems(alerts: dict, add) -> None:
    """A relative runbook base is a broken link in every notification; it is accepted only when
    the spec says so (``runbook_url_relative: true``)."""
    url = alerts.get("runbook_url")
    if not isinstance(url, str) or not url:
        return
    scheme = LINK_SCHEME.match(url)
    if scheme and scheme.group(1).lower() not in ("http", "https"):
        # every notification and Grafana shows the link as is: javascript:, data: or file: there is
        # a script or a local file one click away
        add(["alerts", "runbook_url"], f"runbook_url {url!r} has the scheme {scheme.group(1)!r}; runbook links "
            "must be http(s) (https://…/output/runbooks) or, with runbook_url_relative: true, a relative path")
        return
    if "://" not in url and not alerts.get("runbook_url_relative"):
        add(["alerts", "runbook_url"], f"runbook_url {url!r} is relative: Alertmanager notifications and Grafana carry "
            "it verbatim, so every link is broken; use an absolute base (https://…/output/runbooks), or set "
            "runbook_url_relative: true if the links are only read in a git forge's view of output/rules/")
