"""gpumon: declarative monitoring for NVIDIA GPU fleets scraped through dcgm-exporter.

Data flows one way: spec (``gpumon.spec``) -> rule model (``gpumon.rules``) ->
writers (``gpumon.render``/``gpumon.writer``); and for live checks
validate -> Prometheus client -> checks -> findings -> reporters.
"""
