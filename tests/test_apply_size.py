"""Every rendered Kubernetes object fits client-side ``kubectl apply``: its last-applied annotation
(the object as compact JSON) stays under 90 % of the API server's 262,144-byte annotation limit, for
the bundled spec, every example and a spec with every field dcgm-exporter's CSVs list; lint fails an
object over the configured size."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from ruamel.yaml import YAML

from gpumon import fields, render
from gpumon.applysize import ANNOTATION_LIMIT, BUDGET, LAST_APPLIED, applied_size
from gpumon.cli import cli
from gpumon.rules import build_groups
from gpumon.rules.output import group_dict
from gpumon.spec import parse_spec

ROOT = Path(__file__).resolve().parent.parent


_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _objects(files: dict[str, str]) -> list[tuple[str, dict]]:
    return [(path, doc) for path, text in files.items() if path.startswith("kubernetes/")
            for doc in yaml.load_all(text, Loader=_Loader) if doc]


def _too_big(objects: list[tuple[str, dict]]) -> list[str]:
    return [f"{path} {doc['metadata']['name']}: {applied_size(doc)} bytes"
            for path, doc in objects if applied_size(doc) > BUDGET]


def many_fields_spec_text() -> str:
    """The bundled spec plus every gauge and counter field of dcgm-exporter's CSVs it lacks
    (optional, with a range on gauges, so each gets its value alerts)."""
    yml = YAML()
    doc = yml.load((ROOT / "gpumon.yaml").read_text("utf-8"))
    have = {m["name"] for m in doc["metrics"]}
    for f in fields.known_fields().values():
        if f.name in have or f.kind not in ("gauge", "counter"):
            continue
        extra = {"range": [0, 1000000]} if f.kind == "gauge" else {}
        doc["metrics"].append({"name": f.name, "kind": f.kind, "unit": "count", "presence": "optional", **extra})
    out = io.StringIO()
    yml.dump(doc, out)
    return out.getvalue()


@pytest.fixture(scope="module")
def many_fields():
    spec = parse_spec(many_fields_spec_text(), "many-fields.yaml")
    files = render.render(spec)
    return spec, files, _objects(files)


def test_the_size_is_kubectls_annotation():
    """Go's JSON encoder (kubectl's) writes ``>`` as ``\\u003e``: a PromQL comparison costs 6 bytes."""
    obj = {"a": "x > 1"}
    assert applied_size(obj) == len(LAST_APPLIED) + len('{"a":"x \\u003e 1"}')
    assert applied_size({"a": "°"}) == len(LAST_APPLIED) + len('{"a":""}') + 2      # UTF-8 bytes
    assert BUDGET == int(ANNOTATION_LIMIT * 0.9)


@pytest.mark.parametrize("folder", ["output", "tests/golden/kubernetes", "tests/golden/mixed-fleet",
                                    "tests/golden/textfile-sidecar"])
def test_committed_objects_fit(folder):
    """The committed renders of the bundled spec and of every example."""
    files = {p.relative_to(ROOT / folder).as_posix(): p.read_text("utf-8")
             for p in sorted((ROOT / folder / "kubernetes").glob("*.yaml"))}
    assert files
    assert _too_big(_objects(files)) == []


def test_every_example_is_committed():
    examples = {p.stem for p in (ROOT / "examples").glob("*.yaml")}
    assert examples == {p.name for p in (ROOT / "tests/golden").iterdir() if p.is_dir()}


def test_a_spec_with_every_field_renders_objects_that_fit(many_fields):
    spec, files, objects = many_fields
    assert len(spec.metrics) > 50
    assert _too_big(objects) == []
    # the value rules alone would not fit one object: they are split into groups, in spec order
    names = [g.name for g in build_groups(spec)]
    assert "gpumon.values" in names and "gpumon.values-2" in names
    rules = [doc for path, doc in objects if doc["kind"] == "PrometheusRule"]
    assert [len(o["spec"]["groups"]) for o in rules] == [1] * len(names)
    plain = yaml.load(files["rules/gpumon.rules.yaml"], Loader=_Loader)["groups"]
    assert [o["spec"]["groups"][0] for o in rules] == plain, "the objects carry the plain file's groups"
    # a big dashboard goes into its ConfigMap as compact JSON, the same dashboard as the JSON file
    fleet = next(d for p, d in objects if d["metadata"]["name"] == "grafana-dashboard-gpumon-fleet")
    embedded = fleet["data"]["gpumon-fleet.json"]
    assert json.loads(embedded) == json.loads(files["dashboards/gpumon-fleet.json"])


def test_value_groups_keep_each_metrics_recordings_before_its_alerts(many_fields):
    """An alert reads only series recorded in its own group (evaluated first in the same round)."""
    spec = many_fields[0]
    groups = [g for g in build_groups(spec) if ".values" in g.name]
    every = {r.record for g in groups for r in g.rules if r.record}
    for group in groups:
        assert applied_size(group_dict(group)) < BUDGET
        own = {r.record for r in group.rules if r.record}
        for rule in (r for r in group.rules if r.alert and r.alert != "GpuProfilingStuck"):
            read = {n for n in every if re.search(rf"(?<![\w:]){re.escape(n)}(?![\w:])", rule.expr)}
            assert read <= own, f"{rule.alert} in {group.name} reads {sorted(read - own)} from another group"


def test_small_specs_keep_indented_dashboards():
    text = (ROOT / "output/kubernetes/grafana-dashboard-gpumon-fleet.yaml").read_text("utf-8")
    assert "gpumon-fleet.json: |\n    {\n" in text


def test_lint_fails_an_object_over_the_configured_size(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    golden = ROOT / "tests/golden/textfile-sidecar/kubernetes/gpumon-prometheusrule.yaml"
    (out / "rule.yaml").write_text(golden.read_text("utf-8"))
    args = ["lint", "--spec", str(ROOT / "examples/textfile-sidecar.yaml"), str(out)]
    assert CliRunner().invoke(cli, args).exit_code == 0
    result = CliRunner().invoke(cli, args[:-1] + ["--max-object-bytes", "20000", str(out)])
    assert result.exit_code == 1, result.output
    found = [line for line in result.output.splitlines() if "object-too-large-to-apply" in line]
    assert any("PrometheusRule monitoring/gpumon-values" in line for line in found), result.output
    assert all("gpumon-exporter" not in line for line in found), "a small object passes"
