"""Scenarios for the presence alerts: a required field lost for one GPU, for one node, for the
whole fleet; a GPU lost; a target down (only the exporter alert fires); identity labels
missing; MIG instances without the fields DCGM does not report per instance."""

from __future__ import annotations

from ..rules import exporter, gaps, presence
from ..rules.model import Rule
from ..spec import Metric, Spec
from . import fleet
from .fleet import Gpu, add_gpu, add_target, gpu_ids, lost_from, node_ids, steps, target_labels
from .model import Firing, Scenario, test_step

LOSS_AT = 3          # step at which series go stale in loss scenarios


def _fleet(sc: Scenario, spec: Spec, gpus: list[Gpu], overrides: dict[Gpu, dict] | None = None) -> None:
    overrides = overrides or {}
    for inst in sorted({g.instance for g in gpus}):
        add_target(sc, spec, inst)
    for g in gpus:
        add_gpu(sc, spec, g, spec.required_metrics, overrides.get(g))


def _key(rule: Rule) -> tuple:
    """What tells a rendered alerting rule from the others: its name and labels."""
    return rule.alert, rule.labels


def _tiers(spec: Spec, m: Metric):
    return presence.metric_absent(spec, m), presence.node_metric_missing(spec, m), presence.gpu_metric_missing(spec, m)


#: the per-GPU and per-node tiers of every required field share one test group each: a GPU or node
#: misses one field, the alerts carry the field (``dcgm_field``), and promtool's work is per group
#: and per evaluation
ALL_FIELDS = "every required field"


def gpu_field_lost(spec: Spec, metrics: list[Metric], step: float) -> Scenario:
    """Each field of ``metrics`` goes stale on one GPU (field *i* on the second GPU of node *i*, so
    every GPU misses at most one field and every node keeps a GPU with it): GpuMetricMissing for
    that GPU and field only; node, fleet and GpuLost quiet."""
    tiers = [_tiers(spec, m) for m in metrics]
    hold = max(steps(gpu.for_, step) for _, _, gpu in tiers)
    sc = Scenario(f"{ALL_FIELDS} lost for one GPU each: one alert per field for that GPU only",
                  LOSS_AT + hold + 4, step)
    all_gpus = fleet.gpus(len(metrics), 2)
    victims = all_gpus[1::2]
    _fleet(sc, spec, all_gpus, {victim: {m.name: lost_from(fleet.healthy(m, sc.length, step), LOSS_AT)}
                                for victim, m in zip(victims, metrics)})
    at = LOSS_AT + hold + 2
    quiet = {presence.gpu_lost(spec).alert}
    for victim, (absent, node, gpu) in zip(victims, tiers):
        sc.expect(at, gpu.alert, [Firing(gpu, gpu_ids(spec, victim), 1)])
        quiet.update((node.alert, absent.alert))
    sc.quiet(at, *sorted(quiet - {gpu.alert for _, _, gpu in tiers}))
    return sc


def node_field_lost(spec: Spec, metrics: list[Metric], step: float) -> Scenario:
    """Each field of ``metrics`` goes stale on both GPUs of one node (field *i* on node *i* + 1; node 1
    keeps every field): one GpuNodeMetricMissing per field for its node; GPU and fleet tiers quiet."""
    tiers = [_tiers(spec, m) for m in metrics]
    hold = max(steps(node.for_, step) for _, node, _ in tiers)
    sc = Scenario(f"{ALL_FIELDS} lost on every GPU of one node each: one node alert per field, no per-GPU alerts",
                  LOSS_AT + hold + 4, step)
    all_gpus = fleet.gpus(len(metrics) + 1, 2)
    losing = {fleet.node_name(i + 2): m for i, m in enumerate(metrics)}
    _fleet(sc, spec, all_gpus, {g: {losing[g.node].name: lost_from(fleet.healthy(losing[g.node], sc.length, step),
                                                                   LOSS_AT)}
                                for g in all_gpus if g.node in losing})
    at = LOSS_AT + hold + 2
    quiet = set()
    for i, (absent, node, gpu) in enumerate(tiers):
        sc.expect(at, node.alert, [Firing(node, node_ids(spec, fleet.node_name(i + 2)), 1)])
        quiet.update((gpu.alert, absent.alert))
    sc.quiet(at, *sorted(quiet - {node.alert for _, node, _ in tiers}))
    return sc


def fleet_field_lost(spec: Spec, m: Metric, step: float) -> Scenario:
    """Field ``m`` goes stale everywhere while targets stay up (NVIDIA/dcgm-exporter#571): one GpuMetricAbsent ``{job}``
    (and the cluster label when the spec names one) after ``for``; node and GPU tiers quiet."""
    absent, node, gpu = _tiers(spec, m)
    hold = steps(absent.for_, step)
    sc = Scenario(f"{m.name} gone for the whole fleet (exporter upgrade dropped it): one fleet alert",
                  LOSS_AT + hold + 4, step)
    all_gpus = fleet.gpus(2, 2)
    lost = lost_from(fleet.healthy(m, sc.length, step), LOSS_AT)
    _fleet(sc, spec, all_gpus, {g: {m.name: lost} for g in all_gpus})
    sc.quiet(LOSS_AT - 1, absent.alert)         # the last sample is still the GPUs' reading
    at = LOSS_AT + hold + 2
    sc.expect(at, absent.alert, [Firing(absent, fleet.fleet_labels(spec), 1)])
    sc.quiet(at, node.alert, gpu.alert)
    return sc


def cluster_field_lost(spec: Spec, rules: list[Rule], m: Metric, step: float) -> Scenario:
    """Field ``m`` goes stale on every GPU of one cluster while another cluster of the same job
    keeps it (a global Thanos/Mimir ruler sees both): one GpuMetricAbsent for that cluster; the
    node tier stays quiet (it compares nodes within a cluster)."""
    absent, node, _ = _tiers(spec, m)
    cluster = spec.exporter.labels.cluster
    hold = steps(absent.for_, step)
    sc = Scenario(f"{m.name} gone in one cluster, present in another: one alert for that cluster",
                  LOSS_AT + hold + 4, step)
    lost_here = fleet.gpus(2, 2)
    elsewhere = fleet.gpus(1, 2, first_node=3)
    lost = lost_from(fleet.healthy(m, sc.length, step), LOSS_AT)
    _fleet(sc, spec, lost_here, {g: {m.name: lost} for g in lost_here})
    other = {cluster: fleet.CLUSTER_B}
    add_target(sc, spec, elsewhere[0].instance, extra=other)
    for g in elsewhere:
        add_gpu(sc, spec, g, spec.required_metrics, extra=other)
    at = LOSS_AT + hold + 2
    sc.expect(at, absent.alert, [Firing(absent, fleet.fleet_labels(spec), 1)])
    if _key(node) in {_key(r) for r in rules if r.alert}:
        sc.quiet(at, node.alert)
    return sc


def target_down(spec: Spec, step: float) -> Scenario:
    """The exporter of node 2 fails every scrape: Prometheus marks all its series stale. Only
    the exporter-down alert may fire, not one alert per GPU or field (NVIDIA/dcgm-exporter#607)."""
    down = exporter.down(spec)
    hold = steps(down.for_, step)
    sc = Scenario("target down: only the exporter-down alert fires, no per-GPU or per-field alerts",
                  LOSS_AT + hold + 4, step)
    all_gpus = fleet.gpus(2, 2)
    inst2 = fleet.instance_of(2)
    add_target(sc, spec, fleet.instance_of(1))
    add_target(sc, spec, inst2, up=fleet.down_from(sc, LOSS_AT))
    for g in all_gpus:
        over = {m.name: lost_from(fleet.healthy(m, sc.length, step), LOSS_AT) for m in spec.required_metrics} \
            if g.instance == inst2 else None
        add_gpu(sc, spec, g, spec.required_metrics, over)
    at = LOSS_AT + hold + 2
    # the down target's alert names its node (from the GPU series seen before), so Alertmanager
    # can match it with that node's GPU alerts
    sc.expect(at, down.alert, [Firing(down, {**target_labels(spec, inst2), spec.exporter.labels.node: fleet.node_name(2)}, 0)])
    quiet = {presence.gpu_lost(spec).alert, exporter.empty(spec).alert}
    for m in spec.required_metrics:
        quiet.update(r.alert for r in _tiers(spec, m))
    sc.quiet(at, *sorted(quiet))
    return sc


def gpu_lost(spec: Spec, step: float) -> Scenario:
    """Every field of one GPU goes stale: GpuLost for it, no per-field or gap alert; it still
    fires after the inventory lookback (the GPU is still gone, and no spec declared it retired)."""
    rule = presence.gpu_lost(spec)
    hold = steps(rule.for_, step)
    lookback = steps(spec.alerts.inventory_lookback, step)
    sc = Scenario("GPU lost: one GPU stops reporting every field while its node reports the others; "
                  "the alert still fires after the inventory lookback",
                  LOSS_AT + max(hold + steps(presence.lost_window(spec), step), lookback) + 4, step)
    all_gpus = fleet.gpus(1, 2)        # one node is enough: the alert needs a sibling GPU
    victim = all_gpus[1]
    over = {m.name: lost_from(fleet.healthy(m, sc.length, step), LOSS_AT) for m in spec.required_metrics}
    _fleet(sc, spec, all_gpus, {victim: over})
    sc.quiet(LOSS_AT - 1, rule.alert)
    # one step after it fires, and before the GPU's last recorded inventory sample (half a step
    # before LOSS_AT) leaves the lookback: that edge sits on an evaluation, where Prometheus 2
    # (closed ranges) still sees the sample and 3 (left-open) does not
    at = LOSS_AT + steps(presence.lost_window(spec), step) + hold + 1
    sc.expect(at, rule.alert, [Firing(rule, gpu_ids(spec, victim), 1)])
    quiet = set()
    for m in spec.required_metrics:
        quiet.update(r.alert for r in _tiers(spec, m))
    sc.quiet(at, *sorted(quiet))
    # a GPU gone for good is GpuLost's case, not a gap: the gap alert stays quiet while its
    # sample ratios fall over the gap window
    gap = gaps.intermittent(spec)
    for k in sorted({at, LOSS_AT + steps(spec.alerts.gap_window, step) // 2,
                     LOSS_AT + steps(spec.alerts.gap_window, step) + 1}):
        if k < sc.length:
            sc.quiet(k, gap.alert)
    if lookback > hold + 2:
        sc.expect(LOSS_AT + lookback + 1, rule.alert, [Firing(rule, gpu_ids(spec, victim), 1)])
    return sc


def gpu_lost_on_flapping_node(spec: Spec, step: float) -> Scenario:
    """A GPU falls off the bus on a node whose exporter fails every other scrape: every failed
    scrape marks all the node's series stale, which reset ``for`` of GpuLost, so it never fired
    (issue 11, item 5). The sibling GPU, present at every successful scrape, is not lost."""
    rule = presence.gpu_lost(spec)
    hold = steps(rule.for_, step)
    recent = steps(presence.lost_window(spec), step)
    sc = Scenario("GPU lost on a flapping node (up 1 0 1 0): GpuLost for that GPU only",
                  LOSS_AT + recent + hold + 4, step)
    up = [1 if i % 2 == 0 or i < LOSS_AT else 0 for i in range(sc.length)]
    gpus = fleet.gpus(1, 2)
    victim = gpus[1]
    add_target(sc, spec, gpus[0].instance, up=up)
    for g in gpus:
        over = {}
        for m in spec.required_metrics:
            samples = [v if u == 1 else "stale" for v, u in zip(fleet.healthy(m, sc.length, step), up)]
            over[m.name] = lost_from(samples, LOSS_AT) if g == victim else samples
        add_gpu(sc, spec, g, spec.required_metrics, over)
    sc.expect(LOSS_AT + recent + hold + 1, rule.alert, [Firing(rule, gpu_ids(spec, victim), 1)])  # see gpu_lost
    return sc


def identity_label_missing(spec: Spec, step: float) -> Scenario:
    """The exporters of nodes 3 and 4 write another node label name (``hostname`` for
    ``Hostname``): one alert for the job, its value the two targets."""
    rule = presence.identity_label_missing(spec)
    hold = steps(rule.for_, step)
    node = spec.exporter.labels.node
    other = node.lower() if node.lower() != node else node.capitalize()
    sc = Scenario(f"identity label missing: the exporters of nodes 3 and 4 write {other} instead of {node}: "
                  "one alert", hold + 4, step)
    _fleet(sc, spec, fleet.gpus(2, 1))
    for renamed in fleet.gpus(2, 1, first_node=3):
        add_target(sc, spec, renamed.instance)
        add_gpu(sc, spec, renamed, spec.required_metrics, node_label=other)
    sc.expect(hold + 2, rule.alert, [Firing(rule, fleet.fleet_labels(spec), 2)])
    return sc


def mig_quiet(spec: Spec, step: float) -> Scenario:
    """A MIG node: device-wide fields repeated on each instance, fields DCGM does not report per
    instance (``mig: unsupported``) absent. No presence alert fires."""
    hold = max(steps(presence.gpu_lost(spec).for_, step), steps(spec.alerts.for_, step))
    sc = Scenario("MIG node without per-instance GPU_UTIL-like fields: no presence alert", hold + 4, step)
    _fleet(sc, spec, fleet.gpus(1, 2) + fleet.mig_instances(2))
    quiet = {presence.gpu_lost(spec).alert}
    for m in spec.required_metrics:
        quiet.update(r.alert for r in _tiers(spec, m))
    sc.quiet(hold + 2, *sorted(quiet))
    return sc


def scenarios(spec: Spec, rules: list[Rule]) -> list[Scenario]:
    """Every presence scenario for ``spec`` (whose built rules are ``rules``): three tiers per
    required field, then whole-GPU, target-down, label and MIG scenarios."""
    step = test_step(spec)
    out: list[Scenario] = []
    rendered = {_key(r) for r in rules if r.alert}
    # the node and GPU tiers need another required field to tell "reports other fields"
    by_gpu = [m for m in spec.required_metrics if _key(_tiers(spec, m)[2]) in rendered]
    by_node = [m for m in spec.required_metrics if _key(_tiers(spec, m)[1]) in rendered]
    if by_gpu:
        out.append(gpu_field_lost(spec, by_gpu, step))
    if by_node:
        out.append(node_field_lost(spec, by_node, step))
    out += [fleet_field_lost(spec, m, step) for m in spec.required_metrics]
    if spec.exporter.labels.cluster and spec.required_metrics:
        out.append(cluster_field_lost(spec, rules, spec.required_metrics[0], step))
    out += [gpu_lost(spec, step), gpu_lost_on_flapping_node(spec, step), target_down(spec, step),
            identity_label_missing(spec, step), mig_quiet(spec, step)]
    return out
