"""Prometheus duration strings <-> seconds.

Format from Prometheus' ``model.ParseDuration``: units y, w, d, h, m, s, ms in that order,
e.g. ``1h30m``; ``0`` is allowed.
"""

from __future__ import annotations

import re

_UNITS = (("y", 365 * 86400), ("w", 7 * 86400), ("d", 86400), ("h", 3600), ("m", 60), ("s", 1), ("ms", 0.001))
_RE = re.compile(r"^(?:(\d+)y)?(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?(?:(\d+)ms)?$")


def parse_duration(text: str) -> float:
    """Return the seconds in a Prometheus duration string.

    Args:
        text: e.g. ``"15s"``, ``"1h30m"``, ``"0"``.
    Returns:
        seconds as a float (``"500ms"`` -> 0.5).
    Raises:
        ValueError: when ``text`` is not a Prometheus duration.
    """
    if text == "0":
        return 0.0
    match = _RE.match(text or "")
    if not match or not any(match.groups()):
        raise ValueError(f"not a Prometheus duration: {text!r} (use e.g. 30s, 5m, 1h)")
    return float(sum(int(g) * mult for g, (_, mult) in zip(match.groups(), _UNITS) if g))


def format_duration(seconds: float) -> str:
    """Return the shortest Prometheus duration string for ``seconds`` (``90`` -> ``"1m30s"``).

    Args:
        seconds: a non-negative number of seconds; sub-millisecond parts are dropped.
    Returns:
        a duration string; ``"0s"`` for zero.
    """
    millis = int(round(seconds * 1000))
    if millis == 0:
        return "0s"
    out = []
    for unit, mult in _UNITS[:-1]:
        step = int(mult * 1000)
        if unit in ("y", "w"):
            continue  # durations read better in days/hours than in years/weeks
        count, millis = divmod(millis, step)
        if count:
            out.append(f"{count}{unit}")
    if millis:
        out.append(f"{millis}ms")
    return "".join(out)
