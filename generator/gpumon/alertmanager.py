"""The Alertmanager layer: inhibit rules and a route for gpumon's alerts, so one cause pages once.

Rendered as an Alertmanager configuration fragment (``alertmanager/<name>-alertmanager.yaml``:
``route.routes``, ``receivers`` and ``inhibit_rules`` to merge into an existing config) and as a
prometheus-operator ``AlertmanagerConfig`` (monitoring.coreos.com/v1alpha1) carrying the same.

The rules alone already keep the presence tiers apart (a field gone everywhere fires only the fleet
alert), but their conditions are evaluated one by one: while a field vanishes node by node, or
while an exporter flaps, two tiers can hold for a while. The inhibitions say which one wins:

- a target down, empty or flapping mutes that node's per-GPU telemetry alerts (not ``GpuLost``:
  a GPU gone from a flapping node is a second cause, issue 11 item 5);
- the fleet tier mutes the node and GPU tiers of the same field; the node tier mutes the GPU tier;
- a critical alert mutes a warning of the same GPU (or node, target) and field.

Matching uses the labels every gpumon alert keeps (job, cluster, node, GPU, ``dcgm_field``), and
every matcher names gpumon's alerts, so other alerts of the same Alertmanager are never muted.
prometheus-operator adds ``namespace="<its namespace>"`` to every route and inhibit rule of an
AlertmanagerConfig: the alerts' ``namespace`` label (``alerts.namespace``) must be that namespace.
"""

from __future__ import annotations

from dataclasses import dataclass

from .rules import RuleGroup
from .rules.names import FIELD_LABEL
from .promqltext import regex_literal
from .spec import Spec
from .yamlout import dump

FRAGMENT_PATH = "alertmanager/{name}-alertmanager.yaml"
CRD_PATH = "alertmanager/{name}-alertmanagerconfig.yaml"
#: notification timing of the route (Alertmanager's defaults are 30s / 5m / 4h)
TIMING = {"group_wait": "30s", "group_interval": "5m", "repeat_interval": "4h"}

#: alerts about one exporter target that make its GPUs' telemetry alerts meaningless
TARGET_ALERTS = ("GpuExporterDown", "GpuExporterEmpty", "GpuExporterFlapping", "GpuExporterLegacyNames")
#: per-node / per-GPU telemetry alerts a broken target explains (GpuLost and thresholds are not)
TARGET_MUTES = ("GpuNodeMetricMissing", "GpuMetricMissing", "GpuMetricIntermittent", "GpuNodeTelemetryImplausible",
                "GpuTelemetryImplausible", "GpuTelemetryFrozen", "GpuExporterScrapeSlow",
                # its exporter down, every sourced field of the node is served by a fallback (issue 13)
                "GpuMetricFallbackServing")
#: (tier that wins, tiers it mutes) per family of per-field alerts, widest first
FIELD_TIERS = (
    ("GpuMetricAbsent", ("GpuNodeMetricMissing", "GpuMetricMissing", "GpuMetricIntermittent")),
    ("GpuNodeMetricMissing", ("GpuMetricMissing", "GpuMetricIntermittent")),
    ("GpuFleetTelemetryImplausible", ("GpuNodeTelemetryImplausible", "GpuTelemetryImplausible")),
    ("GpuNodeTelemetryImplausible", ("GpuTelemetryImplausible",)),
)


@dataclass(frozen=True)
class Inhibition:
    """One inhibit rule: alerts matching ``target`` are muted while one matching ``source`` fires
    with the same values of ``equal``. ``source``/``target`` are (label, op, value) matchers."""

    why: str
    source: tuple[tuple[str, str, str], ...]
    target: tuple[tuple[str, str, str], ...]
    equal: tuple[str, ...]


def _names(wanted: tuple[str, ...], present: set[str]) -> str:
    return "|".join(n for n in wanted if n in present)


def alert_names(groups: list[RuleGroup]) -> list[str]:
    """Every alert name of ``groups``, sorted and unique."""
    return sorted({r.alert for g in groups for r in g.rules if r.alert})


def inhibitions(spec: Spec, groups: list[RuleGroup]) -> list[Inhibition]:
    """The inhibit rules for the alerts of ``groups`` (tiers whose alerts are not rendered are left out)."""
    lab = spec.exporter.labels
    present = set(alert_names(groups))
    fleet = ("job",) + ((lab.cluster,) if lab.cluster else ())
    node = fleet + (lab.node,)
    out: list[Inhibition] = []
    src, dst = _names(TARGET_ALERTS, present), _names(TARGET_MUTES, present)
    if src and dst:
        out.append(Inhibition("a target down, empty or flapping explains its node's telemetry alerts",
                              (("alertname", "=~", src),), (("alertname", "=~", dst),), node))
    for wins, mutes in FIELD_TIERS:
        muted = _names(mutes, present)
        if wins in present and muted:
            level = fleet if wins in ("GpuMetricAbsent", "GpuFleetTelemetryImplausible") else node
            what = "fleet" if level == fleet else "node"
            out.append(Inhibition(f"the {what} tier of a field mutes the narrower tiers of the same field",
                                  (("alertname", "=", wins),), (("alertname", "=~", muted),), level + (FIELD_LABEL,)))
    every = "|".join(sorted(present))
    out.append(Inhibition("a critical alert mutes the warning of the same GPU (or node, target) and field",
                          (("alertname", "=~", every), ("severity", "=", "critical")),
                          (("alertname", "=~", every), ("severity", "=", "warning")),
                          ("job",) + lab.identity + ("instance", FIELD_LABEL)))
    return out


def group_by(spec: Spec) -> list[str]:
    """Notification grouping: one group per cluster, node and alert name (fleet-wide alerts have
    no node label, so a field gone everywhere is one group)."""
    lab = spec.exporter.labels
    return ([lab.cluster] if lab.cluster else []) + [lab.node, "alertname"]


#: severities that page; ``info`` alerts (e.g. GpuXidInformational) stay on the root route
PAGING = "critical|warning"


def receiver(spec: Spec) -> str:
    """The receiver the route sends to, named after the spec (``gpumon`` by default): two specs' fragments
    merge into one Alertmanager configuration, whose receiver names must be unique. Define it (or
    rename it) there."""
    return spec.name


def jobs(spec: Spec) -> list[str]:
    """Every job a gpumon alert of ``spec`` carries: the exporter's, its fallback sources' and
    kube-state-metrics' (sorted, each once)."""
    out = {spec.exporter.job} | {s.job for m in spec.metrics for s in m.sources}
    if spec.kubernetes and spec.kubernetes.ksm_job:
        out.add(spec.kubernetes.ksm_job)
    return sorted(out)


def _route_matchers(spec: Spec, groups: list[RuleGroup]) -> list[tuple[str, str, str]]:
    """The route's matchers: gpumon's alert names, at a paging severity, of the spec's own jobs (so a
    second spec's route, with the same alert names and other jobs and labels, gets its alerts)."""
    job = jobs(spec)
    return [("alertname", "=~", "|".join(alert_names(groups))), ("severity", "=~", PAGING),
            ("job", "=", job[0]) if len(job) == 1 else ("job", "=~", "|".join(regex_literal(j) for j in job))]


def _matcher(label: str, op: str, value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return f'{label}{op}"{escaped}"'


def fragment(spec: Spec, groups: list[RuleGroup]) -> dict:
    """The Alertmanager configuration fragment as a dict (``route.routes`` to add to the root
    route, ``receivers``, ``inhibit_rules``)."""
    route = {"receiver": receiver(spec), "matchers": [_matcher(*m) for m in _route_matchers(spec, groups)],
             "group_by": group_by(spec), **TIMING}
    return {
        "route": {"routes": [route]},
        "receivers": [{"name": receiver(spec)}],
        "inhibit_rules": [{"source_matchers": [_matcher(*m) for m in i.source],
                           "target_matchers": [_matcher(*m) for m in i.target],
                           "equal": list(i.equal)} for i in inhibitions(spec, groups)],
    }


def _crd_matchers(matchers) -> list[dict]:
    return [{"name": label, "matchType": op, "value": value} for label, op, value in matchers]


def alertmanager_config(spec: Spec, groups: list[RuleGroup]) -> dict:
    """The same as a prometheus-operator AlertmanagerConfig (in the alerts' namespace: the
    operator restricts its route and inhibit rules to alerts of that namespace)."""
    namespace = spec.alerts.namespace or spec.prometheus_rule.namespace
    return {
        "apiVersion": "monitoring.coreos.com/v1alpha1",
        "kind": "AlertmanagerConfig",
        "metadata": {"name": spec.prometheus_rule.name, "namespace": namespace,
                     "labels": {"app.kubernetes.io/managed-by": "gpumon"}},
        "spec": {
            "route": {"receiver": receiver(spec), "groupBy": group_by(spec),
                      "groupWait": TIMING["group_wait"], "groupInterval": TIMING["group_interval"],
                      "repeatInterval": TIMING["repeat_interval"],
                      "matchers": _crd_matchers(_route_matchers(spec, groups))},
            "receivers": [{"name": receiver(spec)}],
            "inhibitRules": [{"sourceMatch": _crd_matchers(i.source), "targetMatch": _crd_matchers(i.target),
                              "equal": list(i.equal)} for i in inhibitions(spec, groups)],
        },
    }


def _header(spec: Spec, what: str) -> str:
    return (f"Generated by `gpumon render` from {spec.path.rsplit('/', 1)[-1]}. Do not edit.\n{what}\n"
            f"Receiver `{receiver(spec)}` has no integration here: configure (or rename) it in your Alertmanager.")


def files(spec: Spec, groups: list[RuleGroup]) -> dict[str, str]:
    """Rendered Alertmanager files keyed by path relative to the output folder."""
    return {
        FRAGMENT_PATH.format(name=spec.name): dump(fragment(spec, groups), header=_header(
            spec, "Merge into alertmanager.yml: append route.routes to your root route's routes (before a\n"
                  "catch-all), and add receivers and inhibit_rules.")),
        CRD_PATH.format(name=spec.name): dump(alertmanager_config(spec, groups), header=_header(
            spec, "A prometheus-operator AlertmanagerConfig; the Alertmanager object's\n"
                  "alertmanagerConfigSelector must select it.")),
    }
