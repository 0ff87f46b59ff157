"""`gpumon render`: golden output, drift check, determinism, safe writes, and rule validity
(real promtool, the PrometheusRule CRD schema, promql-parser)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import jsonschema
import promql_parser
import yaml

from gpumon import writer
from gpumon.render import render
from gpumon.rules import all_rules, build_groups, names as rnames, rules_of
from gpumon.spec import load_spec

from .clirun import gpumon
from .conftest import DATA, ROOT



def test_committed_output_is_what_the_default_spec_renders(default_render):
    drift = writer.diff(dict(default_render), ROOT / "output")
    assert not drift.any, "output/ is stale, run `make render`:\n" + "\n".join(drift.lines())
    proc = gpumon("render", "--check")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_render_is_deterministic_across_processes(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    assert gpumon("render", "gpumon.yaml", "-o", str(a)).returncode == 0
    env_proc = subprocess.run([sys.executable, "-m", "gpumon.cli", "render", str(ROOT / "gpumon.yaml"), "-o", str(b)],
                              capture_output=True, text=True, cwd=tmp_path, env={"PYTHONHASHSEED": "123", "LANG": "C",
                                                                                 "PATH": "/usr/bin:/bin"})
    assert env_proc.returncode == 0, env_proc.stderr
    files_a = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    files_b = sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    assert files_a == files_b and files_a
    for rel in files_a:
        assert (a / rel).read_bytes() == (b / rel).read_bytes(), rel
    text = (a / "rules/gpumon.rules.yaml").read_text()
    assert not re.search(r"20\d\d-\d\d-\d\d|version: \d", text), "no timestamps or tool versions in output"


def test_render_needs_no_working_directory(tmp_path):
    """A working directory removed under the process (a CI step's scratch folder) changes nothing:
    render with absolute paths writes the same files (the rule tests' path to the rules used to
    be computed through the working directory: an internal error)."""
    gone, out = tmp_path / "gone", tmp_path / "out"
    gone.mkdir()
    script = (f"import os, sys; os.chdir({str(gone)!r}); os.rmdir({str(gone)!r}); "
              f"from gpumon.cli import main; sys.argv = ['gpumon', 'render', {str(ROOT / 'gpumon.yaml')!r}, "
              f"'-o', {str(out)!r}]; main()")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    for rel in (p.relative_to(ROOT / "output") for p in (ROOT / "output").rglob("*") if p.is_file()):
        assert (out / rel).read_bytes() == (ROOT / "output" / rel).read_bytes(), rel


def test_check_writes_nothing_and_reports_drift(tmp_path):
    out = tmp_path / "out"
    proc = gpumon("render", "--check", "-o", str(out))
    assert proc.returncode == 1
    assert "+ rules/gpumon.rules.yaml (missing)" in proc.stdout
    assert not out.exists()
    assert gpumon("render", "-o", str(out)).returncode == 0
    (out / "rules/gpumon.rules.yaml").write_text("# edited by hand\n")
    proc = gpumon("render", "--check", "-o", str(out))
    assert proc.returncode == 1 and "~ rules/gpumon.rules.yaml (differs)" in proc.stdout
    assert (out / "rules/gpumon.rules.yaml").read_text() == "# edited by hand\n"
    # the command it suggests is the one that fixes it (no Makefile assumed), quoted for a shell
    spaced = tmp_path / "my out"
    proc = gpumon("render", "gpumon.yaml", "--check", "-o", str(spaced))
    suggested = proc.stderr.split("run `", 1)[1].split("`", 1)[0]
    assert suggested == f"gpumon render gpumon.yaml -o '{spaced}'"
    assert gpumon(*shlex.split(suggested)[1:]).returncode == 0
    assert gpumon("render", "gpumon.yaml", "--check", "-o", str(spaced)).returncode == 0


def test_stale_files_removed_but_foreign_files_kept(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("keep me")
    mark = f"# {writer.GENERATED} from gpumon.yaml.\n"   # gpumon removes only files that carry it
    writer.write({"tests/old.yaml": mark + "x\n", "rules/b.yaml": mark + "y\n"}, out)
    drift = writer.write({"rules/b.yaml": mark + "y2\n"}, out)
    assert drift.removed == ["tests/old.yaml"] and drift.changed == ["rules/b.yaml"]
    assert not (out / "tests").exists(), "empty folders left by removed files are pruned"
    assert (out / "mine.txt").read_text() == "keep me"
    assert sorted(p.name for p in out.iterdir()) == [".gpumon-files", "mine.txt", "rules"]


def test_unwritable_output_is_a_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    proc = gpumon("render", "-o", str(blocker / "out"))
    assert proc.returncode == 2
    assert "cannot write" in proc.stderr and "Traceback" not in proc.stderr


def test_promtool_accepts_plain_rules_and_prometheusrule_spec(tmp_path, promtool):
    plain = ROOT / "output/rules/gpumon.rules.yaml"
    proc = subprocess.run([promtool, "check", "rules", str(plain)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    objects = list(yaml.safe_load_all((ROOT / "output/kubernetes/gpumon-prometheusrule.yaml").read_text()))
    groups = {"groups": [g for crd in objects for g in crd["spec"]["groups"]]}
    spec_file = tmp_path / "spec.yaml"  # promtool rejects the CRD wrapper itself; check the groups
    spec_file.write_text(yaml.safe_dump(groups))
    proc = subprocess.run([promtool, "check", "rules", str(spec_file)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert groups == yaml.safe_load(plain.read_text()), "both outputs carry the same groups"
    assert [len(crd["spec"]["groups"]) for crd in objects] == [1] * len(objects), "one object per group"


def _crd_validator():
    crd = yaml.safe_load((DATA / "monitoring.coreos.com_prometheusrules.yaml").read_text())
    schema = next(v for v in crd["spec"]["versions"] if v["name"] == "v1")["schema"]["openAPIV3Schema"]
    text = yaml.safe_dump(schema).replace("^(?i)(abort|warn)?$", "(?i)^(abort|warn)?$")  # RE2 vs Python re
    return jsonschema.Draft4Validator(yaml.safe_load(text))


def test_prometheusrule_matches_the_crd_schema_and_carries_selector_labels(default_spec):
    docs = list(yaml.safe_load_all((ROOT / "output/kubernetes/gpumon-prometheusrule.yaml").read_text()))
    assert [d["metadata"]["name"] for d in docs] == ["gpumon-inventory", "gpumon-coverage", "gpumon-exporter",
                                                     "gpumon-presence", "gpumon-values", "gpumon-plausibility", "gpumon-gaps"]
    for doc in docs:
        errors = [e.message for e in _crd_validator().iter_errors(doc)]
        assert errors == []
        assert doc["metadata"]["labels"]["release"] == "kube-prometheus-stack"
        assert doc["metadata"]["namespace"] == "monitoring"
    doc = docs[0]
    broken = {**doc, "spec": {"groups": [{"name": "g", "rules": [{"alert": "A", "expr": "up", "for": "5 minutes"}]}]}}
    assert list(_crd_validator().iter_errors(broken)), "the schema check can fail"


def test_every_expression_parses_with_promql_parser(default_spec):
    rules = all_rules(default_spec)
    assert len(rules) > 50
    for rule in rules:
        promql_parser.parse(rule.expr)  # raises ValueError on a syntax error


def _metric_names(expr) -> set[str]:
    names = set()

    def walk(node):
        if isinstance(node, promql_parser.VectorSelector):
            names.add(node.name)
        for attr in ("lhs", "rhs", "expr", "vector_selector", "param"):
            child = getattr(node, attr, None)
            if child is not None and not isinstance(child, (str, int, float)):
                walk(child)
        for arg in getattr(node, "args", None) or []:
            walk(arg)

    walk(expr)
    return names


def test_rules_follow_the_fleet_cost_and_identity_rules(default_spec):
    """No regex on metric names (but the unlabelled-series record's, which is exactly the tracked
    fields' names and pins the job), every selector of a raw series pins the job, every alert has
    for/severity/summary/description/runbook_url, rate windows >= 2 x max(scrape, collect)."""
    from gpumon.durations import parse_duration
    spec = default_spec
    fields = "|".join(m.name for m in spec.tracked_metrics)
    for rule in all_rules(spec):
        if rule.record == rnames.UNLABELLED:
            sels = re.findall(r"\{([^}]*)\}", rule.expr)
            assert len(sels) == 2 and all(s.startswith(f'__name__=~"{fields}",job="{spec.exporter.job}",') for s in sels)
            continue
        assert "__name__" not in rule.expr, rule.name
        for name in _metric_names(promql_parser.parse(rule.expr)):
            assert name, f"{rule.name}: selector without a metric name"
        if rule.alert:
            labels = rule.label_map
            assert labels["severity"] in ("critical", "warning", "info")
            notes = dict(rule.annotations)
            assert {"summary", "description", "runbook_url"} <= set(notes), rule.name
            assert rule.for_ is not None
            for volatile in ("pod", "namespace", "exported_"):
                assert f"$labels.{volatile}" not in notes["description"]
        for window in re.findall(r"(?:rate|increase|irate)\([^\[]*\[(\w+)\]", rule.expr):
            assert parse_duration(window) >= spec.exporter.min_rate_window, (rule.name, window)
        for sel in re.findall(r"\b(DCGM_FI_\w+|up|scrape_\w+)\{([^}]*)\}", rule.expr):
            assert f'job="{spec.exporter.job}"' in sel[1], (rule.name, sel)


def test_group_names_are_stable_and_unique(default_spec):
    names = [g.name for g in build_groups(default_spec)]
    assert names == ["gpumon.inventory", "gpumon.coverage", "gpumon.exporter", "gpumon.presence", "gpumon.values", "gpumon.plausibility", "gpumon.gaps"]


def test_spec_changes_flow_into_rules(tmp_path):
    text = (ROOT / "gpumon.yaml").read_text()
    text = text.replace("job: dcgm-exporter ", "job: nvidia-dcgm-exporter ").replace("node: Hostname ", "node: hostname ")
    text = text.replace("cluster: null ", "cluster: cluster ")
    path = tmp_path / "gpumon.yaml"
    path.write_text(text)
    spec = load_spec(path)
    rules = all_rules(spec)
    joined = "\n".join(r.expr for r in rules)
    assert 'job="dcgm-exporter"' not in joined and 'up{job="nvidia-dcgm-exporter"}' in joined
    assert "Hostname" not in joined and "by (job, cluster, hostname, UUID, gpu, GPU_I_ID)" in joined
    summaries = "\n".join(dict(r.annotations).get("summary", "") for r in rules)
    assert "$labels.hostname" in summaries and "$labels.Hostname" not in summaries


EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))


def test_examples_render_their_golden_output():
    """Each ``examples/<name>.yaml`` renders exactly ``tests/golden/<name>/`` (`make render` rewrites them)."""
    assert EXAMPLES
    for example in EXAMPLES:
        golden = ROOT / "tests" / "golden" / example.stem
        drift = writer.diff(render(load_spec(example)), golden)
        assert not drift.any, f"{golden} is stale, run `make render`:\n" + "\n".join(drift.lines())


def test_yaml_text_does_not_depend_on_libyaml(monkeypatch, default_spec):
    """Output is written with libyaml's emitter when PyYAML has it; PyYAML's pure-Python emitter
    (installs without libyaml) must write the same bytes: those committed in output/ and
    tests/golden/ (what the libyaml emitter writes, as the two tests above check)."""
    from gpumon import yamlout

    committed = [(default_spec, ROOT / "output")] + [(load_spec(e), ROOT / "tests" / "golden" / e.stem) for e in EXAMPLES]

    class PureDumper(yaml.SafeDumper):
        def ignore_aliases(self, data):
            return True

    PureDumper.add_representer(str, yamlout._str)
    monkeypatch.setattr(yamlout, "_Dumper", PureDumper)
    assert yamlout._Base is not yaml.SafeDumper or not yaml.__with_libyaml__
    for spec, folder in committed:
        slow = render(spec)
        assert slow and any(path.endswith(".yaml") for path in slow)
        for path, text in slow.items():
            assert (folder / path).read_bytes() == text.encode(), (spec.path, path)


def test_every_alert_keeps_the_cluster_label(default_spec):
    """Under a global ruler (Thanos, Mimir) every alert must say which cluster (issue 11, item 4):
    with a cluster label in the spec, no alert's expression may drop it (GpuExporterTargetMissing
    was a bare absent(up{job=...}), which keeps only job)."""
    import promql_parser
    from gpumon.lint.context import build
    from gpumon.readers.model import Inputs
    from gpumon.readers.promql import output_labels
    from gpumon.spec import parse_spec
    root = Path(default_spec.path).parent
    for path in (default_spec.path, root / "examples" / "kubernetes.yaml"):
        spec = parse_spec(Path(path).read_text().replace("cluster: null ", "cluster: cluster "), "c.yaml")
        groups = build_groups(spec)
        ctx = build(spec, Inputs(), groups)
        dropped = [r.alert for r in rules_of(groups) if r.alert
                   and not output_labels(promql_parser.parse(r.expr), ctx.record_labels).may_have("cluster")]
        assert dropped == [], dropped


def test_the_cli_builds_the_rule_groups_once_per_command(monkeypatch, tmp_path):
    """render, lint and validate build the spec's rule groups once and hand them to every reader
    (rule files, rule tests, dashboards, runbooks, Alertmanager layer, lint context, validate
    checks): nothing asks for them again behind a cache."""
    import gpumon.rules as rules

    built = []
    real = rules._build

    def counting(spec):
        built.append(spec.name)
        return real(spec)

    monkeypatch.setattr(rules, "_build", counting)
    ran = gpumon("render", "gpumon.yaml", "-o", str(tmp_path / "out"))
    assert ran.returncode == 0, ran.stderr
    assert built == ["gpumon"]
    built.clear()
    ran = gpumon("lint", "--spec", "gpumon.yaml", str(tmp_path / "out"))
    assert ran.returncode in (0, 1), ran.stdout + ran.stderr     # findings are another test's business
    assert built == ["gpumon"]
