"""The schema sees the YAML's real types: a ``!!binary`` value, a timestamp, a date or a set is a
positioned spec error, never turned into text the file does not hold (``b'dcgm'``, an ISO date)."""

from __future__ import annotations

import pytest

from gpumon.spec import SpecError, parse_spec

from .small_spec import BASE


@pytest.mark.parametrize("value, kind", [
    ("!!binary ZGNnbQ==", "binary value"),
    ("2024-01-01t10:00:00Z", "timestamp"),
    ("2024-01-01", "date"),
    ("!!set {a, b}", "set"),
])
def test_a_non_text_yaml_value_is_a_type_error_with_its_position(value, kind):
    with pytest.raises(SpecError) as err:
        parse_spec(BASE.replace("job: dcgm-exporter", f"job: {value}"), "s.yaml")
    text = "\n".join(map(str, err.value.problems))
    assert text.startswith("s.yaml:3:8: exporter.job: a YAML " + kind), text
    assert "quote it" in text


def test_a_date_as_a_mapping_key_is_a_type_error():
    spec = BASE.replace("job: dcgm-exporter", "job: dcgm-exporter\n  labels: {2024-01-01: x}")
    with pytest.raises(SpecError) as err:
        parse_spec(spec, "s.yaml")
    assert "s.yaml:4:11: exporter.labels: a YAML date" in str(err.value.problems[0])


def test_quoted_it_is_text():
    spec = parse_spec(BASE.replace("job: dcgm-exporter", "job: '2024-01-01t10:00:00Z'"), "s.yaml")
    assert spec.exporter.job == "2024-01-01t10:00:00Z"
