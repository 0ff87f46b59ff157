"""Colours as Grafana's dark theme draws them: the series palette, the named colours thresholds
and value mappings use (``green``, ``semi-dark-red`` ...), threshold steps and value mappings.

A colour from a dashboard ends up in an SVG attribute, so only a named colour, ``#rgb``/
``#rrggbb(aa)`` or ``rgb()``/``rgba()`` with numbers passes; anything else is the fallback grey
(escaping alone would still let ``url(...)`` or ``expression()`` through to CSS).
"""

from __future__ import annotations

import math
import re

#: Grafana's classic series palette (``colors.ts``, the "palette-classic" field colour mode)
PALETTE = ("#7EB26D", "#EAB839", "#6ED0E0", "#EF843C", "#E24D42", "#1F78C1", "#BA43A9", "#705DA0", "#508642",
           "#CCA300", "#447EBC", "#C15C17", "#890F02", "#0A437C", "#6D1F62", "#584477", "#B7DBAB", "#F4D598",
           "#70DBED", "#F9BA8F")
#: the dark theme's visualization colours by name (``palette.ts``: hue x shade)
_HUES = {"red": ("#C4162A", "#E02F44", "#F2495C", "#FF7383", "#FFA6B0"),
         "orange": ("#FA6400", "#FF780A", "#FF9830", "#FFB357", "#FFCB7D"),
         "yellow": ("#E0B400", "#F2CC0C", "#FADE2A", "#FFEE52", "#FFF899"),
         "green": ("#37872D", "#56A64B", "#73BF69", "#96D98D", "#C8F2C2"),
         "blue": ("#1F60C4", "#3274D9", "#5794F2", "#8AB8FF", "#C0D8FF"),
         "purple": ("#8F3BB8", "#A352CC", "#B877D9", "#CA95E5", "#DEB6F2")}
_SHADES = ("dark-", "semi-dark-", "", "light-", "super-light-")
NAMED = {shade + hue: colours[i] for hue, colours in _HUES.items() for i, shade in enumerate(_SHADES)}
NAMED.update({"transparent": "transparent", "text": "#CCCCDC", "white": "#FFFFFF", "black": "#000000"})
FALLBACK = "#8E8E8E"
_HEX = re.compile(r"#[0-9a-fA-F]{3,8}")
_RGB = re.compile(r"rgba?\(\s*[\d.]+%?\s*,\s*[\d.]+%?\s*,\s*[\d.]+%?\s*(,\s*[\d.]+%?\s*)?\)")


def colour(name) -> str:
    """A safe CSS colour for a Grafana colour value (see the module docstring)."""
    if not isinstance(name, str):
        return FALLBACK
    text = name.strip()
    if text in NAMED:
        return NAMED[text]
    if _HEX.fullmatch(text) or _RGB.fullmatch(text):
        return text
    return FALLBACK


def series_colour(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def _number(value) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def threshold_colour(value: float | None, fieldcfg: dict, default: str = "#73BF69") -> str:
    """The colour of the highest threshold step at or below ``value`` (``mode: percentage``
    against ``min``/``max``, as Grafana computes it); ``default`` when there are no steps."""
    thresholds = fieldcfg.get("thresholds") if isinstance(fieldcfg.get("thresholds"), dict) else {}
    steps = [s for s in thresholds.get("steps") or [] if isinstance(s, dict)]
    if not steps:
        return default
    picked = colour(steps[0].get("color"))
    if value is None or math.isnan(value):
        return picked
    if thresholds.get("mode") == "percentage":
        low, high = _number(fieldcfg.get("min")), _number(fieldcfg.get("max"))
        low = 0.0 if low is None else low
        high = 100.0 if high is None else high
        value = (value - low) / (high - low) * 100 if high != low else 0.0
    for step in steps[1:]:
        at = _number(step.get("value"))
        if at is not None and value >= at:
            picked = colour(step.get("color"))
    return picked


def threshold_lines(fieldcfg: dict) -> list[tuple[float, str]]:
    """``(value, colour)`` of every absolute threshold step after the base one."""
    thresholds = fieldcfg.get("thresholds") if isinstance(fieldcfg.get("thresholds"), dict) else {}
    if thresholds.get("mode") == "percentage":
        return []
    out = []
    for step in (thresholds.get("steps") or [])[1:]:
        if isinstance(step, dict) and _number(step.get("value")) is not None:
            out.append((_number(step.get("value")), colour(step.get("color"))))
    return out


def mapping(value: float | None, fieldcfg: dict) -> tuple[str | None, str | None]:
    """(text, colour) from the first value mapping that matches ``value`` (types ``value``,
    ``range``, ``special`` null/NaN), else (None, None). Mapping texts are returned raw: the
    caller escapes them."""
    for m in fieldcfg.get("mappings") or []:
        if not isinstance(m, dict) or not isinstance(m.get("options"), dict):
            continue
        opts, kind = m["options"], m.get("type")
        hit = None
        if kind == "value" and value is not None and not math.isnan(value):
            for key, result in opts.items():
                if _number(key) == value and isinstance(result, dict):
                    hit = result
                    break
        elif kind == "range" and value is not None and not math.isnan(value):
            low, high = _number(opts.get("from")), _number(opts.get("to"))
            if (low is None or value >= low) and (high is None or value <= high) and isinstance(opts.get("result"), dict):
                hit = opts["result"]
        elif kind == "special" and isinstance(opts.get("result"), dict):
            match = opts.get("match")
            if (match in ("null", "null+nan") and value is None) or \
                    (match in ("nan", "null+nan") and value is not None and math.isnan(value)):
                hit = opts["result"]
        if hit is not None:
            text = hit.get("text")
            return (str(text) if text is not None else None), (colour(hit["color"]) if hit.get("color") else None)
    return None, None
