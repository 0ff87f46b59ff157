"""Every rendered Kubernetes object fits client-side ``kubectl apply``: its last-applied annotation
(the object as compact JSON) stays under 90 % of the API server's 262,144-byte annotation limit, for
the bundled spec, every example and a spec with every numeric field of gpumon's DCGM field catalogue
(rule groups and dashboards over the budget are split into parts); lint fails an object over the
configured size."""

from __future__ import annotations

import io
import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from ruamel.yaml import YAML

from gpumon import fields, render
from gpumon.applysize import ANNOTATION_LIMIT, BUDGET, LAST_APPLIED, applied_size
from gpumon.cli import cli
from gpumon.dashboards import split as dashboard_split
from gpumon.rules import GROUP_BUDGET, build_groups, fresh, names, split
from gpumon.rules.common import record
from gpumon.rules.model import Rule, RuleGroup, group_dict
from gpumon.spec import parse_spec

from .engines import prometheus_engines

ROOT = Path(__file__).resolve().parent.parent


_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _objects(files: dict[str, str]) -> list[tuple[str, dict]]:
    return [(path, doc) for path, text in files.items() if path.startswith("kubernetes/")
            for doc in yaml.load_all(text, Loader=_Loader) if doc]


def _too_big(objects: list[tuple[str, dict]]) -> list[str]:
    return [f"{path} {doc['metadata']['name']}: {applied_size(doc)} bytes"
            for path, doc in objects if applied_size(doc) > BUDGET]


def every_field_spec_text() -> str:
    """The bundled spec plus every numeric field of gpumon's DCGM field catalogue it lacks: the
    gauges and counters dcgm-exporter lists, and DCGM's int64 and double fields (as gauges); all
    optional, with a range on gauges, so each gets its value alerts."""
    yml = YAML()
    doc = yml.load((ROOT / "gpumon.yaml").read_text("utf-8"))
    have = {m["name"] for m in doc["metrics"]}
    for f in fields.catalogue().values():
        kind = f.kind if f.kind in ("gauge", "counter") else "gauge" if f.type in ("int64", "double") else None
        if f.name in have or kind is None:
            continue
        extra = {"range": [0, 1000000]} if kind == "gauge" else {}
        doc["metrics"].append({"name": f.name, "kind": kind, "unit": "count", "presence": "optional", **extra})
    out = io.StringIO()
    yml.dump(doc, out)
    return out.getvalue()


@pytest.fixture(scope="module")
def every_field():
    spec = parse_spec(every_field_spec_text(), "every-field.yaml")
    groups = build_groups(spec)
    files = render.render(spec, groups)
    return spec, groups, files, _objects(files)


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


def test_a_spec_with_every_catalogued_field_renders_objects_that_fit(every_field):
    spec, groups, files, objects = every_field
    assert len(spec.metrics) > 900
    assert _too_big(objects) == []
    # groups over the budget are split into parts named <group>, <group>-2, ... in order
    names_ = [g.name for g in groups]
    # (the inventory reads the required fields only: it fits whole)
    assert "gpumon.inventory" in names_ and "gpumon.inventory-2" not in names_
    for base in ("gpumon.coverage", "gpumon.plausibility"):
        assert base in names_ and f"{base}-2" in names_
        parts = [n for n in names_ if n == base or n.startswith(f"{base}-")]
        assert parts == [split.part_name(base, k) for k in range(len(parts))]
        assert len({g.interval for g in groups if g.name in parts}) == 1
    # the PrometheusRule objects carry the plain file's groups, one each
    rules = [doc for path, doc in objects if doc["kind"] == "PrometheusRule"]
    assert [len(o["spec"]["groups"]) for o in rules] == [1] * len(names_)
    plain = yaml.load(files["rules/gpumon.rules.yaml"], Loader=_Loader)["groups"]
    assert [o["spec"]["groups"][0] for o in rules] == plain, "the objects carry the plain file's groups"
    assert [g["name"] for g in plain] == names_
    assert all(applied_size(group_dict(g)) <= GROUP_BUDGET for g in groups)


def test_every_dashboard_part_has_its_configmap(every_field):
    """A dashboard over the budget becomes parts "(k of N)": part 1 keeps the uid and file name,
    part k has ``<uid>-k``; each part's ConfigMap carries the part's JSON file."""
    _, _, files, objects = every_field
    for key in ("fleet", "gpu"):
        first = json.loads(files[f"dashboards/gpumon-{key}.json"])
        n = int(re.search(r"\(1 of (\d+)\)$", first["title"]).group(1))
        assert n >= 2 and first["uid"] == f"gpumon-{key}"
        for k in range(1, n + 1):
            name = f"gpumon-{key}" + (f"-{k}" if k > 1 else "")
            part = json.loads(files[f"dashboards/{name}.json"])
            assert part["title"].endswith(f"({k} of {n})")
            assert part["uid"] == name and part["templating"] == first["templating"]
            cm = next(d for p, d in objects if d["metadata"]["name"] == f"grafana-dashboard-{name}")
            assert json.loads(cm["data"][f"{name}.json"]) == part
        assert f"dashboards/gpumon-{key}-{n + 1}.json" not in files
    # the health dashboard fits: one file, its title as before
    assert "(1 of" not in json.loads(files["dashboards/gpumon-health.json"])["title"]


def test_dashboard_parts_keep_every_panel_once(every_field):
    _, _, files, _ = every_field
    parts = [json.loads(t) for p, t in files.items() if re.fullmatch(r"dashboards/gpumon-gpu(-\d+)?\.json", p)]
    parts.sort(key=lambda d: int(re.search(r"\((\d+) of", d["title"]).group(1)))
    # every panel once (a continued row repeats its row: panel ids are unique per dashboard)
    ids = [q["id"] for d in parts for p in d["panels"] for q in [p] + p.get("panels", [])
           if not q["title"].endswith(" (continued)")]
    assert len(ids) == len(set(ids)) > 900
    # later parts continue the collapsed "Optional fields" row, from the top of the grid
    for later in parts[1:]:
        assert [p["title"] for p in later["panels"]] == ["Optional fields (continued)"]
        assert later["panels"][0]["gridPos"]["y"] == 0 and later["panels"][0]["collapsed"]


def test_split_keeps_one_fields_rules_together_and_reads_shared_records_late(every_field):
    """What a field's rules read of each other stays in one part (evaluated in order in the same
    round); what an earlier part records (the per-node counts the coverage ratios divide by, the
    sets the per-node coverage scans) is read as of that part's last evaluation."""
    _, groups, _, _ = every_field
    late = split.late_reads(groups)
    assert late, "the coverage parts read the counts of the first part"
    assert {rec for _, _, rec in late} <= {names.NODE_INVENTORY, names.NODE_INVENTORY_NON_MIG, names.FIELD_MISSING,
                                          names.NODE_FIELD_ABSENT}
    assert {rule for _, rule, _ in late} <= {names.COVERAGE, names.NODE_COVERAGE}
    shared = {(rule, rec) for _, rule, rec in late}
    family = lambda name: re.sub(r"-\d+$", "", name)  # noqa: E731
    for group in groups:
        if group.name.split(".")[1].split("-")[0] not in ("plausibility", "coverage"):
            continue
        # (record, field) pairs the other parts of this group's family write
        others = {(r.record, r.label_map.get(names.FIELD_LABEL)) for g in groups
                  if g.name != group.name and family(g.name) == family(group.name) for r in g.rules if r.record}
        for rule in group.rules:
            field = rule.label_map.get(names.FIELD_LABEL)
            for rec, f in others:
                if field and f == field and f'{rec}{{job="dcgm-exporter",{names.FIELD_LABEL}="{field}"}}' in rule.expr:
                    assert (rule.name, rec) in shared, f"{rule.name} of {field} in {group.name} reads {rec} of another part"


def test_plausibility_groups_keep_each_metrics_recordings_before_their_alerts(every_field):
    """An alert reads only series recorded in its own group (evaluated first in the same round)."""
    groups = [g for g in every_field[1] if ".plausibility" in g.name]
    every = {r.record for g in groups for r in g.rules if r.record}
    for group in groups:
        own = {r.record for r in group.rules if r.record}
        for rule in (r for r in group.rules if r.alert and r.alert != "GpuProfilingStuck"):
            read = {n for n in every if re.search(rf"(?<![\w:]){re.escape(n)}(?![\w:])", rule.expr)}
            assert read <= own, f"{rule.alert} in {group.name} reads {sorted(read - own)} from another group"


def test_a_split_group_has_a_heartbeat_per_part_and_readers_wait_for_every_part(every_field):
    spec, groups, _, _ = every_field
    parts = [g for g in groups if g.name.startswith("gpumon.coverage")]
    assert len(parts) >= 2
    for g in parts:
        assert g.rules[-1] == fresh.heartbeat(g.name)
        assert sum(r.record == names.EVALUATED for r in g.rules) == 1
    # the coverage group's sets are read fresh by GpuIdentityLabelMissing (the unlabelled series) and
    # by GpuMetricAbsent (quiet while the field's series are there without a node label)
    readers = [r for g in groups for r in g.rules if names.EVALUATED in r.expr and "gpumon\\\\.coverage" in r.expr]
    beats = "|".join(g.name.replace(".", "\\\\.") for g in parts)
    assert {r.alert for r in readers} == {"GpuIdentityLabelMissing", "GpuMetricAbsent"}
    inventory = f'max(timestamp({names.EVALUATED}{{{names.GROUP_LABEL}="{fresh.inventory_group(spec)}"}}))'
    # every guard on a coverage set waits for all its parts; a max() is only ever the whole inventory's
    assert all(f'min(timestamp({names.EVALUATED}{{{names.GROUP_LABEL}=~"{beats}"}}))' in r.expr
               and r.expr.count("max(timestamp(") == r.expr.count(inventory) for r in readers)
    # the inventory fits whole: its readers keep the one heartbeat
    whole = [r for g in groups for r in g.rules if f'{names.GROUP_LABEL}="{fresh.inventory_group(spec)}"' in r.expr]
    assert whole and all("max(timestamp(" in r.expr for r in whole)


#: the every-field spec's generated promtool scenarios that run here, by topic and name prefix: the
#: coverage across the split coverage parts, the freshness guard over the coverage parts'
#: heartbeats, and the per-node and fleet-wide implausible-reading rules of every value part (every
#: field's share one scenario per tier; the per-GPU tier's scenario lasts the longest threshold
#: ``for``, 26 evaluations of all the rules), with the profiling pair. Each engine's promtool checks all the
#: rules and runs the topics whose turn it is (topic k on engine k mod engines: about a minute of
#: CPU each; the split itself is the same text for both, the engines' differences are the other
#: tests' subject). The whole generated suite does not fit a test run: each of its evaluation steps
#: runs all 9,000 rules (with one test group per field, 73 value scenarios took 10 minutes with
#: promtool 2.42 on one core of a shared 2-core machine).
PROMTOOL_SAMPLE = {
    "inventory": ("inventory: GPU counts and field coverage", "coverage of optional"),
    "presence": ("identity label missing",),
    "values": ("every spec'd field: a DCGM blank", "DCGM_FI_DEV_GPU_UTIL 95 with DCGM_FI_PROF_GR_ENGINE_ACTIVE 0:"),
}


def test_promtool_accepts_the_every_field_rules_and_a_sample_of_their_tests(every_field, engine, tmp_path):
    _, _, files, _ = every_field
    promtool = engine.promtool
    engines = prometheus_engines()
    turns = [t for k, t in enumerate(PROMTOOL_SAMPLE) if engines[k % len(engines)] == engine]
    rules = tmp_path / "rules" / "gpumon.rules.yaml"
    rules.parent.mkdir()
    rules.write_text(files["rules/gpumon.rules.yaml"], "utf-8")
    checked = subprocess.run([promtool, "check", "rules", str(rules)], capture_output=True, text=True, timeout=300)
    assert checked.returncode == 0, checked.stderr[-3000:]
    (tmp_path / "tests").mkdir()
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    for topic in turns:
        prefixes = PROMTOOL_SAMPLE[topic]
        doc = yaml.load(files[f"tests/gpumon.{topic}.test.yaml"], Loader=_Loader)
        doc["tests"] = [t for t in doc["tests"] if t["name"].startswith(prefixes)]
        assert len(doc["tests"]) >= len(prefixes), f"{topic}: a sampled scenario is gone"
        path = tmp_path / "tests" / f"{topic}.test.yaml"
        path.write_text(yaml.dump(doc, Dumper=dumper), "utf-8")
        run = subprocess.run([promtool, "test", "rules", path.name], cwd=path.parent, capture_output=True,
                             text=True, timeout=900)
        assert run.returncode == 0, f"{topic}:\n{run.stdout[-4000:]}\n{run.stderr[-2000:]}"


def _rule(name: str, expr: str, field: str | None = None, alert: bool = False) -> Rule:
    labels = ((names.FIELD_LABEL, field),) if field else ()
    return Rule(expr, alert=name if alert else None, record=None if alert else name, labels=labels)


def test_split_group_by_size():
    """A synthetic group: a shared record first, then per field a record and a second record
    reading it, then per field an alert reading both (the shape of the value rules), and last a
    rule reading every field's set."""
    rules = [_rule("job:shared:count", "count(up)")]
    for i in range(40):
        f = f"F{i:02d}"
        rules += [_rule("job_gpu:set:max", f"max by (gpu) ({f} > 1)", f),
                  _rule("job_gpu:other:max", f'job_gpu:set:max{{dcgm_field="{f}"}} / on () job:shared:count', f)]
    for i in range(40):
        f = f"F{i:02d}"
        rules.append(_rule("Alert", f'job_gpu:other:max{{dcgm_field="{f}"}} and job_gpu:set:max{{dcgm_field="{f}"}}',
                           f, alert=True))
    rules.append(_rule("job:every:count", "count(job_gpu:set:max)"))
    group = RuleGroup("x.values", tuple(rules), 60.0)
    budget = applied_size(group_dict(group)) // 3
    parts = split.split_group(group, budget)
    assert parts == split.split_group(group, budget), "deterministic"
    assert [p.name for p in parts] == ["x.values"] + [f"x.values-{k}" for k in range(2, len(parts) + 1)]
    assert len(parts) >= 3 and all(applied_size(group_dict(p)) <= budget and p.interval == 60.0 for p in parts)
    assert sorted(map(id, (r for p in parts for r in p.rules))) == sorted(map(id, rules))
    for p in parts:         # each field's three rules in one part, in their order
        for f in {r.label_map.get(names.FIELD_LABEL) for r in p.rules} - {None}:
            assert [r.name for r in p.rules if r.label_map.get(names.FIELD_LABEL) == f] == \
                ["job_gpu:set:max", "job_gpu:other:max", "Alert"]
    assert parts[0].rules[0].record == "job:shared:count" and parts[-1].rules[-1].record == "job:every:count"
    assert {(rule, rec) for _, rule, rec in split.late_reads(parts)} == {("job_gpu:other:max", "job:shared:count"),
                                                                         ("job:every:count", "job_gpu:set:max")}
    # a group that fits is left as it is
    assert split.split_group(group, applied_size(group_dict(group))) == [group]


def test_split_gives_each_part_a_heartbeat_and_retargets_its_readers():
    sets = tuple(record("job_gpu:missing:group", f"absent(F{i} > {'9' * 200})", {names.FIELD_LABEL: f"F{i}"})
                 for i in range(30))
    group = RuleGroup("x.inventory", sets + (fresh.heartbeat("x.inventory"),))
    reader = RuleGroup("x.presence", (Rule(fresh.fresh("job_gpu:missing:group", "x.inventory"), alert="Missing"),))
    out = split.split_groups([group, reader], applied_size(group_dict(group)) // 2 + 1000)
    assert [g.name for g in out] == ["x.inventory", "x.inventory-2", "x.presence"]
    assert [g.rules[-1] for g in out[:2]] == [fresh.heartbeat("x.inventory"), fresh.heartbeat("x.inventory-2")]
    assert (f'min(timestamp({names.EVALUATED}{{{names.GROUP_LABEL}=~"x\\\\.inventory|x\\\\.inventory-2"}}))'
            in out[2].rules[0].expr)
    # nothing split: nothing rewritten
    assert split.split_groups([group, reader], 10 * applied_size(group_dict(group))) == [group, reader]


def test_dashboard_split_by_size():
    panels = [{"type": "stat", "id": 1, "title": "head", "gridPos": {"h": 4, "w": 24, "x": 0, "y": 0}},
              {"type": "row", "id": 2, "title": "Optional", "collapsed": True,
               "gridPos": {"h": 1, "w": 24, "x": 0, "y": 4},
               "panels": [{"type": "timeseries", "id": 10 + i, "title": f"p{i}", "description": "x" * 900,
                           "gridPos": {"h": 8, "w": 12, "x": 12 * (i % 2), "y": 5 + 8 * (i // 2)}} for i in range(60)]}]
    board = {"title": "Board", "uid": "b", "templating": {"list": []}, "panels": panels}

    def size(d: dict) -> int:
        return applied_size({"data": json.dumps(d, separators=(",", ":"))})

    budget = size(board) // 3
    parts = dashboard_split.split(board, lambda k: f"b-{k}", size, budget=budget)
    assert parts == dashboard_split.split(board, lambda k: f"b-{k}", size, budget=budget)
    n = len(parts)
    assert n >= 3 and all(size(p) <= budget for p in parts)
    assert [p["title"] for p in parts] == [f"Board ({k} of {n})" for k in range(1, n + 1)]
    assert [p["uid"] for p in parts] == ["b"] + [f"b-{k}" for k in range(2, n + 1)]
    assert parts[0]["panels"][0]["id"] == 1
    inner = [q["id"] for p in parts for r in p["panels"] if r["type"] == "row" for q in r["panels"]]
    assert inner == list(range(10, 70))
    assert parts[1]["panels"][0]["title"] == "Optional (continued)" and parts[1]["panels"][0]["collapsed"]
    assert min(q["gridPos"]["y"] for q in parts[1]["panels"][0]["panels"]) == 1
    assert dashboard_split.split(board, lambda k: f"b-{k}", size, budget=size(board)) == [board]


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
    assert any("PrometheusRule monitoring/gpumon-plausibility" in line for line in found), result.output
    assert all("gpumon-exporter" not in line for line in found), "a small object passes"
