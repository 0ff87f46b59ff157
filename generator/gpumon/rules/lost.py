"""GPUs that stopped reporting: the known set they are missed from, and the ones a critical XID
explains (a GPU off the bus).

A GPU lost is missing until it reports again or the spec declares it gone (``alerts.retired``):
the inventory lookback only bounds how long a Prometheus restart may last. Both records read
their own last value (``last_over_time`` of the series itself), so they hold across evaluations
without a window that runs out while the hardware is still gone.
"""

from __future__ import annotations

import textwrap

from ..promqltext import matcher, regex_literal
from ..spec.presets import PRESETS
from ..spec import Metric, Spec
from . import names
from .common import record
from .exporter import unserved_legacy_names
from .model import Rule
from .promql import by, dur, fleet_ids, gpu_ids, job_sel, named, node_ids

#: the GPU label of dcgm-exporter's 1.x compatibility mode (``uuid``; spec/presets.py)
LEGACY_GPU_LABEL = PRESETS["dcgm-exporter-1.x"].gpu


def device_ids(spec: Spec) -> tuple[str, ...]:
    """A physical GPU: its identity without the MIG instance (re-partitioning is not a loss)."""
    lab = spec.exporter.labels
    return tuple(x for x in gpu_ids(spec) if x != lab.mig_instance)


def physical_ids(spec: Spec) -> tuple[str, ...]:
    """A physical GPU wherever it reports: ``job``, the cluster label and the GPU's UUID, which no
    node label, index or MIG layout changes. Whether a known GPU still reports is asked by these:
    the node label of an exporter pod without NODE_NAME is the pod's name, new with every pod
    (NVIDIA/dcgm-exporter#78), and the indexes after a GPU that died shift at the next reboot;
    compared by its old labels, each such GPU was lost for ever."""
    return fleet_ids(spec) + (spec.exporter.labels.gpu,)


def _retired(spec: Spec) -> str:
    """Matchers that leave out retired nodes and GPUs ("" when none is)."""
    lab, al = spec.exporter.labels, spec.alerts
    out = []
    if al.retired_nodes:
        out.append(matcher(lab.node, "|".join(regex_literal(x) for x in al.retired_nodes), "!~"))
    if al.retired_gpus:
        out.append(matcher(lab.gpu, "|".join(regex_literal(x) for x in al.retired_gpus), "!~"))
    return ",".join(out)


def _self(spec: Spec, name: str) -> str:
    """``name``'s last value within the inventory lookback (long enough to outlast a restart), without
    retired hardware and without series that name no node or GPU: a record's own last value, or
    the GPUs the inventory saw in that time. (The inventory holds no such series; a set recorded
    by an earlier gpumon may, and a set that reads itself would keep them for ever.)"""
    sel = _retired(spec)
    last = f"last_over_time({name}{{{sel}}}[{dur(spec.alerts.inventory_lookback)}])" if sel else \
        f"last_over_time({name}[{dur(spec.alerts.inventory_lookback)}])"
    return f"({named(spec, last)})"


def legacy(spec: Spec) -> list[Rule]:
    """:data:`names.LEGACY_INVENTORY`: the GPUs a node on dcgm-exporter 1.x names reports (the
    required fields' ``legacy_names`` no source serves; label ``uuid`` read as the spec's GPU
    label), so a GPU lost there, or across the upgrade to current names, is known and pages. None
    when the spec lists no such name."""
    legacy_names = unserved_legacy_names(spec)
    if not legacy_names:
        return []
    lab = spec.exporter.labels
    job = matcher("job", spec.exporter.job)
    sel = " or ".join(f"{n}{{{job},{matcher(LEGACY_GPU_LABEL, '', '!=')}}}" for n in legacy_names)
    if lab.gpu != LEGACY_GPU_LABEL:
        sel = f'label_replace({sel}, "{lab.gpu}", "$1", "{LEGACY_GPU_LABEL}", "(.+)")'
    grouped = f"group by ({by(device_ids(spec))}) (\n  {sel}\n)"
    return [record(names.LEGACY_INVENTORY, named(spec, grouped, (lab.node,)))]


def reporting_sets(spec: Spec) -> list[str]:
    """The per-GPU sets of GPUs reporting now: the inventory, and the 1.x-names set when rendered
    (:func:`legacy`). Whatever counts or knows GPUs reads both: a node on 1.x names has GPUs."""
    return [names.INVENTORY] + ([names.LEGACY_INVENTORY] if unserved_legacy_names(spec) else [])


def known(spec: Spec) -> Rule:
    """:data:`names.KNOWN`: the GPUs reporting now (current or 1.x names), seen within the
    inventory lookback, or known at the last evaluation, and not retired."""
    dev = by(device_ids(spec))
    now = "\nor\n".join(f"group by ({dev}) ({s})" for s in reporting_sets(spec))
    seen = "\nor\n".join(f"group by ({dev}) ({_self(spec, s)})" for s in reporting_sets(spec))
    # the GPUs seen within the lookback as well: an engine that cannot read a rule's own earlier
    # result (vmalert -replay evaluates a rule over a whole range at once; VictoriaMetrics makes a
    # new series searchable only seconds after its first sample) still knows them for that long.
    # What it knew of a GPU that reports now under other labels (a new node name or index) goes:
    # the GPU is known by its labels of now
    held = textwrap.indent(f"{seen}\nor\n{_self(spec, names.KNOWN)}", "  ")
    reporting = textwrap.indent("\nor\n".join(reporting_sets(spec)), "  ")
    earlier = f"(\n{held}\n)\nunless on ({by(physical_ids(spec))})\n(\n{reporting}\n)"
    return record(names.KNOWN, f"{now}\nor\n{earlier}")


def _target_ids(spec: Spec) -> tuple[str, ...]:
    lab = spec.exporter.labels
    return ("job",) + ((lab.cluster,) if lab.cluster else ()) + ("instance",)


def targets_known(spec: Spec) -> Rule:
    """:data:`names.TARGETS_KNOWN`: each exporter target and the node its GPU series named (current
    or 1.x names), held from its own last value while the target has an ``up`` series (up or
    down): a target that leaves service discovery loses its ``up`` series and drops out, one whose
    exporter is down or serves no labels stays."""
    lab = spec.exporter.labels
    ids = _target_ids(spec)
    # `group by` as the other parts: a bare selector keeps its name where they drop theirs, and over
    # a range VictoriaMetrics after 1.79 then answers two series for one target, which vmalert
    # refuses to record ("result contains metrics with the same labelset")
    parts = [f"group by ({by(ids + (lab.node,))}) ({names.TARGET_NODE})"]
    legacy_names = unserved_legacy_names(spec)
    if legacy_names:
        job = matcher("job", spec.exporter.job)
        sel = " or ".join(f"{n}{{{job},{matcher(lab.node, '', '!=')}}}" for n in legacy_names)
        parts.append(f"group by ({by(ids + (lab.node,))}) ({sel})")
    # the targets' nodes seen within the lookback as well (as in :func:`known`): an engine that
    # cannot read the rule's own earlier result still knows a down target's node for that long
    lookback = dur(spec.alerts.inventory_lookback)
    parts += [f"last_over_time({names.TARGET_NODE}[{lookback}])", f"last_over_time({names.TARGETS_KNOWN}[{lookback}])"]
    # one group by around it all: the parts are one series per target and node whatever their
    # names (VictoriaMetrics' `or` keeps series that differ only in name, and the record then had
    # two of the same labels)
    inner = "\n    or\n    ".join(parts)
    expr = f"group by ({by(ids + (lab.node,))}) (\n  (\n    {inner}\n  )\n  and on ({by(ids)})\n  {job_sel(spec, 'up')}\n)"
    return record(names.TARGETS_KNOWN, expr)


def node_gone(spec: Spec) -> str:
    """The nodes of known GPUs none of whose exporter targets is left (removed from service
    discovery), while the job (and cluster) still has targets: a whole job gone is
    GpuExporterTargetMissing's page."""
    nodes, fleet = by(node_ids(spec)), by(fleet_ids(spec))
    return (f"(\n    group by ({nodes}) ({names.KNOWN})\n    unless on ({nodes})\n    {names.TARGETS_KNOWN}\n"
            f"    and on ({fleet})\n    group by ({fleet}) ({job_sel(spec, 'up')})\n  )")


def xid_metric(spec: Spec) -> Metric | None:
    """The XID field with a policy that names critical codes, if the spec has one."""
    return next((m for m in spec.metrics if m.xid is not None and m.xid.codes("critical")), None)


def xid_keep(spec: Spec, m: Metric) -> tuple[str, ...]:
    """GpuXidCritical's labels (the XID record carries the same, so the alert continues)."""
    return gpu_ids(spec, m) + m.alert_labels


def xid_code_ids(spec: Spec, m: Metric) -> str:
    """What tells one XID of a GPU from another: the GPU's :func:`physical_ids` and, where the
    exporter writes it, the ``err_code`` label. Not the series' other labels: a job's pod labels,
    a new exporter target or node name make new series of the same XID, and compared by them an
    XID set for days paged again at each."""
    return by(physical_ids(spec) + (("err_code",) if "err_code" in m.alert_labels else ()))


def xid_seen_before(spec: Spec, m: Metric, sel: str, window: str) -> str:
    """The XIDs of ``sel`` whose value one policy window ago equals the value now, both read over
    ``window`` (a failed scrape's staleness marker one policy window ago made an old XID new) and
    per :func:`xid_code_ids`: an XID that is not new."""
    ids = xid_code_ids(spec, m)
    then = f"max by ({ids}) (last_over_time({sel}[{window}] offset {dur(m.xid.window)}))"
    return f"({then} == on ({ids}) max by ({ids}) (last_over_time({sel}[{window}])))"


def xid_hold(spec: Spec) -> float:
    """Seconds an XID counts after its series vanished (8 sample intervals), for the XID record
    (:func:`xid_lost`, which reads the XID that long) and for the XID alerts alike (a failed
    scrape's staleness marker neither ends a page nor makes an old XID new): the
    alert must hold the XID for as long as the record may still take over, or on an engine that
    makes the record's new series searchable seconds after its first sample (VictoriaMetrics:
    about 10 s, plus vmalert's write lag) the page ends and starts again in between."""
    return 8 * spec.exporter.sample_interval


def recent(spec: Spec) -> str:
    """The GPUs that reported within :func:`lost_window` (4 sample intervals), under current or
    1.x names."""
    w = dur(4 * spec.exporter.sample_interval)
    sets = [f"max_over_time({s}[{w}])" for s in reporting_sets(spec)]
    return sets[0] if len(sets) == 1 else "(" + " or ".join(sets) + ")"


def xid_lost(spec: Spec) -> list[Rule]:
    """:data:`names.XID_LOST`: a GPU gone while its last XID was critical (XID 79, fallen off the
    bus), valued the code, until it reports again. Only an XID new within the policy window when
    the GPU went counts (an older one ended its page already; the loss is GpuLost's). From the first evaluation it is not in the
    inventory (not after the lost window, which left the XID page off for that long: it paged
    twice), and only for a known GPU (a retired one leaves it with :data:`names.KNOWN`). One cause, one page: GpuXidCritical holds while
    the GPU is gone, and GpuLost leaves it out (the XID alert alone would resolve after the policy
    window, GpuLost alone paged a second time for the same fault)."""
    m = xid_metric(spec)
    if m is None:
        return []
    codes = m.xid.codes("critical")
    w = dur(xid_hold(spec))
    last = f"last_over_time({job_sel(spec, m.name)}[{w}])"
    if "err_code" in m.alert_labels:
        sel = f'{m.name}{{{matcher("job", spec.exporter.job)},{matcher("err_code", "|".join(map(str, codes)), "=~")}}}'
        last = f"last_over_time({sel}[{w}]) > 0"
    else:
        last = "(" + " or ".join(f"{last} == {c}" for c in codes) + ")"
    # only an XID still new when the GPU went (GpuXidCritical's own test: not the value of a
    # policy window before): a code left set from a fault the GPU was reset from long ago does not
    # make an unrelated loss an XID page (GpuLost pages it)
    s = sel if "err_code" in m.alert_labels else job_sel(spec, m.name)  # the critical codes' series only
    last = f"(\n      {last}\n      unless on ({xid_code_ids(spec, m)})\n      {xid_seen_before(spec, m, s, w)}\n    )"
    dev = by(device_ids(spec))
    keep = by(xid_keep(spec, m))
    # one max by over both sides: the record keeps the alert's labels only (pod, driver version
    # and the like would split it)
    expr = (f"max by ({keep}) (\n  (\n    {last}\n    or\n    {_self(spec, names.XID_LOST)}\n  )\n"
            f"  and on ({dev})\n  {names.KNOWN}\n  unless on ({by(physical_ids(spec))})\n  {names.INVENTORY}\n)")
    return [record(names.XID_LOST, expr)]


def rules(spec: Spec) -> list[Rule]:
    """The GPUs on 1.x names, the known GPUs and targets, then the GPUs gone after a critical XID
    (evaluated after the inventory and the target's node, which they read)."""
    return legacy(spec) + [known(spec), targets_known(spec)] + xid_lost(spec)
