"""gpumon's own alert names, found in the rule modules rather than listed by hand.

Every alert gpumon builds is named by a string literal ``Gpu<Name>`` in ``gpumon/rules/``
(``alert(spec, "GpuExporterDown", ...)``, ``XID_ALERTS``); nothing else there is spelled that way.
The spec refuses a threshold alert that takes one of these names (one alert name must mean one
rule). Read from the sources' text (a quoted ``Gpu<Name>``), so loading a spec neither builds nor
imports the rules (parsing them with :mod:`ast` took longer than the rest of loading the spec);
tests/test_spec.py checks the result against the alerts the rules render.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

_RULES = Path(__file__).resolve().parent / "rules"
#: a string literal that is exactly ``Gpu<Name>``, quoted alike on both sides
_LITERAL = re.compile(r"""(?<![\w.])(["'])(Gpu[A-Z][A-Za-z]+)\1""")


@lru_cache(maxsize=None)
def builtin_alerts() -> frozenset[str]:
    """The alert names of gpumon's own rules (sorted set of ``Gpu...`` literals in gpumon/rules/)."""
    return frozenset(m.group(2) for path in sorted(_RULES.glob("*.py"))
                     for m in _LITERAL.finditer(path.read_text(encoding="utf-8")))
