"""The grafana-foundation-sdk (==0.0.21) modules gpumon uses, imported in one place.

The SDK warns at import time that the classic dashboard model has a v2 successor. File
provisioning and kube-prometheus-stack's Grafana sidecar take the classic model (what the
Grafana dashboard JSON Schema in tests/data describes), so that warning is silenced here.
"""

import warnings

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from grafana_foundation_sdk.builders import common as cb  # noqa: F401
    from grafana_foundation_sdk.builders import dashboard as db  # noqa: F401
    from grafana_foundation_sdk.builders import prometheus, stat, statetimeline, table, timeseries  # noqa: F401
    from grafana_foundation_sdk.cog.encoder import JSONEncoder  # noqa: F401
    from grafana_foundation_sdk.models import common as cm  # noqa: F401
    from grafana_foundation_sdk.models import dashboard as dm  # noqa: F401
    from grafana_foundation_sdk.models import prometheus as pm  # noqa: F401
