"""The spec's ``dashboards`` section, as the loader modelled it (``Spec.dashboards``; the
dataclass and its defaults live in :mod:`generator.spec`)."""

from __future__ import annotations

from ..spec import DashboardSettings, Spec

__all__ = ["DashboardSettings", "settings"]


def settings(spec: Spec) -> DashboardSettings:
    """``spec.dashboards``: the dashboard settings, defaults filled in by the loader."""
    return spec.dashboards
