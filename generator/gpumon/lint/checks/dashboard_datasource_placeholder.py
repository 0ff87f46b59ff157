"""``dashboard-datasource-placeholder``: a dashboard exported "for sharing externally"
(``__inputs`` and ``${DS_...}`` datasource placeholders).

What: a non-empty ``__inputs`` list, or any datasource reference of the form ``${DS_NAME}``.
Why: only the Grafana UI import dialog fills those placeholders; a dashboard provisioned from a
file, a ConfigMap (sidecar) or the API keeps the literal ``${DS_PROMETHEUS}`` and every panel
says "Datasource ${DS_PROMETHEUS} was not found" (stefanprodan/dockprom#200,
grafana/grafana#10786). Use a ``datasource``-type template variable and
``{"type": "prometheus", "uid": "${datasource}"}``.
Silence: ``--disable dashboard-datasource-placeholder`` (when the file is only imported by hand).
"""

from __future__ import annotations

import re
from typing import Iterator

from ...findings import Finding
from ._base import make
from ._datasources import references

ID = "dashboard-datasource-placeholder"
ORDER = 180
SEVERITY = "error"
_PLACEHOLDER = re.compile(r"^\$\{?DS_[A-Za-z0-9_]*\}?$")
HINT = ("add a template variable {\"name\": \"datasource\", \"type\": \"datasource\", \"query\": \"prometheus\"} and "
        "reference {\"type\": \"prometheus\", \"uid\": \"${datasource}\"}")


def check(inputs, ctx) -> Iterator[Finding]:
    for dash in inputs.dashboards:
        if dash.doc.get("__inputs"):
            yield make(ID, SEVERITY, dash.subject, "__inputs lists import-time placeholders: the dashboard was "
                       "exported for sharing externally and only works through the UI import dialog", HINT,
                       dash.at("/__inputs"))
        for pointer, ref in references(dash.doc):
            if _PLACEHOLDER.match(ref):
                yield make(ID, SEVERITY, dash.subject, f"datasource {ref!r} is an import placeholder: provisioned "
                           "dashboards keep it literally and show \"datasource not found\"", HINT, dash.at(pointer))
