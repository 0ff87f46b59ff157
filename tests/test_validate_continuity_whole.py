"""The continuity check folds a GPU that missed *every* required field in the same scrapes into one
finding: the GPU stopped reporting for a while (a reset, off the bus and back, its node label
respelled by an exporter rollout and back), one outage, not one field's DCGM blanks per field."""

from __future__ import annotations

from types import SimpleNamespace

from gpumon.spec import parse_spec
from gpumon.validate import continuity
from gpumon.validate.gpus import Gpu

from .small_spec import BASE


def _flagged(rows_per_field: dict[str, list[tuple[float, Gpu]]]):
    return [(SimpleNamespace(name=name), f"continuity/{name}", None,
             {frozenset({"UUID": g.uuid, "i": name}.items()): (r, g, "10.0.0.1:9400", None) for r, g in rows})
            for name, rows in rows_per_field.items()]


A, B = Gpu("dcgm-exporter", "gpu-node-1", "GPU-a", "0"), Gpu("dcgm-exporter", "gpu-node-1", "GPU-b", "1")


def test_a_gpu_below_the_threshold_on_every_required_field_is_one_outage():
    whole = continuity._whole_gpu(_flagged({"TEMP": [(0.4, A), (0.5, B)], "POWER": [(0.38, A)], "UTIL": [(0.45, A)]}))
    assert set(whole) == {A.key} and whole[A.key][0] == 0.38          # B misses one field only: its gaps
    spec = parse_spec(BASE)
    ctx = SimpleNamespace(job="dcgm-exporter", lookback=300.0, spec=spec, labels=spec.exporter.labels)
    f = continuity._whole_finding(ctx, whole)
    assert (f.check, f.severity, f.subject) == ("series-intermittent", "error", "every required field")
    assert "on 1 GPU(s)" in f.message and "gpu-node-1 gpu 0 (GPU-a) 38%" in f.message
    assert "not a field's blanks" in f.hint and ("UUID", "GPU-a") in f.labels


def test_one_required_field_or_gaps_on_some_fields_are_not_folded():
    assert continuity._whole_gpu(_flagged({"TEMP": [(0.4, A)]})) == {}
    assert continuity._whole_gpu(_flagged({"TEMP": [(0.4, A)], "POWER": [(0.4, B)]})) == {}
    assert continuity._whole_gpu(_flagged({"TEMP": [(0.4, A)], "POWER": []})) == {}
