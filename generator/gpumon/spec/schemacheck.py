"""The spec's JSON Schema as shipped, and its errors explained at their positions in the file."""

from __future__ import annotations

import difflib
import json
import re
from importlib import resources

import jsonschema
from ruamel.yaml.comments import CommentedMap

from .positions import _format_path, _position
from .problems import Problem


def schema() -> dict:
    """The spec's JSON Schema (draft-07) as a dict, read from the installed package."""
    return json.loads(schema_text())


def schema_text() -> str:
    """The spec's JSON Schema as shipped (``generator/gpumon/schema/gpumon.schema.json``)."""
    return resources.files("gpumon").joinpath("schema/gpumon.schema.json").read_text("utf-8")


def _schema_problems(doc: CommentedMap, plain: dict, name: str) -> list[Problem]:
    validator = jsonschema.Draft7Validator(schema())
    problems = []
    for err in validator.iter_errors(plain):
        problems.extend(_explain(err, doc, name))
    return problems


def _explain(err: jsonschema.ValidationError, doc: CommentedMap, name: str) -> list[Problem]:
    path = list(err.absolute_path)
    if err.validator == "additionalProperties":
        allowed = sorted(err.schema.get("properties", {}))
        extra = sorted(set(err.instance) - set(allowed)) if isinstance(err.instance, dict) else []
        out = []
        for key in extra:
            hint = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
            msg = f"unknown key {key!r}"
            msg += f"; did you mean {hint[0]!r}?" if hint else f"; allowed keys: {', '.join(allowed)}"
            line, col = _position(doc, path + [key], key_of_last=True)
            out.append(Problem(name, line, col, _format_path(path + [key]), msg))
        return out
    if err.validator == "required":
        line, col = _position(doc, path)
        return [Problem(name, line, col, _format_path(path), err.message.replace("'", "", 0) + _choices(err))]
    if err.validator == "enum":
        allowed = err.validator_value
        hint = difflib.get_close_matches(str(err.instance), [str(a) for a in allowed], n=1, cutoff=0.5)
        msg = f"{err.instance!r} is not one of {', '.join(map(str, allowed))}"
        if hint:
            msg += f"; did you mean {hint[0]!r}?"
        line, col = _position(doc, path)
        return [Problem(name, line, col, _format_path(path), msg)]
    if err.validator in ("pattern", "type") and _is_duration(err.schema):
        msg = f"{err.instance!r} is not a Prometheus duration (use e.g. 30s, 5m, 1h)"
        if isinstance(err.instance, (int, float)) and not isinstance(err.instance, bool):
            # YAML reads `30` as a number: the unit is what is missing, not the quotes
            msg = f"{err.instance!r} is a number, not a Prometheus duration: give a unit (use e.g. 30s, 5m, 1h)"
    elif err.validator == "pattern" and err.validator_value in _PATTERN_WORDS:
        msg = f"{err.instance!r} must be {_PATTERN_WORDS[err.validator_value]} (pattern {err.validator_value})"
    else:
        msg = err.message
    line, col = _position(doc, path)
    return [Problem(name, line, col, _format_path(path), msg)]


#: the schema's most common name patterns, in words (a bare regex is what a reader has to decode)
_PATTERN_WORDS = {
    "^[a-z][a-z0-9-]*$": "lower-case letters, digits and '-', starting with a letter (e.g. acme-gpu)",
    "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$": "a Kubernetes name: lower-case letters, digits and '-', starting and "
                                       "ending with a letter or digit",
    "^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$": "a Kubernetes name: lower-case letters, digits, '-' and '.', starting "
                                        "and ending with a letter or digit",
    "^[a-zA-Z_][a-zA-Z0-9_]*$": "a Prometheus label name: letters, digits and '_', not starting with a digit",
    "^[a-zA-Z_:][a-zA-Z0-9_:]*$": "a Prometheus metric name: letters, digits, '_' and ':', not starting with a digit",
    "^[A-Z][A-Za-z0-9]*$": "an alert name: letters and digits, starting with a capital (e.g. GpuTemperatureHigh)",
}


def _choices(err: jsonschema.ValidationError) -> str:
    """``; add it: one of gauge, counter`` for a missing key whose values are a fixed list (a
    metric's kind, unit, presence), so the message says what to write; "" otherwise."""
    instance = err.instance if isinstance(err.instance, dict) else {}
    missing = [k for k in err.validator_value if k not in instance]
    props = err.schema.get("properties", {}) if isinstance(err.schema, dict) else {}
    enum = props.get(missing[0], {}).get("enum") if len(missing) == 1 else None
    return f"; add it: one of {', '.join(map(str, enum))}" if enum else ""


def _is_duration(sub: dict) -> bool:
    """Whether ``sub`` (the schema an error was found under) is a duration's: a string whose
    pattern takes ``30s`` and ``5m`` but not a bare ``30`` (the duration definition every
    Prometheus duration field refers to, and Grafana's ``refresh``)."""
    pattern = sub.get("pattern") if isinstance(sub, dict) and sub.get("type") == "string" else None
    if not isinstance(pattern, str):
        return False
    return all(re.search(pattern, text) for text in ("30s", "5m")) and not re.search(pattern, "30")


def _dedupe(problems: list[Problem]) -> list[Problem]:
    seen, out = set(), []
    for p in problems:
        if (p.line, p.column, p.path, p.message) not in seen:
            seen.add((p.line, p.column, p.path, p.message))
            out.append(p)
    return out
