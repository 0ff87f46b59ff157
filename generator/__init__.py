"""gpumon: declarative monitoring for NVIDIA GPU fleets scraped through dcgm-exporter.

Data flows one way: spec (``generator.spec``) -> rule model (``generator.rules``) ->
writers (``generator.render``/``generator.writer``); and for live checks
validate -> Prometheus client -> checks -> findings -> reporters.
"""
