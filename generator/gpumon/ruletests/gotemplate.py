"""Expected annotation texts: the small subset of Prometheus' Go templating gpumon's annotations
use, expanded in Python so generated tests can state ``exp_annotations`` exactly.

promtool compares annotations as well as labels (verified with promtool 2.42: an alert test
without ``exp_annotations`` fails against a rule that has annotations). Supported forms, with
Prometheus' own formatting (source: prometheus ``template/template.go``, Go ``strconv``/``fmt``):
``{{ $labels.NAME }}`` (a missing label expands to ""; Prometheus uses ``missingkey=zero``),
``{{ $value }}`` (Go ``%v`` of a float64), ``{{ $value | humanizePercentage }}`` (``%.4g%%`` of
value x 100) and ``{{ $value | humanizeDuration }}``.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal

_ACTION = re.compile(r"\{\{-?\s*(.*?)\s*-?\}\}")
_LABEL = re.compile(r"^\$labels\.([A-Za-z_][A-Za-z0-9_]*)$")


class TemplateError(ValueError):
    """An annotation uses Go templating this expander does not know (name the action)."""


def go_float(value: float) -> str:
    """``fmt.Sprint(float64)`` as Go prints it (``strconv.FormatFloat(v, 'g', -1, 64)``): the
    shortest digits that round-trip, in exponent form when the decimal exponent is < -4 or >= 6
    (``1e+06``, ``9.223372036854776e+18``), else plain (``220``, ``0.5``)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "0"
    sign, digits, exponent = Decimal(repr(float(value))).normalize().as_tuple()
    text = "".join(map(str, digits))
    nd = len(text)
    dp = nd + exponent          # digits left of the decimal point
    exp = dp - 1
    out = "-" if sign else ""
    if exp < -4 or exp >= 6:
        mant = text[0] + ("." + text[1:] if nd > 1 else "")
        return f"{out}{mant}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    if dp <= 0:
        return f"{out}0.{'0' * -dp}{text}"
    if dp >= nd:
        return f"{out}{text}{'0' * (dp - nd)}"
    return f"{out}{text[:dp]}.{text[dp:]}"


def _go_g4(value: float) -> str:
    """Go ``%.4g``."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return "%.4g" % value


def humanize_percentage(value: float) -> str:
    """Prometheus ``humanizePercentage``: ``0.5`` -> ``50%``."""
    return _go_g4(value * 100) + "%"


def humanize_duration(value: float) -> str:
    """Prometheus ``humanizeDuration`` (seconds): ``9`` -> ``9s``, ``90`` -> ``1m 30s``."""
    if math.isnan(value) or math.isinf(value):
        return _go_g4(value)
    if value == 0:
        return "0s"
    sign = "-" if value < 0 else ""
    v = abs(value)
    if v >= 1:
        whole = int(v)
        seconds, minutes = whole % 60, (whole // 60) % 60
        hours, days = (whole // 3600) % 24, whole // 86400
        if days:
            return f"{sign}{days}d {hours}h {minutes}m {seconds}s"
        if hours:
            return f"{sign}{hours}h {minutes}m {seconds}s"
        if minutes:
            return f"{sign}{minutes}m {seconds}s"
        return f"{sign}{_go_g4(v)}s"
    for unit, mult in (("ms", 1e3), ("us", 1e6), ("ns", 1e9), ("ps", 1e12), ("fs", 1e15)):
        if v * mult >= 1 or unit == "fs":
            return f"{sign}{_go_g4(v * mult)}{unit}"
    return ""


def expand(text: str, labels: dict[str, str], value: float) -> str:
    """Expand one annotation ``text`` for an alert with ``labels`` and ``value``.

    Raises:
        TemplateError: for an action other than the supported forms.
    """
    def one(match: re.Match) -> str:
        action = " ".join(match.group(1).split())
        lab = _LABEL.match(action)
        if lab:
            return labels.get(lab.group(1), "")
        if action == "$value":
            return go_float(value)
        if action == "$value | humanizePercentage":
            return humanize_percentage(value)
        if action == "$value | humanizeDuration":
            return humanize_duration(value)
        raise TemplateError(f"annotation uses {{{{ {action} }}}}, which gpumon's rule-test generator "
                            "cannot expand; extend generator/gpumon/ruletests/gotemplate.py")
    return _ACTION.sub(one, text)
