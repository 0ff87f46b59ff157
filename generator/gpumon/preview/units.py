"""Grafana's value formats (``fieldConfig.defaults.unit``) for axis ticks and stat values.

The unit ids and their scaling follow Grafana's ``valueFormats`` registry (``categories.ts`` in
grafana/grafana, packages/grafana-data/src/valueFormats): ``short`` scales by 1000 with
``K``/``Mil``/``Bil``; ``bytes`` by 1024 (IEC); ``decbytes``, ``watt``, ``hertz`` and ``Bps`` by
1000 (SI); ``s``/``ms`` become the largest whole time unit; ``percentunit`` is a ratio shown
as a percentage. Custom ``suffix:X`` and ``prefix:X`` units are honoured; an id gpumon does not
know prints the number with the id after it (Grafana does the same for free-text units).

Decimals: the panel's ``decimals`` when set, else as many as the magnitude needs (three
significant digits, trailing zeros dropped), so ticks read ``0.25``, ``2.5``, ``25``, ``250``.
"""

from __future__ import annotations

import math

_SI = ("n", "µ", "m", "", "k", "M", "G", "T", "P", "E")
_IEC = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
_SHORT = ("", " K", " Mil", " Bil", " Tri", " Quadr", " Quint")
_COUNT = ("", "K", "M", "B", "T")

#: unit id -> (kind, symbol, starting prefix): kind ``si`` (x1000, metric prefixes), ``iec``
#: (x1024, binary prefixes), ``count`` (x1000 with K/M/B, then the symbol), ``fixed`` (no scaling)
_UNITS = {
    "watt": ("si", "W", ""), "kwatt": ("si", "W", "k"), "mwatt": ("si", "W", "m"),
    "volt": ("si", "V", ""), "amp": ("si", "A", ""), "joule": ("si", "J", ""), "watth": ("si", "Wh", ""),
    "kwatth": ("si", "Wh", "k"), "hertz": ("si", "Hz", ""), "rothz": ("si", "Hz", ""), "rotmhz": ("si", "Hz", "M"),
    "rotkhz": ("si", "Hz", "k"), "rotghz": ("si", "Hz", "G"),
    "decbytes": ("si", "B", ""), "deckbytes": ("si", "B", "k"), "decmbytes": ("si", "B", "M"),
    "decgbytes": ("si", "B", "G"), "decbits": ("si", "b", ""),
    "Bps": ("si", "B/s", ""), "KBs": ("si", "B/s", "k"), "MBs": ("si", "B/s", "M"), "GBs": ("si", "B/s", "G"),
    "bps": ("si", "b/s", ""), "Kbits": ("si", "b/s", "k"), "Mbits": ("si", "b/s", "M"),
    "bytes": ("iec", "B", ""), "kbytes": ("iec", "B", "Ki"), "mbytes": ("iec", "B", "Mi"),
    "gbytes": ("iec", "B", "Gi"), "bits": ("iec", "b", ""), "binBps": ("iec", "B/s", ""),
    "KiBs": ("iec", "B/s", "Ki"), "MiBs": ("iec", "B/s", "Mi"),
    "cps": ("count", "cps", ""), "ops": ("count", "ops", ""), "reqps": ("count", "req/s", ""),
    "rps": ("count", "rd/s", ""), "wps": ("count", "wr/s", ""), "iops": ("count", "io/s", ""),
    "cpm": ("count", "cpm", ""), "opm": ("count", "ops/min", ""),
    "celsius": ("fixed", "°C", ""), "fahrenheit": ("fixed", "°F", ""), "kelvin": ("fixed", "K", ""),
    "percent": ("fixed", "%", ""), "humidity": ("fixed", "%H", ""), "dB": ("fixed", "dB", ""),
}
#: time units -> seconds per unit
_TIME = {"ns": 1e-9, "µs": 1e-6, "us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0,
         "dtdurations": 1.0, "dtdurationms": 1e-3}
_TIME_STEPS = ((86400 * 365, "year"), (86400 * 7, "week"), (86400, "day"), (3600, "hour"), (60, "min"), (1, "s"),
               (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns"))


def number(value: float, decimals: int | None = None) -> str:
    """``value`` with ``decimals`` places, or three significant digits without trailing zeros."""
    if decimals is not None:
        return f"{value:.{max(0, min(int(decimals), 10))}f}"
    if value == 0:
        return "0"
    magnitude = math.floor(math.log10(abs(value)))
    places = max(0, 2 - magnitude)
    text = f"{value:.{min(places, 10)}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _scaled(value: float, base: int, prefixes: tuple[str, ...], start: int, decimals) -> tuple[str, str]:
    """(number text, prefix) with ``value`` divided by ``base`` until under ``base``."""
    i = start
    while abs(value) >= base and i < len(prefixes) - 1:
        value /= base
        i += 1
    while 0 < abs(value) < 1 and prefixes is _SI and i > 0:
        value *= base
        i -= 1
    return number(value, decimals), prefixes[i]


def _duration(seconds: float, decimals) -> str:
    if seconds == 0:
        return "0 s"
    for size, name in _TIME_STEPS:
        if abs(seconds) >= size:
            return f"{number(seconds / size, decimals)} {name}"
    return f"{number(seconds / 1e-9, decimals)} ns"


def format_value(value: float | None, unit: str | None, decimals: int | None = None) -> str:
    """``value`` as Grafana prints it in ``unit`` (see the module docstring); ``None``/NaN: ``NaN``."""
    if value is None or math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    unit = unit or "short"
    if unit.startswith("suffix:"):
        return f"{number(value, decimals)}{unit[7:]}"
    if unit.startswith("prefix:"):
        return f"{unit[7:]}{number(value, decimals)}"
    if unit == "percentunit":
        return f"{number(value * 100, decimals)}%"
    if unit == "none":
        return number(value, decimals)
    if unit == "short":
        text, prefix = _scaled(value, 1000, _SHORT, 0, decimals)
        return text + prefix
    if unit in _TIME:
        return _duration(value * _TIME[unit], decimals)
    kind, symbol, start = _UNITS.get(unit, (None, "", ""))
    if kind == "fixed":
        return f"{number(value, decimals)}{'' if symbol == '%' else ' '}{symbol}"
    if kind == "si":
        text, prefix = _scaled(value, 1000, _SI, _SI.index(start), decimals)
        return f"{text} {prefix}{symbol}"
    if kind == "iec":
        text, prefix = _scaled(value, 1024, _IEC, _IEC.index(start), decimals)
        return f"{text} {prefix}{symbol}"
    if kind == "count":
        text, prefix = _scaled(value, 1000, _COUNT, 0, decimals)
        return f"{text}{prefix} {symbol}"
    return f"{number(value, decimals)} {unit}"


def ticks(low: float, high: float, count: int = 5) -> list[float]:
    """About ``count`` round tick values covering ``[low, high]`` (1, 2, 2.5, 5 x 10^n steps)."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return []
    if high <= low:
        high = low + (abs(low) or 1)
    raw = (high - low) / max(1, count)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    first = math.floor(low / step) * step
    out, v = [], first
    while v <= high + step * 1e-9 and len(out) < 50:
        out.append(round(v, 12))
        v += step
    if out and out[-1] < high:
        out.append(round(out[-1] + step, 12))
    return out
