"""One normalized reading per GPU for metrics with alternative sources (issue 13).

For a metric that lists ``sources`` (:class:`gpumon.spec.Source`), :func:`normalized` records
:data:`names.NORMALIZED` per GPU: the primary series' value where the GPU has one, else the first
source (in spec order) that has one, mapped onto the exporter's identity labels and converted to
the metric's unit. ``or on (<device>)`` (job, cluster, GPU UUID) decides per physical GPU,
so a GPU is never served twice and sums over a node or the fleet count it once. Thresholds,
implausible-value checks, node sums and dashboards read this series for such metrics; a spec
without sources renders none of it (byte-identical output).
"""

from __future__ import annotations

from .. import promqltext, sidecar
from ..spec.presets import NODE_FROM_INSTANCE, PRIMARY, TEXTFILE_LAST_RUN
from ..spec import Metric, Source, Spec
from . import names
from .common import alert, record
from .model import Rule
from .promql import by, fields_sel, gpu_ids, job_sel, node_ids, num, selector

#: RE2 (fully anchored) taking the host out of ``host:port`` (``[v6]:port`` keeps its brackets)
INSTANCE_HOST = "(.+?)(?::[0-9]+)?"
#: gpu_prefix -> (replacement, regex) for label_replace on the GPU id ("GPU-" is NVML's UUID prefix)
_PREFIX = {"keep": ("$1", "(.+)"), "add": ("GPU-$1", "(?:GPU-)?(.+)"), "strip": ("$1", "(?:GPU-)?(.+)")}


def _replacement(value: str) -> str:
    """A label_replace replacement writing ``value`` literally (``$`` expands groups there)."""
    return promqltext.literal_replacement(value)


def _label_replace(expr: str, dst: str, replacement: str, src: str, regex: str) -> str:
    return (f"label_replace({expr}, {promqltext.quote(dst)}, {promqltext.quote(replacement)}, "
            f"{promqltext.quote(src)}, {promqltext.quote(regex)})")


def device_ids(spec: Spec) -> tuple[str, ...]:
    """``job``, cluster (when set) and GPU UUID: what decides "this GPU has a reading". Not the
    node: a source whose node comes from ``instance`` may spell it otherwise than the exporter's
    node label, and the UUID alone names a GPU (NVML), so a GPU is never served twice."""
    lab = spec.exporter.labels
    return ("job",) + ((lab.cluster,) if lab.cluster else ()) + (lab.gpu,)


def kept(spec: Spec, m: Metric) -> tuple[str, ...]:
    """Labels of :data:`names.NORMALIZED` besides field and source: the metric's GPU ids plus
    its ``alert_labels``."""
    return gpu_ids(spec, m) + tuple(x for x in m.alert_labels if x not in gpu_ids(spec, m))


def mapped(spec: Spec, m: Metric, src: Source) -> str:
    """``src``'s series per GPU under the exporter's labels and the metric's unit: its GPU,
    node and GPU-index labels copied into the exporter's (node from ``instance`` without the
    port), its job set to the exporter's, ``max by`` the metric's GPU ids, then converted. A GPU
    index the source lacks, and a node it reads from ``instance``, come from the GPU's primary
    series (any tracked field, :func:`~gpumon.rules.promql.fields_sel`) where the GPU has any. gpumon's textfile sidecar's
    readings count only while its last run is recent (:func:`gpumon.sidecar.stale_after`)."""
    lab = spec.exporter.labels
    expr = selector(src.series, job=src.job)
    if src.preset == "nvidia-smi-textfile":
        # node_exporter serves a dead sidecar's last file forever: its readings serve only while
        # the sidecar's last run is recent (generator/gpumon/sidecar.py stale_after)
        on = by(("job", "instance") + ((lab.cluster,) if lab.cluster else ()))
        fresh = f"time() - {selector(TEXTFILE_LAST_RUN, job=src.job)} < {num(sidecar.stale_after(spec))}"
        expr = f"({expr} and on ({on}) ({fresh}))"
    replacement, regex = _PREFIX[src.gpu_prefix]
    if src.gpu != lab.gpu or src.gpu_prefix != "keep":
        expr = _label_replace(expr, lab.gpu, replacement, src.gpu, regex)
    if src.node == NODE_FROM_INSTANCE:
        expr = _label_replace(expr, lab.node, "$1", "instance", INSTANCE_HOST)
    elif src.node != lab.node:
        expr = _label_replace(expr, lab.node, "$1", src.node, "(.+)")
    if src.gpu_index is not None and src.gpu_index != lab.gpu_index:
        expr = _label_replace(expr, lab.gpu_index, "$1", src.gpu_index, "(.+)")
    if src.job != spec.exporter.job:
        expr = f"label_replace({expr}, \"job\", {_replacement(spec.exporter.job)}, \"\", \"\")"
    out = f"max by ({by(kept(spec, m))}) (\n    {expr}\n  )"
    op, factor = src.convert
    if factor != 1.0:
        out = f"{out} {op} {num(factor)}"
    # labels the source lacks or spells otherwise, taken from the GPU's primary series where it has
    # any: the GPU index (nvidia_gpu_exporter has none; alert texts and legends name "GPU <index>")
    # and a node read from ``instance`` (in Kubernetes the exporter pod's address, not the node's
    # name: the node tiers would page the node as missing beside GpuMetricFallbackServing for the
    # same GPUs). A GPU the primary never saw keeps the instance host. topk keeps the join one-to-one.
    borrowed = [lab.gpu_index] if src.gpu_index is None and lab.gpu_index in kept(spec, m) else []
    if src.node == NODE_FROM_INSTANCE:
        borrowed.append(lab.node)
    if borrowed:
        dev = by(device_ids(spec))
        present = fields_sel(spec, spec.tracked_metrics)
        index = f"topk by ({dev}) (1, group by ({dev}, {by(tuple(borrowed))}) ({present}))"
        out = f"(\n    {out}\n  ) * on ({dev}) group_left ({by(tuple(borrowed))}) {index}\n  or on ({dev})\n  {out}"
    return out


def _tagged(expr: str, label: str) -> str:
    return f'label_replace(\n  {expr},\n  "{names.SOURCE_LABEL}", {_replacement(label)}, "", ""\n)'


def normalized(spec: Spec, m: Metric) -> Rule:
    """Recording rule :data:`names.NORMALIZED` for ``m`` (label ``dcgm_field``): primary first,
    then each source ``or on (device)``, each part tagged with its ``source`` label
    (:data:`gpumon.spec.presets.PRIMARY` for the primary)."""
    on = by(device_ids(spec))
    primary = f"max by ({by(kept(spec, m))}) ({job_sel(spec, m.name)})"
    parts = [_tagged(primary, PRIMARY)] + [_tagged(mapped(spec, m, s), s.label) for s in m.sources]
    return record(names.NORMALIZED, f"\nor on ({on})\n".join(parts), {names.FIELD_LABEL: m.name})


def normalized_sel(spec: Spec, m: Metric, op: str = "=", source: str | None = None) -> str:
    """``job_gpu:dcgm_field_value:normalized{job=…,dcgm_field=…}`` for ``m``; with ``source``, also
    ``source<op>"<source>"`` (``op`` ``=`` or ``!=``)."""
    sel = selector(names.NORMALIZED, job=spec.exporter.job, **{names.FIELD_LABEL: m.name})
    if source is None:
        return sel
    return f"{sel[:-1]},{promqltext.matcher(names.SOURCE_LABEL, source, op)}}}"


def fallback_sel(spec: Spec, m: Metric) -> str:
    """The normalized readings of ``m`` that a fallback source serves (not the primary)."""
    return normalized_sel(spec, m, "!=", PRIMARY)


def fallback_serving(spec: Spec, m: Metric) -> Rule:
    """GpuMetricFallbackServing: on a node, some GPUs' reading of ``m`` comes from a fallback
    source because the primary series is absent for them. One warning per node and field
    (``topk`` keeps the source serving most of its GPUs), value = GPUs served. Where no source
    serves a GPU the presence tiers (GpuMetricAbsent, GpuNodeMetricMissing, GpuMetricMissing)
    alert as before; they leave served GPUs to this alert, so one cause pages once."""
    nodes = by(node_ids(spec))
    expr = (f"topk by ({nodes}) (1,\n  count by ({nodes}, {names.SOURCE_LABEL}) ({fallback_sel(spec, m)})\n)")
    served = ", ".join(s.label for s in m.sources)
    return alert(spec, "GpuMetricFallbackServing", expr, severity="warning", for_=spec.alerts.for_,
                 kind="fallback_serving", labels={names.FIELD_LABEL: m.name}, metric=m.name, title=m.title,
                 sources=served)


def recording(spec: Spec) -> list[Rule]:
    """The normalized series of every metric with sources (none for a spec without)."""
    return [normalized(spec, m) for m in spec.metrics if m.sources]


def alerts(spec: Spec) -> list[Rule]:
    """GpuMetricFallbackServing for every tracked (required/optional) metric with sources."""
    return [fallback_serving(spec, m) for m in spec.tracked_metrics if m.sources]

