"""promtool input-series notation: sample lists -> the compact ``values`` strings.

Tokens (source: prometheus ``docs/configuration/unit_testing_rules.md``): a number is a sample,
``_`` is a missing sample (the 5m lookback still shows the previous value), ``stale`` is a
staleness marker (the series drops out at once, as when a scrape fails or a series vanishes from
a successful scrape). ``a+bxn`` expands to n+1 samples a, a+b, ... a+n*b; ``_xn`` to n missing.
"""

from __future__ import annotations

import math
from typing import Union

#: one sample slot: a number, MISSING or STALE
Token = Union[int, float, str]
MISSING = "_"
STALE = "stale"
NAN = "NaN"


def fmt(value: Token) -> str:
    """One token as promtool reads it: ``83`` not ``83.0``, ``NaN``, big ints exact
    (9223372036854775794 stays as written)."""
    if isinstance(value, str):
        return value
    if isinstance(value, float):
        if math.isnan(value):
            return NAN
        if value.is_integer() and abs(value) < 2**53:
            return str(int(value))
        return repr(value)
    return str(value)


def _numeric(value: Token) -> bool:
    return not isinstance(value, str) and not (isinstance(value, float) and math.isnan(value))


def compress(samples: list[Token]) -> str:
    """The shortest readable ``values`` string for ``samples`` (one token per evaluation step).

    Arithmetic runs of 3+ numbers (or 2+ equal numbers) become ``a+bxn`` / ``axn``; runs of
    missing samples become ``_xn``. Returns e.g. ``"0+18000000x5 1000 stale"``.
    """
    out: list[str] = []
    i = 0
    while i < len(samples):
        tok = samples[i]
        if tok == MISSING:
            j = i
            while j < len(samples) and samples[j] == MISSING:
                j += 1
            out.append(MISSING if j - i == 1 else f"_x{j - i}")
            i = j
            continue
        if _numeric(tok) and i + 1 < len(samples) and _numeric(samples[i + 1]):
            step = samples[i + 1] - tok
            j = i + 1
            while j + 1 < len(samples) and _numeric(samples[j + 1]) and samples[j + 1] - samples[j] == step:
                j += 1
            length = j - i + 1
            if step == 0 or length >= 3:
                if step == 0:
                    out.append(f"{fmt(tok)}x{length - 1}")
                else:
                    sign = "+" if step > 0 else "-"
                    out.append(f"{fmt(tok)}{sign}{fmt(abs(step))}x{length - 1}")
                i = j + 1
                continue
        out.append(fmt(tok))
        i += 1
    return " ".join(out)
