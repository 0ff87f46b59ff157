"""Scenarios for metrics with fallback sources (issue 13): a fallback serves the GPU whose
primary series is gone (one GpuMetricFallbackServing for its node, no presence page, the
normalized series holds each GPU once with the first source that has it), a threshold fires from
the fallback's reading once the primary is gone (and not while the primary is there), and a GPU
no source serves still raises the existing per-GPU presence alert.

Rendered only for specs whose metrics list ``sources``.
"""

from __future__ import annotations

from ..rules import inventory, names, presence, sources
from ..rules.model import Rule
from ..spec.presets import NODE_FROM_INSTANCE, PRIMARY, TEXTFILE_LAST_RUN
from ..spec import Metric, Source, Spec, Threshold
from . import fleet
from .fleet import CLUSTER, Gpu, add_gpu, add_target, lost_from, node_ids, steps
from .model import Firing, Scenario, selector, test_step
from .series import Token

LOSS_AT = 3          # step at which the primary series of the victim GPU goes stale
#: port of the nvidia-smi based exporter's targets in tests (utkuozdemir/nvidia_gpu_exporter: 9835)
SOURCE_PORT = 9835


def usable(src: Source) -> bool:
    """Sources these scenarios model: a ``strip`` source yields bare UUIDs that no primary
    ``GPU-…`` UUID matches, so it only makes sense against an exporter without the prefix."""
    return src.gpu_prefix != "strip"


def to_source(src: Source, value: float) -> float | None:
    """The reading in ``src``'s unit that converts exactly to ``value`` (the metric's unit), or
    None when float arithmetic would not give ``value`` back (then a scenario would compare an
    inexact number)."""
    op, factor = src.convert
    raw = value * factor if op == "/" else value / factor
    back = raw / factor if op == "/" else raw * factor
    return raw if back == value else None


def source_labels(spec: Spec, src: Source, gpu: Gpu) -> dict[str, str]:
    """Labels of ``src``'s series for ``gpu`` as its exporter writes them."""
    lab = spec.exporter.labels
    out = {"job": src.job}
    if lab.cluster:
        out[lab.cluster] = CLUSTER
    if src.node == NODE_FROM_INSTANCE:
        out["instance"] = f"{gpu.node}:{SOURCE_PORT}"
    else:
        out["instance"] = gpu.instance
        out[src.node] = gpu.node
    out[src.gpu] = gpu.uuid[4:] if src.gpu_prefix == "add" else gpu.uuid
    if src.gpu_index:
        out[src.gpu_index] = str(gpu.index)
    return out


def mapped_ids(spec: Spec, m: Metric, src: Source | None, gpu: Gpu) -> dict[str, str]:
    """The identity labels the normalized series (and threshold alerts) carry for ``gpu`` when
    ``src`` (None: the primary) serves it. A source without a GPU-index label takes the index from
    the GPU's other fields under their primary names (:func:`gpumon.rules.sources.mapped`); in
    these scenarios a GPU reports the spec's other required fields, so without any the
    normalized series has no index label."""
    if src is None:
        return fleet.gpu_ids(spec, gpu, m)
    lab = spec.exporter.labels
    out = {"job": spec.exporter.job}
    if lab.cluster:
        out[lab.cluster] = CLUSTER
    out.update({lab.node: gpu.node, lab.gpu: gpu.uuid})
    if src.gpu_index or any(x.name != m.name for x in spec.required_metrics):
        out[lab.gpu_index] = str(gpu.index)
    return out


def add_source_series(sc: Scenario, spec: Spec, src: Source, gpu: Gpu, samples: list[Token]) -> None:
    """``src``'s series for ``gpu``; for gpumon's textfile sidecar also its node's
    last-run timestamp, fresh at every step (its readings serve only while it is)."""
    labels = source_labels(spec, src, gpu)
    sc.add(src.series, labels, samples)
    if src.preset == "nvidia-smi-textfile":
        status = {k: v for k, v in labels.items() if k not in (src.gpu, src.gpu_index)}
        if selector(TEXTFILE_LAST_RUN, status) not in sc.series:
            sc.add(TEXTFILE_LAST_RUN, status, [fleet.as_token(i * sc.step) for i in range(sc.length)])


def _text(name: str, labels: dict[str, str]) -> str:
    """promtool's expected-sample text: the series name and its labels, sorted."""
    return selector(name, dict(sorted(labels.items())))


def _setup(sc: Scenario, spec: Spec, m: Metric, gpus: list[Gpu], primary: dict[Gpu, list[Token]],
           served: dict[Source, dict[Gpu, list[Token]]]) -> None:
    """Targets and healthy required fields for ``gpus`` (``m`` from ``primary`` where given,
    else healthy), plus each source's series for the GPUs listed under it."""
    for inst in sorted({g.instance for g in gpus}):
        add_target(sc, spec, inst)
    others = [x for x in spec.required_metrics if x.name != m.name]
    for g in gpus:
        add_gpu(sc, spec, g, others)
        add_gpu(sc, spec, g, [m], {m.name: primary[g]} if g in primary else None)
    for src, per_gpu in served.items():
        for g, samples in per_gpu.items():
            add_source_series(sc, spec, src, g, samples)


def _reading(m: Metric) -> float:
    """A plausible reading that trips no threshold and converts exactly for ratio->percent (50)."""
    base = fleet.baseline(m)
    if any(s.convert == ("*", 100.0) for s in m.sources) and not any(fleet.holds(50.0, t) for t in m.thresholds):
        lo, hi = m.range_min, m.range_max
        if (lo is None or lo <= 50) and (hi is None or hi >= 50):
            return 50.0
    return base


def fallback_serves(spec: Spec, m: Metric, step: float, index: int = 0) -> Scenario | None:
    """The primary series of one GPU goes stale; source ``index`` (and every later one) serves
    every GPU, the sources before it every GPU but that one: the normalized series holds each GPU
    once, the primary's reading where it exists and source ``index``'s (converted) for the
    victim; one GpuMetricFallbackServing for its node, naming that source; no presence tier
    fires. Power fields: the node sum is the same as with the primary (each GPU counted once)."""
    chain = [s for s in m.sources if usable(s)]
    value = _reading(m)
    raw = {s: to_source(s, value) for s in chain}
    if index >= len(chain) or raw[chain[index]] is None:
        return None
    first = chain[index]
    rule = sources.fallback_serving(spec, m)
    hold = steps(rule.for_, step)
    sc = Scenario(f"{m.name}: primary gone on one GPU, {first.label} (source {index + 1}) serves it: one fallback "
                  "warning for its node, no presence page, each GPU read once", LOSS_AT + hold + 4, step)
    gpus = fleet.gpus(2, 2)
    victim = gpus[3]
    healthy = fleet.healthy(m, sc.length, step)
    primary = {victim: lost_from(healthy, LOSS_AT)}
    if m.kind == "gauge":
        primary.update({g: sc.const(fleet.as_token(value)) for g in gpus if g != victim})
        primary[victim] = lost_from(sc.const(fleet.as_token(value)), LOSS_AT)
    served = {s: {g: sc.const(fleet.as_token(raw[s])) for g in gpus if j >= index or g != victim}
              for j, s in enumerate(chain) if raw[s] is not None}
    _setup(sc, spec, m, gpus, primary, served)
    at = LOSS_AT + hold + 2
    sc.expect(at, rule.alert, [Firing(rule, {**node_ids(spec, victim.node), names.SOURCE_LABEL: first.label}, 1)])
    sc.quiet(LOSS_AT - 1, rule.alert)
    tiers = [presence.metric_absent(spec, m)]
    if len(spec.required_metrics) > 1 and m.required:
        tiers += [presence.node_metric_missing(spec, m), presence.gpu_metric_missing(spec, m)]
    sc.quiet(at, *sorted({r.alert for r in tiers}))
    if m.kind == "gauge":
        want = []
        for g in gpus:
            src = first if g == victim else None
            labels = {**mapped_ids(spec, m, src, g), names.FIELD_LABEL: m.name,
                      names.SOURCE_LABEL: first.label if src else PRIMARY}
            want.append((_text(names.NORMALIZED, labels), value))
        sc.expect_expr(at, sources.normalized_sel(spec, m), sorted(want))
        if any(r.record == names.node_sum(m.name) for r in inventory.aggregates(spec)):
            node = fleet.node_ids(spec, victim.node)
            sc.expect_expr(at, selector(names.node_sum(m.name), node), [(_text(names.node_sum(m.name), node), value * 2)])
    return sc


def threshold_from_fallback(spec: Spec, rules: list[Rule], m: Metric, t: Threshold, step: float) -> Scenario | None:
    """Only the last source has the victim GPU, and it reads past threshold ``t``: quiet while
    the primary (a healthy reading) is there, firing from the fallback once the primary is gone
    (the field guide's case: the temperature alert keeps working from nvidia-smi)."""
    chain = [s for s in m.sources if usable(s)]
    if not chain or t.rate is not None or m.kind != "gauge":
        return None
    last = chain[-1]
    hot = fleet.firing_value(m, t)
    raw = to_source(last, hot)
    if raw is None:
        return None
    rule = next(r for r in rules if r.alert == t.alert and r.label_map.get(names.FIELD_LABEL) == m.name)
    hold = steps(rule.for_, step)
    sc = Scenario(f"{m.name}: {t.alert} fires from {last.label} once the primary is gone, not before",
                  LOSS_AT + hold + 4, step)
    gpus = fleet.gpus(2, 2)
    victim = gpus[3]
    primary = {victim: lost_from(fleet.healthy(m, sc.length, step), LOSS_AT)}
    _setup(sc, spec, m, gpus, primary, {last: {victim: sc.const(fleet.as_token(raw))}})
    sc.quiet(LOSS_AT - 1, rule.alert)
    sc.expect(LOSS_AT + hold + 2, rule.alert, [Firing(rule, mapped_ids(spec, m, last, victim), hot)])
    return sc


def unserved(spec: Spec, m: Metric, step: float) -> Scenario | None:
    """The primary goes stale on one GPU that no source serves (the sources serve the others):
    the existing GpuMetricMissing fires for it; no fallback warning."""
    chain = [s for s in m.sources if usable(s)]
    gpu_rule = presence.gpu_metric_missing(spec, m)
    if not chain or not m.required or len(spec.required_metrics) < 2:
        return None
    rule = sources.fallback_serving(spec, m)
    hold = steps(gpu_rule.for_, step)
    sc = Scenario(f"{m.name}: primary gone on one GPU no source serves: GpuMetricMissing as without sources",
                  LOSS_AT + hold + 4, step)
    gpus = fleet.gpus(2, 2)
    victim = gpus[3]
    value = _reading(m)
    raw = to_source(chain[0], value)
    healthy = fleet.healthy(m, sc.length, step)
    served = {chain[0]: {g: sc.const(fleet.as_token(raw if raw is not None else 1)) for g in gpus if g != victim}}
    _setup(sc, spec, m, gpus, {victim: lost_from(healthy, LOSS_AT)}, served)
    at = LOSS_AT + hold + 2
    sc.expect(at, gpu_rule.alert, [Firing(gpu_rule, fleet.gpu_ids(spec, victim), 1)])
    sc.quiet(at, rule.alert, presence.node_metric_missing(spec, m).alert)
    return sc


def node_on_fallbacks(spec: Spec, step: float) -> Scenario | None:
    """Node 2 serves no required field under its primary name, only through each field's first
    source (a node wholly on dcgm-exporter 1.x names): its GPUs are in the inventory and counted,
    one GpuMetricFallbackServing per served field, GpuNodeMetricMissing for each required field
    no source serves there, and no per-GPU, lost or fleet alert."""
    served = {m.name: next((s for s in m.sources if usable(s)), None) for m in spec.required_metrics}
    served = {k: v for k, v in served.items() if v is not None and
              (to_source(v, _reading(spec.metric(k))) is not None or spec.metric(k).kind == "counter")}
    if not served:
        return None
    rule = sources.fallback_serving(spec, spec.metric(next(iter(served))))
    hold = steps(max(rule.for_, spec.alerts.slow_group_interval), step)
    sc = Scenario("a node wholly on fallback sources (1.x names): served, counted, one warning per field; "
                  "fields no source serves there page once for the node", hold + 4, step)
    ours, theirs = fleet.gpus(1, 2), fleet.gpus(1, 2, first_node=2)
    for inst in sorted({g.instance for g in ours + theirs}):
        add_target(sc, spec, inst)
    for g in ours:
        add_gpu(sc, spec, g, spec.required_metrics)
    for m in spec.required_metrics:
        src = served.get(m.name)
        if src is None:
            continue
        for g in theirs:
            if m.kind == "counter":
                samples = fleet.healthy(m, sc.length, step)
                op, factor = src.convert
                samples = [fleet.as_token(v * factor if op == "/" else v / factor) for v in samples]
            else:
                samples = sc.const(fleet.as_token(to_source(src, _reading(m))))
            add_source_series(sc, spec, src, g, samples)
    at = hold + 2
    node = theirs[0].node
    firing = [Firing(sources.fallback_serving(spec, spec.metric(n)), {**node_ids(spec, node), names.SOURCE_LABEL: s.label}, 2)
              for n, s in served.items()]
    sc.expect(at, rule.alert, firing)
    unserved = [m for m in spec.required_metrics if m.name not in served]
    if unserved and len(spec.required_metrics) > 1:
        missing = [Firing(presence.node_metric_missing(spec, m), node_ids(spec, node), 1) for m in unserved]
        sc.expect(at, missing[0].rule.alert, missing)
    sc.quiet(at, presence.gpu_metric_missing(spec, spec.required_metrics[0]).alert,
             presence.metric_absent(spec, spec.required_metrics[0]).alert, presence.gpu_lost(spec).alert)
    nodes = fleet.node_ids(spec, node)
    sc.expect_expr(at, selector(names.NODE_GPU_DEVICES_REPORTING, nodes),
                   [(_text(names.NODE_GPU_DEVICES_REPORTING, nodes), 2)])
    return sc


def scenarios(spec: Spec, rules: list[Rule]) -> list[Scenario]:
    """Every fallback scenario for ``spec`` (none without sources); ``rules`` are its built rules."""
    step = test_step(spec)
    out: list[Scenario] = []
    for m in spec.tracked_metrics:
        if not m.sources:
            continue
        chain = [s for s in m.sources if usable(s)]
        built = [fallback_serves(spec, m, step, i) for i in range(len(chain))] + [unserved(spec, m, step)]
        out += [sc for sc in built if sc]
        out += [sc for t in m.thresholds if (sc := threshold_from_fallback(spec, rules, m, t, step))]
    whole = node_on_fallbacks(spec, step)
    return out + ([whole] if whole else [])
