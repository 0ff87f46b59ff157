"""Every string the spec schema accepts is bounded: a pattern (or enum/const/format) and a
maxLength, or it is listed below as free text, with where it is escaped on its way into PromQL,
YAML, a template or a Kubernetes object. A new string field without a rule fails this test."""

from __future__ import annotations

import pytest

from gpumon.spec import schema

from .conftest import ROOT

#: JSON pointer of a free-text string schema -> where the value is made safe where it is used.
#: Every string also passes specbounds.walk (no control characters, no ``{{``/``}}``).
FREE_TEXT = {
    "/properties/$schema": "read by editors only; never rendered",
    "/definitions/labelMap/additionalProperties": "alert label values: written by the YAML dumper",
    "/definitions/threshold/properties/summary": "annotation text: written by the YAML dumper",
    "/definitions/metric/properties/description": "annotation and panel text: YAML/JSON dumpers",
    "/definitions/metric/properties/title": "alert texts and panel titles: YAML/JSON dumpers",
    "/definitions/source/properties/job": "PromQL: promqltext.quote / literal_replacement",
    "/properties/exporter/properties/job": "PromQL: promqltext.quote / literal_replacement",
    "/properties/exporter/properties/driver_version": "PromQL: promqltext.quote",
    "/properties/alerts/properties/runbook_url": "annotation: YAML dumper; relative bases refused",
    "/properties/dashboards/properties/title_prefix": "dashboard JSON: the JSON dumper",
    "/properties/dashboards/properties/tags/items": "dashboard JSON: the JSON dumper",
    "/properties/dashboards/properties/datasource_uid": "compared by lint only; never rendered",
    "/properties/dashboards/properties/configmap/properties/folder": "ConfigMap annotation: YAML dumper",
    "/properties/kubernetes/properties/kube_state_metrics/properties/job": "PromQL: promqltext.quote",
    "/properties/kubernetes/properties/exporter/properties/pod_regex": "RE2-checked (re2check), then quoted",
    "/properties/kubernetes/properties/node_join/properties/regex": "RE2-checked (re2check), then quoted",
    "/properties/kubernetes/properties/node_join/properties/replacement": "PromQL: promqltext.quote",
    "/properties/kubernetes/properties/static/properties/patterns/items/properties/match":
        "RE2-checked (re2check), then quoted",
    "/properties/kubernetes/properties/static/properties/nodes/items/properties/name": "PromQL: quote",
    "/properties/kubernetes/properties/static/properties/nodes/items/properties/cluster": "PromQL: quote",
}
RULES = ("pattern", "enum", "const", "format")


def _is_string(node: dict, implicit: bool) -> bool:
    kind = node.get("type")
    return implicit or kind == "string" or (isinstance(kind, list) and "string" in kind)


def uncovered(node, free_text=frozenset(), path: str = "", implicit: bool = False) -> list[str]:
    """JSON pointers of string schemas under ``node`` with no rule (pattern/enum/const/format)
    or no maxLength, unless listed in ``free_text`` (which still need maxLength)."""
    out: list[str] = []
    if isinstance(node, dict):
        if _is_string(node, implicit) and "$ref" not in node:
            bounded = "enum" in node or "const" in node or "maxLength" in node
            ruled = any(k in node for k in RULES) or path in free_text
            if not (bounded and ruled):
                out.append(path)
        for key, value in node.items():
            if key in ("enum", "const", "description", "examples", "default", "required"):
                continue
            # property names are strings too, whatever their schema says about type
            out += uncovered(value, free_text, f"{path}/{key}", implicit=key == "propertyNames")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += uncovered(value, free_text, f"{path}/{i}")
    return out


def test_every_spec_string_is_bounded():
    assert uncovered(schema(), frozenset(FREE_TEXT)) == []


def test_the_free_text_list_names_only_existing_fields():
    """A renamed field must not leave its allowance behind."""
    root = schema()
    for pointer in FREE_TEXT:
        node = root
        for step in pointer.strip("/").split("/"):
            node = node[step]
        assert _is_string(node, False) and "maxLength" in node, pointer


@pytest.mark.parametrize("field", [
    {"type": "string"},                                  # no rule at all
    {"type": "string", "pattern": "^[a-z]+$"},           # unbounded length
    {"type": ["string", "null"], "maxLength": 8},       # bounded, but anything goes
])
def test_a_new_string_field_without_a_rule_fails(field):
    root = schema()
    root["properties"]["exporter"]["properties"]["new_field"] = field
    assert uncovered(root, frozenset(FREE_TEXT)) == ["/properties/exporter/properties/new_field"]


def test_a_number_where_a_duration_is_expected_says_give_a_unit():
    """Every duration field of the bundled spec, written as a bare number (YAML reads `30` as an
    int): one problem each at its line, saying a unit is missing, never "is not of type 'string'"."""
    import re

    from gpumon.spec import SpecError, parse_spec

    text = (ROOT / "gpumon.yaml").read_text()
    fields = re.findall(r"^ *(\w+): (\d+)(?:ms|[smhdwy])\b", text, re.M)
    assert {"scrape_interval", "for", "gap_window", "refresh", "window"} <= {f for f, _ in fields}, fields
    numbers = re.sub(r"^( *\w+: \d+)(?:ms|[smhdwy])\b", r"\1", text, flags=re.M)
    with pytest.raises(SpecError) as exc:
        parse_spec(numbers, "numbers.yaml")
    messages = [p.message for p in exc.value.problems]
    assert len(messages) == len(fields), messages
    for message in messages:
        assert "is a number, not a Prometheus duration: give a unit (use e.g. 30s" in message, message
