"""gpumon's own alert names, found in the rule modules rather than listed by hand.

Every alert gpumon builds is named by a string literal ``Gpu<Name>`` in ``gpumon/rules/``
(``alert(spec, "GpuExporterDown", ...)``, ``XID_ALERTS``); nothing else there is spelled that way.
The spec refuses a threshold alert that takes one of these names (one alert name must mean one
rule). Read from the sources with :mod:`ast`, so loading a spec does not build or import the
rules; tests/test_spec.py checks the result against the alerts the rules render.
"""

from __future__ import annotations

import ast
import re
from functools import lru_cache
from pathlib import Path

_RULES = Path(__file__).resolve().parent / "rules"
_NAME = re.compile(r"Gpu[A-Z][A-Za-z]+")


@lru_cache(maxsize=None)
def builtin_alerts() -> frozenset[str]:
    """The alert names of gpumon's own rules (sorted set of ``Gpu...`` literals in gpumon/rules/)."""
    names: set[str] = set()
    for path in sorted(_RULES.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and _NAME.fullmatch(node.value):
                names.add(node.value)
    return frozenset(names)
