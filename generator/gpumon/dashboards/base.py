"""What every gpumon dashboard shares: uid, title, tags, time settings, links to its sibling
dashboards, template variables, and runbook texts for empty panels."""

from __future__ import annotations

import hashlib


from .sdk import db, dm
from ..spec import Spec
from . import variables
from .panels import DATASOURCE, Board, new_dashboard

#: Grafana's limit on dashboard uid length
UID_MAX = 40


def uid(spec: Spec, key: str) -> str:
    """Stable dashboard uid ``<spec name>-<key>``; names too long for Grafana's 40 characters
    are cut and suffixed with 8 hex digits of their SHA-1, so uids stay unique and stable."""
    full = f"{spec.name}-{key}"
    if len(full) <= UID_MAX:
        return full
    digest = hashlib.sha1(full.encode("utf-8")).hexdigest()[:8]
    return f"{full[:UID_MAX - 9]}-{digest}"


def runbook(spec: Spec, alert: str) -> str:
    """Runbook address of ``alert``: ``<alerts.runbook_url>/<alert>.md`` (as the alert annotations);
    without a base, the rendered file's path."""
    if not spec.alerts.runbook_url:
        return f"output/runbooks/{alert}.md"
    return f"{spec.alerts.runbook_url}/{alert}.md"


def runbook_links(spec: Spec, *alerts: str) -> list[tuple[str, str]]:
    """Panel links to runbooks, only when ``runbook_url`` is absolute: a relative path (the
    default ``../runbooks``) would resolve against Grafana's own address."""
    if not spec.alerts.runbook_url.startswith(("http://", "https://")):
        return []
    return [(f"Runbook: {a}", runbook(spec, a)) for a in alerts]


def runbook_text(spec: Spec, alert: str) -> str:
    """Where ``alert``'s runbook is, for text on a dashboard: its address when ``runbook_url`` is
    absolute; else the rendered file, named as in gpumon's output folder (a relative base such as
    ``../runbooks`` resolves against the rules file, which a reader of the dashboard cannot see)."""
    if spec.alerts.runbook_url.startswith(("http://", "https://")):
        return runbook(spec, alert)
    return f"runbooks/{alert}.md in gpumon's rendered output"


def no_value(spec: Spec, meaning: str, alert: str) -> str:
    """Text shown instead of "No data": what empty means here and where the runbook is."""
    return f"{meaning} Runbook: {runbook_text(spec, alert)}"


def alert_annotation(expr: str) -> db.AnnotationQuery:
    """Marks on every time series when a gpumon alert fires (``ALERTS`` selector ``expr``),
    titled with the alert name and labelled with the DCGM field."""
    return (db.AnnotationQuery().name("gpumon alerts").datasource(DATASOURCE).enable(True)
            .icon_color("red").expr(expr).step("60s").title_format("{{alertname}}")
            .text_format("{{severity}} {{dcgm_field}}").use_value_for_time(False))


def build(spec: Spec, key: str, title: str, description: str, board: Board, node_and_gpu: bool,
          annotation_expr: str | None = None) -> db.Dashboard:
    """The finished dashboard builder for ``board``'s panels.

    Args:
        key: short name (``fleet``, ``gpu``, ``health``) used in the uid and file name.
        node_and_gpu: add the node and GPU template variables.
        annotation_expr: an ``ALERTS`` selector to mark on the graphs, or None.
    """
    s = spec.dashboards
    tags = sorted(set(s.tags) | {spec.name})
    dash = (new_dashboard(f"{s.title_prefix}{title}").uid(uid(spec, key)).description(description)
            .tags(tags).time(s.time_from, "now").refresh(s.refresh).timezone("browser").editable()
            .tooltip(dm.DashboardCursorSync.CROSSHAIR)
            .link(db.DashboardLink("GPU dashboards").type(dm.DashboardLinkType.DASHBOARDS).tags([spec.name])
                  .as_dropdown(True).include_vars(True).keep_time(True).icon("external link")))
    if annotation_expr:
        dash = dash.annotation(alert_annotation(annotation_expr))
    for var in variables.for_scope(spec, node_and_gpu):
        dash = dash.with_variable(var)
    return board.apply(dash)


def detail_link(spec: Spec, with_gpu: bool = True) -> db.DashboardLink:
    """A data link from a table row to the detail dashboard for its node (and GPU), keeping the
    datasource, cluster and time range. Data links (``fieldConfig.defaults.links``) rather than a
    per-column override: Grafana's dashboard JSON Schema types override matcher options and
    values as objects, so the usual ``byName`` override with a string does not validate."""
    lab = spec.exporter.labels
    url = f"/d/{uid(spec, 'gpu')}?var-datasource=${{datasource}}&var-node=${{__data.fields.{lab.node}}}"
    if with_gpu:
        url += f"&var-gpu=${{__data.fields.{lab.gpu}}}"
    if lab.cluster:
        url += f"&var-cluster=${{__data.fields.{lab.cluster}}}"
    url += "&${__url_time_range}"
    return db.DashboardLink("GPU detail").type(dm.DashboardLinkType.LINK).url(url)


def link_rows_to_detail(spec: Spec, panel, with_gpu: bool = True):
    """``panel`` (a table) whose rows link to the detail dashboard (see :func:`detail_link`)."""
    return panel.data_links([detail_link(spec, with_gpu)])
