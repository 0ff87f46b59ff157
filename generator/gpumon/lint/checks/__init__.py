"""The lint checks, one module per check, found in this folder (:mod:`gpumon.checkfind`): each
has ``ID``, ``ORDER``, a default ``SEVERITY``, a docstring (what it catches, why, how to silence
it) and ``check(inputs, ctx)`` yielding findings. A new check is a new module here.
"""

from ...checkfind import LINT, modules

#: Every check, in report order (``ORDER``): rules and queries first, then PrometheusRule objects,
#: then dashboards.
ALL = tuple(modules(LINT))
