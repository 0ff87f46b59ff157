"""Hypothesis strategies for gpumon specs (issue #15): documents shaped by the schema with values
drawn from both plausible and hostile pools (durations out of bounds, NaN/inf, huge integers,
quotes/backslashes/newlines/Go-template braces in label values and texts, RE2-incompatible
regexes, reserved and clashing label names, legacy names that are not metric names, source label
mappings and sidecar folders), then YAML-level mutations of the text (control
characters, invalid UTF-8, truncation, deep nesting, alias bombs, duplicated lines).

Used by tests/test_fuzz_spec.py; ``make fuzz`` runs it longer.
"""

from __future__ import annotations

import yaml
from hypothesis import strategies as st

METRICS = ("DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_XID_ERRORS",
           "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "DCGM_FI_DEV_MEMORY_TEMP", "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
           "DCGM_FI_DEV_FB_USED", "my_metric", "DCGM_FI_DEV_GPU_TMP")
UNITS = ("celsius", "watts", "millijoules", "percent", "ratio", "MHz", "MiB", "count", "code", "none")
GOOD_DURATIONS = ("0s", "1s", "10s", "15s", "30s", "1m", "2m", "5m", "10m", "15m", "30m", "1h")
BAD_DURATIONS = ("", "0", "500ms", "1h1ms", "96d", "293y", "8d", "7d", "1w", "5 minutes", "-1s", "1e3s",
                 "9" * 30 + "s", "1.5h", "10ms")
#: texts that end up in label values, titles, annotations and PromQL strings
HOSTILE_TEXT = ('x",job=~".+', "a\\b", "line1\nline2", "{{ $labels.job }}", "}}", "$labels", "$value", "tab\there",
                "ctl\x01", "del\x7f", "ümlaut", "'single'", "`tick`", "a" * 300, "", " ", "%s%n", "<b>html</b>",
                "\u2028sep", "${datasource}", "$__rate_interval", "\\", '"')
GOOD_TEXT = ("dcgm-exporter", "nvidia-dcgm-exporter", "gpu", "team-a", "GPU temperature", "https://runbooks.example/gpu")
LABEL_NAMES = ("Hostname", "hostname", "UUID", "gpu", "GPU_I_ID", "cluster", "modelName", "DCGM_FI_DRIVER_VERSION",
               "job", "__name__", "__x", "instance", "pod", "exported_pod", "a.b", "a/b", "1abc", "x-y", "team")
REGEXES = ("(.*)", ".*", "dgx-.*", "nvidia-dcgm-exporter-[a-z0-9]{5}", "(?=a).*", "(a)\\1", "a\\Z", "a++",
           "(?>a)", "[", "a{1001}", "(?P<n>x)", "\\d+", "node-(\\d+)", "(?i)GPU.*", "", "x|y", "\\pL+")
NUMBERS = (0, 1, 5, 83, 90, 100, 110, 700, -1, -40, 0.5, 1e-9, 1e12, 1e13, 2 ** 47, 1e308, float("inf"),
           float("-inf"), float("nan"), 10 ** 400, True, "83", None)


class Pools:
    """Value strategies; a hostile draw mixes in the bad pools, a clean one keeps to good values
    (a spec with one bad value among twenty fields is rejected, so clean specs exercise rendering)."""

    def __init__(self, hostile: bool, section_share: float | None = None):
        self.durations = st.one_of(st.sampled_from(GOOD_DURATIONS), st.sampled_from(BAD_DURATIONS), st.builds(
            lambda n, u: f"{n}{u}", st.integers(0, 10_000), st.sampled_from("smhdwy"))) if hostile \
            else st.sampled_from(GOOD_DURATIONS)
        self.windows = self.durations if hostile else st.sampled_from(("1m", "2m", "5m", "10m", "30m", "1h"))
        self.texts = st.one_of(st.sampled_from(GOOD_TEXT), st.sampled_from(HOSTILE_TEXT), st.text(max_size=20)) \
            if hostile else st.one_of(st.sampled_from(GOOD_TEXT), st.sampled_from(('x",y', "a\\b", "it's", "$1")))
        self.numbers = st.one_of(st.sampled_from(NUMBERS), st.integers(-1000, 1000), st.floats(-1e6, 1e6)) \
            if hostile else st.one_of(st.integers(-50, 1000), st.floats(-50, 1000, allow_nan=False, width=32))
        self.labels = st.sampled_from(LABEL_NAMES) if hostile else st.sampled_from(("team", "tier", "zone", "err_code"))
        self.regexes = st.sampled_from(REGEXES) if hostile else st.sampled_from(REGEXES[:4] + ("\\d+", "x|y"))
        self.hostile = hostile
        self.section_share = section_share

    def share(self, p: float) -> float:
        """The chance to draw an optional section: ``p``, or the pools' ``section_share`` when set
        (the promtool slice draws every newer section often, so its few specs reach them)."""
        return p if self.section_share is None else max(p, self.section_share)


def _optional(d: dict, key: str, strategy, draw, p: float = 0.5) -> None:
    if draw(st.floats(0, 1)) < p:
        d[key] = draw(strategy)


def _bad(pools: Pools, bad, good):
    return st.sampled_from(bad + good) if pools.hostile else st.sampled_from(good)


@st.composite
def thresholds(draw, pools: Pools, rng=None):
    """A threshold; a clean one lies strictly inside the metric's range ``rng`` (the spec refuses
    one no plausible reading crosses, or every one does)."""
    t = {"severity": draw(_bad(pools, ("page",), ("critical", "warning", "info"))),
         "op": draw(_bad(pools, ("==",), (">", ">=", "<", "<="))), "value": draw(pools.numbers)}
    if not pools.hostile and isinstance(rng, list):
        lo = rng[0] if rng[0] is not None else t["value"] - 100
        hi = rng[1] if rng[1] is not None else max(t["value"], lo) + 100
        if hi - lo > 1:
            t["value"] = round(lo + (hi - lo) * draw(st.sampled_from((0.25, 0.5, 0.75))), 3)
    _optional(t, "for", pools.durations, draw)
    _optional(t, "alert", _bad(pools, ("gpuLower", "Gpu Hot"), ("GpuHot", "GpuCold", "GpuX1")), draw, 0.3)
    _optional(t, "summary", pools.texts, draw, 0.2)
    return t


@st.composite
def metrics(draw, pools: Pools):
    names = METRICS if pools.hostile else METRICS[:8]
    m = {"name": draw(st.sampled_from(names)), "kind": draw(_bad(pools, ("histo",), ("gauge", "counter", "gauge"))),
         "unit": draw(st.sampled_from(UNITS)), "presence": draw(st.sampled_from(("required", "optional", "sparse")))}
    _optional(m, "range", st.lists(st.one_of(pools.numbers, st.none()), min_size=2, max_size=2), draw)
    if not pools.hostile and isinstance(m.get("range"), list) and None not in m["range"]:
        m["range"] = sorted(m["range"])
    if not pools.hostile and m["kind"] == "counter" and isinstance(m.get("range"), list):
        # counters restart from 0 with the exporter: a clean range starts at 0; a maximum (the spec
        # refuses one: the total grows) is drawn too
        m["range"] = [0, draw(st.integers(1, 10 ** 12)) if draw(st.floats(0, 1)) < 0.15 else None]
    if pools.hostile or m["kind"] == "gauge":
        _optional(m, "thresholds", st.lists(thresholds(pools, m.get("range")), max_size=2 if pools.hostile else 1),
                  draw, 0.6)
    else:  # a clean counter's threshold compares its per-second rate (`<` and `>= 0` are refused)
        _optional(m, "thresholds", st.lists(st.fixed_dictionaries({
            "severity": st.sampled_from(("critical", "warning")), "op": st.sampled_from((">", ">", ">=", "<")),
            "value": st.sampled_from((0, 1, 10, 100000, 1000000)), "rate": st.sampled_from(("5m", "10m"))}),
            max_size=1), draw, 0.4)
    _optional(m, "mig", st.sampled_from(("device", "instance", "unsupported")), draw, 0.3)
    if pools.hostile or m["kind"] == "counter":
        _optional(m, "frozen_check", st.booleans(), draw, 0.2)
    _optional(m, "title", pools.texts, draw, 0.4)
    _optional(m, "description", pools.texts, draw, 0.2)
    _optional(m, "alert_labels", st.lists(pools.labels, max_size=2, unique=True), draw, 0.2)
    # a clean legacy name is the field's own 1.x-style name (one field per legacy name)
    legacy = "dcgm_" + m["name"].lower().removeprefix("dcgm_fi_dev_").removeprefix("dcgm_fi_prof_")
    _optional(m, "legacy_names", st.lists(_bad(pools, LEGACY_BAD, (legacy,)), max_size=1), draw, pools.share(0.1))
    _optional(m, "sources", st.lists(sources(pools, m), min_size=1, max_size=2 if pools.hostile else 1), draw,
              pools.share(0.1 if pools.hostile else 0.03))
    return m


#: legacy names that are not metric names (one used to inject PromQL: it alerted on every target)
LEGACY_BAD = ("x y", "up or on() vector(1) + up", 'a{job="x"}', "1abc", "a\nb")
PRESETS = ("dcgm-exporter-1.x", "nvidia_gpu_exporter", "nvidia-smi-textfile", "openshift-ai-renames", "dcgm-renames")
SOURCE_LABELS = ("uuid", "host", "instance", "gpu_idx")


#: (metric, unit) pairs the nvidia-smi presets serve in that unit
PRESET_SERVED = {("DCGM_FI_DEV_GPU_TEMP", "celsius"), ("DCGM_FI_DEV_POWER_USAGE", "watts")}


@st.composite
def sources(draw, pools: Pools, metric: dict):
    """A ``sources`` entry for ``metric``: a preset name, or a mapping (preset overrides or a
    custom series) whose label mapping may name job, gpumon's own labels or the GPU label twice."""
    if not pools.hostile:  # a custom series with its labels said (loads whatever the metric), or a preset
        if (metric["name"], metric["unit"]) in PRESET_SERVED and draw(st.booleans()):
            return draw(st.sampled_from(("nvidia_gpu_exporter", "nvidia-smi-textfile")))
        labels = {"gpu": "uuid", "node": draw(st.sampled_from(SOURCE_LABELS[1:3]))}
        # with or without a GPU index: a source without one borrows it from the GPU's other fields
        _optional(labels, "gpu_index", st.just("gpu_idx"), draw)
        return {"name": f"smi_{metric['name'].lower()}", "job": draw(st.sampled_from(("nvidia-smi", "$1", 'x",y'))),
                "labels": labels}
    if draw(st.booleans()):
        return draw(_bad(pools, ("nvidia-gpu-exporter", ""), PRESETS))
    entry: dict = {}
    if draw(st.booleans()):
        entry["preset"] = draw(st.sampled_from(PRESETS))
    else:
        entry["name"] = draw(_bad(pools, ("a b", "x{y}"), ("nvidia_smi_temperature_gpu", "gpu_reading")))
        entry["job"] = draw(_bad(pools, HOSTILE_TEXT, ("nvidia-smi", "node-exporter")))
    labels: dict = {}
    _optional(labels, "gpu", _bad(pools, LABEL_NAMES + ("dcgm_field", "source"), SOURCE_LABELS[:1]), draw, 0.7)
    _optional(labels, "node", _bad(pools, LABEL_NAMES + ("dcgm_field", "uuid"), SOURCE_LABELS[1:3]), draw, 0.7)
    _optional(labels, "gpu_index", _bad(pools, ("uuid", "job"), SOURCE_LABELS[3:]), draw, 0.3)
    if labels:
        entry["labels"] = labels
    _optional(entry, "job", _bad(pools, HOSTILE_TEXT, ("nvidia-smi", "$1")), draw, 0.2)
    _optional(entry, "gpu_prefix", st.sampled_from(("keep", "add", "strip")), draw, 0.2)
    _optional(entry, "label", _bad(pools, ("dcgm-exporter", "a b"), ("smi", "fallback")), draw, 0.2)
    return entry


@st.composite
def textfile_sidecar(draw, pools: Pools):
    """A ``textfile_sidecar`` section; hostile draws name system folders and shell-ish images."""
    sc: dict = {}
    _optional(sc, "textfile_directory", _bad(pools, ("/", "/etc", "/var", "/proc/x", "/var/lib/..", "rel", "/a b"),
                                             ("/var/lib/node_exporter/textfile_collector", "/run/textfile")), draw)
    _optional(sc, "interval", _bad(pools, BAD_DURATIONS, ("15s", "30s")), draw, 0.3)
    _optional(sc, "timeout", _bad(pools, BAD_DURATIONS, ("5s", "10s")), draw, 0.3)
    _optional(sc, "image", _bad(pools, ("a;rm -rf /", "$(id)", "x\ny"), ("ubuntu:24.04", "busybox:1.36")), draw, 0.2)
    _optional(sc, "namespace", _bad(pools, ("Mon", "a_b"), ("monitoring",)), draw, 0.2)
    _optional(sc, "node_selector", st.dictionaries(_bad(pools, ("a b",), ("nvidia.com/gpu.present",)),
                                                   _bad(pools, HOSTILE_TEXT, ("true",)), max_size=1), draw, 0.2)
    return sc


@st.composite
def kubernetes(draw, pools: Pools):
    k: dict = {}
    if draw(st.booleans()):
        k["kube_state_metrics"] = {"job": draw(_bad(pools, HOSTILE_TEXT, ("kube-state-metrics",)))}
        k["exporter"] = {"namespace": "gpu-operator", "daemonset": "nvidia-dcgm-exporter"}
        _optional(k["exporter"], "pod_regex", pools.regexes, draw)
        _optional(k["exporter"], "container", st.one_of(st.none(), _bad(pools, HOSTILE_TEXT, (
            "nvidia-dcgm-exporter", "exporter"))), draw, 0.3)
        _optional(k, "node_join", st.fixed_dictionaries({"regex": pools.regexes,
                                                         "replacement": st.sampled_from(("$1", "x", "${1}-a"))}), draw,
                  0.3)
        _optional(k, "restart_window", pools.windows, draw, 0.3)
        _optional(k, "daemonset_for", pools.durations, draw, 0.3)
        _optional(k, "max_restarts", _bad(pools, NUMBERS, (0, 1, 3)), draw, 0.2)
    else:
        static: dict = {}
        _optional(static, "default", _bad(pools, NUMBERS, (0, 1, 4, 8)), draw)
        _optional(static, "patterns", st.lists(st.fixed_dictionaries(
            {"match": pools.regexes, "gpus": st.integers(0, 16)}), max_size=2), draw)
        _optional(static, "nodes", st.lists(st.fixed_dictionaries(
            {"name": pools.texts, "gpus": _bad(pools, NUMBERS, (0, 2, 8))}), max_size=2), draw)
        k["static"] = static or {"default": 8}
    return k


#: alert names every spec with a required gauge renders, and ones it may not (an error naming the valid ones)
OVERRIDE_ALERTS = ("GpuExporterDown", "GpuLost", "GpuMetricAbsent", "GpuTelemetryImplausible", "GpuExporterFlapping",
                   "GpuNodeTelemetryImplausible", "GpuFleetTelemetryImplausible", "GpuMetricMissing",
                   "GpuNodeMetricMissing")
#: the per-field alerts among them (``fields:`` overrides one field's rule)
FIELD_OVERRIDE_ALERTS = ("GpuMetricAbsent", "GpuTelemetryImplausible", "GpuNodeTelemetryImplausible",
                         "GpuFleetTelemetryImplausible", "GpuMetricMissing", "GpuNodeMetricMissing")
OVERRIDE_BAD_ALERTS = ("GpuNope", "GpuMetricFallbackServing", "gpuLost", "Gpu Lost", "A" * 201)


@st.composite
def override_settings(draw, pools: Pools):
    """One override's settings: disable, severity, for, labels, annotations."""
    o: dict = {}
    _optional(o, "disable", st.booleans() if pools.hostile else st.just(True), draw, 0.3)
    _optional(o, "severity", _bad(pools, ("page", ""), ("critical", "warning", "info")), draw, 0.4)
    _optional(o, "for", pools.durations if pools.hostile else st.sampled_from(("1m", "2m", "5m")), draw, 0.4)
    _optional(o, "labels", st.dictionaries(_bad(pools, ("alertname", "severity", "dcgm_field", "1a", "a-b"),
                                                ("team", "tier")), pools.texts, max_size=2), draw, 0.3)
    _optional(o, "annotations", st.dictionaries(_bad(pools, ("a b", "_x"), ("playbook", "owner")),
                                                _bad(pools, HOSTILE_TEXT, ("https://wiki.example/gpu", "gpu-infra")),
                                                max_size=2), draw, 0.3)
    return o


@st.composite
def overrides(draw, pools: Pools, metric_names: list):
    """An ``overrides`` section keyed by alert name, some narrowed to a field of the spec."""
    out: dict = {}
    for name in draw(st.lists(_bad(pools, OVERRIDE_BAD_ALERTS, OVERRIDE_ALERTS), min_size=1, max_size=2,
                              unique=True)):
        o = draw(override_settings(pools))
        if name in FIELD_OVERRIDE_ALERTS and draw(st.booleans()):
            field = draw(_bad(pools, ("DCGM_FI_NOPE", "a b"), tuple(metric_names)))
            o["fields"] = {field: draw(override_settings(pools))}
        out[name] = o
    return out


@st.composite
def documents(draw, hostile_share: float = 0.5, section_share: float | None = None):
    """A spec document (a dict), schema-shaped; ``hostile_share`` of them with hostile values;
    ``section_share`` (when set) the least chance of each newer section (sources, legacy_names,
    kubernetes, textfile_sidecar, overrides)."""
    pools = Pools(draw(st.floats(0, 1)) < hostile_share, section_share)
    exporter = {"job": draw(pools.texts)}
    _optional(exporter, "scrape_interval", _bad(pools, BAD_DURATIONS, ("15s", "30s", "10s")), draw)
    _optional(exporter, "scrape_timeout", _bad(pools, BAD_DURATIONS, ("5s", "10s")), draw, 0.3)
    _optional(exporter, "collect_interval", _bad(pools, BAD_DURATIONS, ("10s", "30s")), draw, 0.3)
    if draw(st.floats(0, 1)) < 0.3:
        exporter["labels"] = draw(st.dictionaries(st.sampled_from(("node", "gpu", "gpu_index", "mig_instance",
                                                                   "cluster", "model", "driver_version")),
                                                  _bad(pools, LABEL_NAMES, ("cluster_x", "host_x", "dev_x")),
                                                  max_size=3 if pools.hostile else 1))
    alerts: dict = {}
    # a clean draw keeps to the windows' documented relations (for: two samples up to a fraction of the
    # inventory lookback), so clean specs reach rendering; hostile draws test the relations
    clean_for = st.sampled_from(("1m", "2m", "5m"))
    for key in ("for", "implausible_for"):
        _optional(alerts, key, pools.durations if pools.hostile else clean_for, draw, 0.25)
    for key in ("inventory_lookback", "gap_window", "flapping_window", "frozen_window", "slow_group_interval",
                "gaps_group_interval"):
        clean = {"inventory_lookback": ("1h", "2h"), "gap_window": ("10m", "30m"), "slow_group_interval": ("1m", "2m"),
                 "gaps_group_interval": ("1m", "3m", "4m")}.get(key)
        windows = st.sampled_from(clean) if clean and not pools.hostile else pools.windows
        _optional(alerts, key, windows, draw, 0.25)
    for key in ("gap_min_ratio", "flapping_min_up_ratio", "scrape_slow_ratio"):
        _optional(alerts, key, st.one_of(st.floats(0.01, 1) if pools.hostile else st.floats(0.7, 0.9),
                                         _bad(pools, NUMBERS, (0.75, 0.9))), draw, 0.15)
    _optional(alerts, "runbook_url", pools.texts if pools.hostile else st.just("https://runbooks.example/gpu"), draw, 0.3)
    _optional(alerts, "labels", st.dictionaries(pools.labels, pools.texts, max_size=2), draw, 0.3)
    doc = {"version": draw(_bad(pools, (2, "1"), (1,))), "exporter": exporter,
           "metrics": draw(st.lists(metrics(pools), min_size=1, max_size=3,
                                    unique_by=None if pools.hostile else (lambda m: m["name"])))}
    if not pools.hostile:
        doc["metrics"][0]["presence"] = "required"
    if alerts:
        doc["alerts"] = alerts
    _optional(doc, "name", _bad(pools, ("Bad_Name",), ("gpumon", "prod-gpus", "a")), draw, 0.2)
    _optional(doc, "kubernetes", kubernetes(pools), draw, pools.share(0.25))
    # clean: the section sets how long the sidecar's readings serve (nvidia-smi-textfile sources);
    # hostile: its folder and image checks
    _optional(doc, "textfile_sidecar", textfile_sidecar(pools), draw, pools.share(0.1))
    _optional(doc, "overrides", overrides(pools, [m.get("name") for m in doc["metrics"]]), draw, pools.share(0.1))
    _optional(doc, "prometheus_rule", st.fixed_dictionaries({"labels": st.dictionaries(
        _bad(pools, ("a/b", "x.y/z"), ("release", "team")), _bad(pools, HOSTILE_TEXT, ("gpumon", "x")),
        max_size=2)}), draw, 0.15)
    if pools.hostile and draw(st.floats(0, 1)) < 0.05:
        doc["unknown_key"] = 1
    return doc, pools.hostile


def _dump(doc: dict) -> str:
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=1000)


MUTATIONS = ("none", "control-char", "invalid-utf8", "truncate", "deep-nesting", "alias-bomb", "duplicate-line",
             "tab-indent", "nul")


@st.composite
def spec_bytes(draw, hostile_share: float = 0.5, section_share: float | None = None):
    """(bytes of a spec file, mutation name)."""
    doc, hostile = draw(documents(hostile_share, section_share))
    try:
        text = _dump(doc)
    except (ValueError, OverflowError):  # PyYAML cannot write this value: fall back to repr
        text = repr(doc)
    mutation = draw(st.sampled_from(MUTATIONS + ("none",) * 6)) if hostile else "none"
    data = text.encode("utf-8", "surrogatepass")
    pos = draw(st.integers(0, max(0, len(data) - 1)))
    if mutation == "control-char":
        data = data[:pos] + bytes([draw(st.sampled_from((1, 7, 8, 11, 12, 27, 127)))]) + data[pos:]
    elif mutation == "invalid-utf8":
        data = data[:pos] + b"\xff\xfe" + data[pos:]
    elif mutation == "truncate":
        data = data[:pos]
    elif mutation == "deep-nesting":
        depth = draw(st.sampled_from((31, 33, 100, 1000)))
        data += b"deep: " + b"[" * depth + b"]" * depth + b"\n"
    elif mutation == "alias-bomb":
        bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
            f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefg", "bcdefgh"))
        data = bomb.encode() + data
    elif mutation == "duplicate-line":
        lines = data.split(b"\n")
        i = pos % max(1, len(lines))
        data = b"\n".join(lines[:i + 1] + lines[i:])
    elif mutation == "tab-indent":
        data = data.replace(b"  ", b"\t", 1)
    elif mutation == "nul":
        data = data[:pos] + b"\x00" + data[pos:]
    return data, mutation
