"""The grafana-foundation-sdk (==0.0.21) modules gpumon uses, imported in one place.

The SDK warns at import time that the classic dashboard model has a v2 successor. File
provisioning and kube-prometheus-stack's Grafana sidecar take the classic model (what the
Grafana dashboard JSON Schema in tests/data describes), so that warning is silenced here.
"""

import warnings

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from grafana_foundation_sdk.builders import common as cb
    from grafana_foundation_sdk.builders import dashboard as db
    from grafana_foundation_sdk.builders import prometheus, stat, statetimeline, table, timeseries
    from grafana_foundation_sdk.cog.encoder import JSONEncoder
    from grafana_foundation_sdk.models import common as cm
    from grafana_foundation_sdk.models import dashboard as dm
    from grafana_foundation_sdk.models import prometheus as pm

__all__ = ["cb", "db", "prometheus", "stat", "statetimeline", "table", "timeseries", "JSONEncoder", "cm", "dm", "pm"]
