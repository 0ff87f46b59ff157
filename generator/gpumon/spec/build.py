"""The model built from a checked spec document: defaults filled in, each section's dataclass."""

from __future__ import annotations

from . import kube, sidecar, presets
from ..durations import parse_duration
from .. import fields, overrides as alert_overrides
from .model import AlertSettings, DashboardSettings, Exporter, Labels, Metric, PrometheusRuleMeta, Source, Spec, Threshold, XidPolicy
from .semantic import _source_fields


def _build(plain: dict, path: str, where=None) -> Spec:
    """Model a checked document. Defaults are the dataclass defaults (one place); a key absent
    from the document takes them. ``where(path)``: (line, column) of a key, kept for errors found
    later (override names)."""
    exp = plain["exporter"]
    lab = exp.get("labels", {})
    labels = Labels(**{k: v for k, v in lab.items()})
    exporter = Exporter(
        job=exp["job"],
        scrape_interval=_dur(exp, "scrape_interval", Exporter.scrape_interval),
        scrape_timeout=_dur(exp, "scrape_timeout", Exporter.scrape_timeout),
        collect_interval=_dur(exp, "collect_interval", Exporter.collect_interval),
        labels=labels,
        driver_version=exp.get("driver_version"),
    )
    al = plain.get("alerts", {})
    defaults = AlertSettings()
    alerts = AlertSettings(
        for_=parse_duration(al["for"]) if "for" in al else defaults.for_,
        labels=tuple(sorted((al.get("labels") or {}).items())),
        runbook_url=al.get("runbook_url", defaults.runbook_url).rstrip("/"),
        runbook_url_relative=bool(al.get("runbook_url_relative", defaults.runbook_url_relative)),
        namespace=(al["namespace"] if "namespace" in al
                   else (plain.get("prometheus_rule") or {}).get("namespace", PrometheusRuleMeta.namespace)),
        inventory_lookback=_dur(al, "inventory_lookback", defaults.inventory_lookback),
        gap_window=_dur(al, "gap_window", defaults.gap_window),
        gap_min_ratio=float(al.get("gap_min_ratio", defaults.gap_min_ratio)),
        flapping_window=_dur(al, "flapping_window", defaults.flapping_window),
        flapping_min_up_ratio=float(al.get("flapping_min_up_ratio", defaults.flapping_min_up_ratio)),
        frozen_window=_dur(al, "frozen_window", defaults.frozen_window),
        implausible_for=_dur(al, "implausible_for", defaults.implausible_for),
        scrape_slow_ratio=float(al.get("scrape_slow_ratio", defaults.scrape_slow_ratio)),
        slow_group_interval=_dur(al, "slow_group_interval", defaults.slow_group_interval),
        gaps_group_interval=_dur(al, "gaps_group_interval", defaults.gaps_group_interval),
        retired_nodes=tuple(sorted(set((al.get("retired") or {}).get("nodes") or ()))),
        retired_gpus=tuple(sorted(set((al.get("retired") or {}).get("gpus") or ()))),
    )
    pr = plain.get("prometheus_rule", {})
    prdef = PrometheusRuleMeta()
    prule = PrometheusRuleMeta(
        name=pr.get("name", plain.get("name", prdef.name)),
        namespace=pr.get("namespace", prdef.namespace),
        labels=tuple(sorted(pr["labels"].items())) if "labels" in pr else prdef.labels,
    )
    metrics = tuple(_metric(m, alerts, exp) for m in plain["metrics"])
    return Spec(path=path, name=plain.get("name", "gpumon"), exporter=exporter, alerts=alerts,
                prometheus_rule=prule, metrics=metrics, dashboards=_dashboards(plain.get("dashboards") or {}),
                kubernetes=kube.from_plain(plain.get("kubernetes"), labels.node),
                textfile_sidecar=sidecar.from_plain(plain.get("textfile_sidecar")),
                overrides=alert_overrides.from_plain(plain.get("overrides"), where))


def _dashboards(raw: dict) -> DashboardSettings:
    cm = raw.get("configmap") or {}
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
        datasource_uid=raw.get("datasource_uid", d.datasource_uid),
    )


def _xid(raw: dict) -> XidPolicy:
    d = XidPolicy()
    return XidPolicy(window=_dur(raw, "window", d.window),
                     **{k: tuple(raw.get(k, getattr(d, k))) for k in ("critical", "warning", "info", "ignore")},
                     other=raw.get("other", d.other))


def _dur(section: dict, key: str, default: float) -> float:
    return parse_duration(section[key]) if key in section else default


def _sources(m: dict, exp: dict) -> tuple[Source, ...]:
    out = []
    for raw in m.get("sources", []):
        f = _source_fields(raw, m, exp)
        out.append(Source(series=f["name"], label=f["label"], job=f["job"], gpu=f["gpu"], node=f["node"],
                          unit=f["unit"], gpu_index=f["gpu_index"], gpu_prefix=f["gpu_prefix"],
                          convert=presets.conversion(f["unit"], m["unit"]), preset=f["preset"]))
    return tuple(out)


def _metric(m: dict, alerts: AlertSettings, exp: dict) -> Metric:
    rng = m.get("range") or [None, None]
    camel = Metric(name=m["name"], kind=m["kind"], unit=m["unit"], presence=m["presence"]).camel
    thresholds = []
    for t in m.get("thresholds", []):
        direction = "High" if t["op"] in (">", ">=") else "Low"
        thresholds.append(Threshold(
            alert=t.get("alert", f"Gpu{camel}{direction}"),
            severity=t["severity"], op=t["op"], value=float(t["value"]),
            for_=parse_duration(t["for"]) if "for" in t else alerts.for_,
            summary=t.get("summary"), rate=parse_duration(t["rate"]) if "rate" in t else None,
        ))
    return Metric(
        name=m["name"], kind=m["kind"], unit=m["unit"], presence=m["presence"],
        description=m.get("description", ""), title=m.get("title") or fields.title(m["name"], camel),
        range_min=rng[0], range_max=rng[1], thresholds=tuple(thresholds),
        mig=m.get("mig", "device"), frozen_check=bool(m.get("frozen_check", False)),
        legacy_names=tuple(m.get("legacy_names", [])), alert_labels=tuple(m.get("alert_labels", [])),
        xid=_xid(m["xid"]) if isinstance(m.get("xid"), dict) else None,
        sources=_sources(m, exp),
    )
