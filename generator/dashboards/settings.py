"""The spec's ``dashboards`` section: what the Grafana dashboards and their ConfigMaps look like.

Defaults follow kube-prometheus-stack's Grafana sidecar (values ``grafana.sidecar.dashboards.label``
= ``grafana_dashboard``, ``labelValue`` = ``"1"``), so the rendered ConfigMaps are picked up
without changing the chart. The folder annotation defaults to the one kiwigrid/k8s-sidecar reads
when the chart's ``folderAnnotation`` is unset (``FOLDER_ANNOTATION`` default
``k8s-sidecar-target-directory``); Grafana turns it into a folder with
``provider.foldersFromFilesStructure: true``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..spec import Spec


@dataclass(frozen=True)
class DashboardSettings:
    """Dashboard options read from ``spec.raw["dashboards"]`` (schema: gpumon.schema.json).

    ``refresh`` and ``time_from`` are Grafana strings (``1m``, ``now-6h``); ``label`` /
    ``label_value`` select ConfigMaps for the sidecar; ``folder`` (with ``folder_annotation``)
    puts the dashboards into a Grafana folder; ``configmaps: false`` writes only the JSON files.
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


def settings(spec: Spec) -> DashboardSettings:
    """The spec's dashboard settings; missing keys take the defaults above. The spec loader has
    already validated the section against the schema, so no checks are repeated here."""
    raw = dict(spec.raw.get("dashboards") or {})
    cm = dict(raw.get("configmap") or {})
    d = DashboardSettings()
    return DashboardSettings(
        enabled=bool(raw.get("enabled", d.enabled)),
        title_prefix=raw.get("title_prefix", d.title_prefix),
        tags=tuple(raw.get("tags", d.tags)),
        refresh=raw.get("refresh", d.refresh),
        time_from=raw.get("time_from", d.time_from),
        configmaps=bool(cm.get("enabled", d.configmaps)),
        namespace=cm.get("namespace", d.namespace),
        label=cm.get("label", d.label),
        label_value=str(cm.get("label_value", d.label_value)),
        folder_annotation=cm.get("folder_annotation", d.folder_annotation),
        folder=cm.get("folder", d.folder),
    )
