"""The spec's immutable model: the metrics, the exporter and its labels, the alert and dashboard
settings, built once by :func:`gpumon.spec.load_spec` and passed to every renderer and check."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from .kube import Kubernetes
from .. import overrides as alert_overrides
from .sidecar import TextfileSidecar
from .problems import Problem


#: Labels that change with restarts or with ``honor_labels`` and must never identify a GPU.
VOLATILE_LABELS = ("instance", "pod", "namespace", "container", "service", "endpoint")


#: DCGM blank-value base for FP64 fields (2^47); INT64 blanks (>= 9223372036854775792) are larger.
#: Source: DCGM ``dcgm_structs.h`` (DCGM_FP64_BLANK, DCGM_INT64_BLANK); a value >= this is a
#: "blank / not found / not supported / no permission" code, not a reading.
DCGM_BLANK_MIN = 140737488355328


@dataclass(frozen=True)
class Threshold:
    """A bad-value threshold: the value is bad when ``value <op> threshold`` for ``for_`` seconds."""

    alert: str
    severity: str
    op: str
    value: float
    for_: float
    summary: str | None = None
    #: counters: compare ``rate(...[rate])`` (seconds), the per-second rate, instead of the value
    rate: float | None = None


#: default XID policy (sources: NVIDIA/DCGM#227, NVIDIA/DCGM#263, NVIDIA/go-dcgm#115): codes that
#: mean the GPU needs attention page critical; 13, 31, 43 are usually the application's fault
XID_CRITICAL = (48, 63, 64, 74, 79, 92, 94, 95, 119, 120)


XID_INFO = (13, 31, 43)


@dataclass(frozen=True)
class XidPolicy:
    """Which XID codes alert at which severity; ``other`` is the severity of unlisted codes
    ("ignore": none). An alert resolves once no new XID was seen for ``window`` seconds."""

    window: float = 900.0
    critical: tuple[int, ...] = XID_CRITICAL
    warning: tuple[int, ...] = ()
    info: tuple[int, ...] = XID_INFO
    ignore: tuple[int, ...] = ()
    other: str = "warning"

    def codes(self, severity: str) -> tuple[int, ...]:
        return getattr(self, severity)


@dataclass(frozen=True)
class Source:
    """One alternative series for a metric's reading, used where the primary series is absent
    (issue 13). Every field is resolved by the loader (presets and defaults applied).

    ``job`` is the source's job label; ``gpu``/``node``/``gpu_index`` name the source's labels
    holding each identity of :class:`Labels` (``node`` = ``instance`` means the target's instance
    without its port; ``gpu_index`` None = the source has none). ``gpu_prefix`` (keep/add/strip)
    turns its GPU id into the exporter's ``GPU-…`` UUID form. ``convert`` is (``*`` or ``/``,
    number) from ``unit`` to the metric's unit (:func:`gpumon.presets.conversion`).
    ``label`` is the ``source`` label value on the normalized series.
    """

    series: str
    label: str
    job: str
    gpu: str
    node: str
    unit: str
    gpu_index: str | None = None
    gpu_prefix: str = "keep"
    convert: tuple[str, float] = ("*", 1.0)
    preset: str | None = None


@dataclass(frozen=True)
class Metric:
    """One DCGM field the fleet reports, as the spec describes it.

    ``range_min``/``range_max`` bound plausible readings (inclusive, ``None`` = open) in ``unit``.
    ``presence`` is ``required`` (every GPU), ``optional`` (checked when present) or ``sparse``
    (exists only after an event; absence never alerts).
    """

    name: str
    kind: str
    unit: str
    presence: str
    description: str = ""
    title: str = ""
    range_min: float | None = None
    range_max: float | None = None
    thresholds: tuple[Threshold, ...] = ()
    mig: str = "device"
    frozen_check: bool = False
    legacy_names: tuple[str, ...] = ()
    alert_labels: tuple[str, ...] = ()
    xid: XidPolicy | None = None
    #: alternative series in priority order (empty: the primary ``name`` only)
    sources: tuple[Source, ...] = ()

    @property
    def required(self) -> bool:
        return self.presence == "required"

    @property
    def has_range(self) -> bool:
        return self.range_min is not None or self.range_max is not None

    @property
    def camel(self) -> str:
        """``DCGM_FI_DEV_GPU_TEMP`` -> ``GpuTemp`` (for derived alert names)."""
        base = self.name
        for prefix in ("DCGM_FI_DEV_", "DCGM_FI_PROF_", "DCGM_FI_", "DCGM_EXP_"):
            if base.startswith(prefix):
                base = base[len(prefix):]
                break
        return "".join(part.capitalize() for part in base.lower().split("_") if part)


@dataclass(frozen=True)
class Labels:
    """Label names dcgm-exporter puts on every GPU series (source: dcgm-exporter
    ``internal/pkg/rendermetrics``; ``Hostname`` became ``hostname`` in NVIDIA/dcgm-exporter#655)."""

    node: str = "Hostname"
    gpu: str = "UUID"
    gpu_index: str = "gpu"
    mig_instance: str = "GPU_I_ID"
    cluster: str | None = None
    model: str = "modelName"
    driver_version: str = "DCGM_FI_DRIVER_VERSION"

    @property
    def identity(self) -> tuple[str, ...]:
        """Labels that identify one GPU (or MIG instance), in a stable order."""
        base = (self.node, self.gpu, self.gpu_index, self.mig_instance)
        return ((self.cluster,) if self.cluster else ()) + base

    @property
    def node_identity(self) -> tuple[str, ...]:
        """Labels that identify one node."""
        return ((self.cluster,) if self.cluster else ()) + (self.node,)


@dataclass(frozen=True)
class Exporter:
    """The dcgm-exporter scrape job; intervals in seconds."""

    job: str
    scrape_interval: float = 15.0
    scrape_timeout: float = 10.0
    collect_interval: float = 30.0
    labels: Labels = field(default_factory=Labels)
    driver_version: str | None = None

    @property
    def sample_interval(self) -> float:
        """Seconds between distinct readings: max(scrape interval, collect interval)."""
        return max(self.scrape_interval, self.collect_interval)

    @property
    def min_rate_window(self) -> float:
        """Shortest window (seconds) a rate()/increase() may use: 2 x max(scrape, collect)."""
        return 2 * self.sample_interval


@dataclass(frozen=True)
class AlertSettings:
    """Alerting defaults; durations in seconds, ratios in 0..1."""

    for_: float = 300.0
    labels: tuple[tuple[str, str], ...] = ()
    #: base of runbook links; "" = alerts carry no runbook_url (the spec names no base)
    runbook_url: str = ""
    #: the spec says a relative ``runbook_url`` is meant (it resolves only in a forge's file view)
    runbook_url_relative: bool = False
    #: ``namespace`` label on every alert (the loader defaults it to the PrometheusRule's namespace)
    namespace: str | None = None
    inventory_lookback: float = 3600.0
    gap_window: float = 1800.0
    gap_min_ratio: float = 0.8
    flapping_window: float = 600.0
    flapping_min_up_ratio: float = 0.9
    frozen_window: float = 600.0
    implausible_for: float = 0.0
    scrape_slow_ratio: float = 0.8
    slow_group_interval: float = 60.0
    #: the gap ratios' group: a share of the last ``gap_window`` moves little in a few minutes
    gaps_group_interval: float = 180.0
    #: nodes (``Hostname``) and GPUs (UUID) gone on purpose (drained, decommissioned, replaced):
    #: the only way a GPU that stopped reporting stops paging without coming back
    retired_nodes: tuple[str, ...] = ()
    retired_gpus: tuple[str, ...] = ()


@dataclass(frozen=True)
class PrometheusRuleMeta:
    """Metadata of the rendered PrometheusRule object."""

    name: str = "gpumon"
    namespace: str = "monitoring"
    labels: tuple[tuple[str, str], ...] = (("release", "kube-prometheus-stack"),)


@dataclass(frozen=True)
class DashboardSettings:
    """The ``dashboards`` section: what the Grafana dashboards and their ConfigMaps look like.

    ``refresh`` and ``time_from`` are Grafana strings (``1m``, ``now-6h``); ``label`` /
    ``label_value`` select ConfigMaps for the sidecar; ``folder`` (with ``folder_annotation``)
    puts the dashboards into a Grafana folder; ``configmaps: false`` writes only the JSON files.
    ``datasource_uid`` is a datasource uid that ``gpumon lint`` accepts written literally in
    dashboards (gpumon's own dashboards always use the ``${datasource}`` variable).

    Defaults follow kube-prometheus-stack's Grafana sidecar (values ``grafana.sidecar.dashboards.label``
    = ``grafana_dashboard``, ``labelValue`` = ``"1"``), so the rendered ConfigMaps are picked up
    without changing the chart. The folder annotation defaults to the one kiwigrid/k8s-sidecar
    reads when the chart's ``folderAnnotation`` is unset (``FOLDER_ANNOTATION`` default
    ``k8s-sidecar-target-directory``).
    """

    enabled: bool = True
    title_prefix: str = ""
    tags: tuple[str, ...] = ("gpu", "dcgm")
    refresh: str = "1m"
    time_from: str = "now-6h"
    configmaps: bool = True
    namespace: str = "monitoring"
    label: str = "grafana_dashboard"
    label_value: str = "1"
    folder_annotation: str = "k8s-sidecar-target-directory"
    folder: str | None = None
    datasource_uid: str | None = None


@dataclass(frozen=True)
class Spec:
    """A loaded, validated spec: every section modelled once by the loader. Two specs are equal
    (and hash alike) exactly when every section is, so results may be cached per spec.
    ``kubernetes`` and ``textfile_sidecar`` are None when the spec has no such section."""

    path: str
    name: str
    exporter: Exporter
    alerts: AlertSettings
    prometheus_rule: PrometheusRuleMeta
    metrics: tuple[Metric, ...]
    dashboards: DashboardSettings = field(default_factory=DashboardSettings)
    kubernetes: Kubernetes | None = None
    textfile_sidecar: TextfileSidecar | None = None
    #: the ``overrides`` section (:mod:`gpumon.overrides`), in spec order
    overrides: tuple[alert_overrides.AlertOverride, ...] = ()
    #: non-fatal findings of the loader (a field outside the catalogue), in file order
    warnings: tuple[Problem, ...] = field(default=(), compare=False)

    @property
    def required_metrics(self) -> tuple[Metric, ...]:
        return tuple(m for m in self.metrics if m.presence == "required")

    @property
    def optional_metrics(self) -> tuple[Metric, ...]:
        """Tracked metrics that are not required (``presence: optional``), in spec order."""
        return tuple(m for m in self.metrics if m.presence == "optional")

    @property
    def tracked_metrics(self) -> tuple[Metric, ...]:
        """Required and optional metrics: those whose presence is recorded per GPU."""
        return tuple(m for m in self.metrics if m.presence != "sparse")

    @cached_property
    def metric_names(self) -> frozenset[str]:
        return frozenset(m.name for m in self.metrics)

    def metric(self, name: str) -> Metric | None:
        """The spec'd metric called ``name``, or None."""
        return next((m for m in self.metrics if m.name == name), None)
