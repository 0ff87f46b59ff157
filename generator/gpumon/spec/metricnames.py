"""Which names a spec's metric may have: the series a field is read from must be a field's, not a
series Prometheus or gpumon's own rules write. A metric named ``up`` or ``ALERTS`` loaded, and its
rules joined a series with itself (many-to-many) or read their own alerts; a name with a colon is
a recording rule's by Prometheus' naming rules, and gpumon's records are named so (``level:metric:
operations``), so such a metric was read from gpumon's own output. Reports through ``add(path,
message)`` as the other spec checks (:mod:`.bounds`); type-guarded."""

from __future__ import annotations

from typing import Any, Callable

#: series Prometheus writes itself: one per target per scrape (``up``, ``scrape_*``) and for alerting
#: rules (``ALERTS``, ``ALERTS_FOR_STATE``); source: prometheus.io/docs "Jobs and instances",
#: "Alerting rules" ("Inspecting alerts during runtime")
PROMETHEUS_SERIES = frozenset({
    "up", "scrape_duration_seconds", "scrape_samples_scraped", "scrape_samples_post_metric_relabeling",
    "scrape_series_added", "scrape_timeout_seconds", "scrape_sample_limit", "scrape_body_size_bytes",
    "ALERTS", "ALERTS_FOR_STATE"})


def name_problem(name: Any) -> str | None:
    """Why ``name`` cannot be the series a GPU field is read from, or None."""
    if not isinstance(name, str):
        return None
    if name in PROMETHEUS_SERIES:
        return f"{name!r} is a series Prometheus writes itself, not a GPU field's"
    if ":" in name:
        return (f"{name!r} has a colon: Prometheus reserves colons for recording rules (gpumon's own records are "
                "named so), exporters never write them")
    return None


def problems(plain: dict, add: Callable[[list, str], None]) -> None:
    """Each metric's name and legacy names: not a series Prometheus writes, no colon, and a legacy
    name is not the metric's own name (its rule would page the field's current name as a 1.x one)."""
    metrics = plain.get("metrics") if isinstance(plain.get("metrics"), list) else []
    for i, metric in enumerate(metrics):
        if not isinstance(metric, dict):
            continue
        if name_problem(metric.get("name")):
            add(["metrics", i, "name"], name_problem(metric.get("name")))
        legacy = metric.get("legacy_names") if isinstance(metric.get("legacy_names"), list) else []
        for j, name in enumerate(legacy):
            if name_problem(name):
                add(["metrics", i, "legacy_names", j], name_problem(name))
            elif isinstance(name, str) and name == metric.get("name"):
                add(["metrics", i, "legacy_names", j], f"{name!r} is the metric's own name; list only the names "
                    "the field had in older exporters")
