"""``gpumon preview`` and the preview section of ``validate --dashboards --format html``: every
panel of Grafana dashboards drawn from live data, in the dashboard's own grid, so a reviewer of
a dashboard change sees what Grafana would show without running one.

Steps, one module each:

1. :mod:`.fetch` runs each panel's queries over the dashboard's time range (reusing
   ``validate --dashboards``' reading, variables and macros, and its bounds) into a
   :mod:`.model` (series per panel; why a panel has none);
2. :mod:`.timecharts` (time series, heatmap, state timeline) and :mod:`.cards` (stat, gauge,
   bar gauge, table, text) draw each panel as inline SVG or HTML, in the panel's unit
   (:mod:`.units`) and colours (:mod:`.colours`);
3. :mod:`.layout` places the panels on Grafana's 24-column grid and writes the page.

Drawn with gpumon's own code: no Grafana, no script, nothing fetched by the page; every text
from a dashboard or a series is escaped.
"""
