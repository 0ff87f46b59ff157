"""What ``gpumon lint`` and ``gpumon diff`` read, with positions: Prometheus rule files,
PrometheusRule objects, Grafana dashboards (JSON files, ConfigMaps, GrafanaDashboard objects) and
the PromQL inside them.

``files`` opens each file within bounds (regular files, symlinks inside the tree, size and
nesting caps); ``loader`` finds and parses files into the :mod:`model` (``Inputs``: rules, dashboards, ignore
comments); ``promql`` parses and walks expressions; ``grafana`` substitutes dashboard variables
and macros so panel queries parse as PromQL. Nothing here judges the input: checks live in
``gpumon.lint``, comparisons in ``gpumon.diff``.
"""
