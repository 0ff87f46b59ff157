"""The smallest valid spec, which the spec tests extend: one exporter job and one required GPU
temperature field. The text ends inside that metric, so a test appends keys of the metric
(``    sources: [...]``), further metrics (``  - name: ...``) or top-level sections."""

from __future__ import annotations

import textwrap

import pytest

from gpumon.spec import SpecError, load_spec

BASE = """\
version: 1
exporter:
  job: dcgm-exporter
metrics:
  - name: DCGM_FI_DEV_GPU_TEMP
    kind: gauge
    unit: celsius
    presence: required
"""


def load(tmp_path, text: str):
    """``text`` (dedented) loaded from ``tmp_path/spec.yaml``."""
    path = tmp_path / "spec.yaml"
    path.write_text(textwrap.dedent(text))
    return load_spec(path)


def errors_of(tmp_path, text: str) -> list[str]:
    """The problems loading ``text`` reports (it must fail), each naming the file ``spec.yaml``."""
    with pytest.raises(SpecError) as info:
        load(tmp_path, text)
    return [str(p).replace(str(tmp_path / "spec.yaml"), "spec.yaml") for p in info.value.problems]
