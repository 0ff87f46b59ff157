"""gpumon diff: semantic comparison of two versions of rules and dashboards, as Markdown."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpumon.cli import cli
from gpumon.diff import compare
from gpumon.diff.sources import read

DIFF = Path(__file__).resolve().parent / "data" / "diff"


def test_two_versions_give_the_expected_markdown():
    result = compare(read(str(DIFF / "v1")), read(str(DIFF / "v2")), "v1", "v2")
    assert result.markdown() == (DIFF / "expected.md").read_text()


def test_formatting_only_changes_are_not_differences():
    md = (DIFF / "expected.md").read_text()
    assert "job_node:gpu_temp:max" not in md  # reformatted expression
    assert "5m → 5m" not in md and "for`: 5m" not in md  # for: 5m vs 300s
    assert "\"GPU temperature\" (id 1): query" not in md  # whitespace inside the query only
    assert "version" not in md  # dashboard version counter


def test_cli_exit_codes(tmp_path):
    runner = CliRunner()
    same = runner.invoke(cli, ["diff", str(DIFF / "v1"), str(DIFF / "v1")])
    assert same.exit_code == 0 and "No semantic differences" in same.output
    changed = runner.invoke(cli, ["diff", str(DIFF / "v1"), str(DIFF / "v2")])
    assert changed.exit_code == 1 and "<details><summary>Dashboards (1)</summary>" in changed.output
    missing = runner.invoke(cli, ["diff", str(DIFF / "v1"), str(tmp_path / "nope")])
    assert missing.exit_code == 2 and "no such file or directory" in missing.output


def test_plain_file_and_prometheusrule_copies_count_once(tmp_path):
    """gpumon writes the same rules twice (rule file + PrometheusRule): one change, reported once."""
    old, new = tmp_path / "old", tmp_path / "new"
    for side, src in ((old, DIFF / "v1" / "rules.yaml"), (new, DIFF / "v2" / "rules.yaml")):
        side.mkdir()
        text = src.read_text()
        (side / "rules.yaml").write_text(text)
        body = "".join("  " + ln + "\n" for ln in text.splitlines())
        (side / "prometheusrule.yaml").write_text(
            "apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\nmetadata:\n  name: gpu\nspec:\n" + body)
    md = compare(read(str(old)), read(str(new)), "old", "new").markdown()
    assert md.count("**removed** `GpuPowerHigh`") == 1
    assert "alerting rules: 1 added, 1 removed, 2 changed" in md


def test_git_revision_of_a_path(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    shutil.copytree(DIFF / "v1", repo / "monitoring")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(git + ["-C", str(repo), "add", "-A"], check=True)
    subprocess.run(git + ["-C", str(repo), "commit", "-qm", "v1"], check=True)
    shutil.rmtree(repo / "monitoring")
    shutil.copytree(DIFF / "v2", repo / "monitoring")
    monkeypatch.chdir(repo)
    result = CliRunner().invoke(cli, ["diff", "git:HEAD:monitoring", "monitoring"])
    assert result.exit_code == 1
    expected = (DIFF / "expected.md").read_text().split("\n", 1)[1]
    assert result.output == "### gpumon diff: `git:HEAD:monitoring` → `monitoring`\n" + expected
    bad = CliRunner().invoke(cli, ["diff", "git:no-such-rev:monitoring", "monitoring"])
    assert bad.exit_code == 2 and "git:no-such-rev:monitoring" in bad.output
    assert "this clone has no revision no-such-rev: name a branch, tag or commit" in bad.output, bad.output
    # the README's CI line in a shallow clone without origin/main: say how to fetch it
    shallow = CliRunner().invoke(cli, ["diff", "git:origin/main:monitoring", "monitoring"])
    assert shallow.exit_code == 2, shallow.output
    assert "fetch it first (`git fetch origin main`)" in shallow.output and "fetch-depth: 0" in shallow.output


def test_selector_label_and_group_interval_changes(tmp_path):
    rule = ("    rules:\n    - record: job_node:gpu_temp:max\n"
            "      expr: max by (job, Hostname) (DCGM_FI_DEV_GPU_TEMP{job=\"dcgm-exporter\"})\n")
    head = "apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\nmetadata:\n  name: gpu\n  namespace: mon\n"
    (tmp_path / "old.yaml").write_text(head + "  labels:\n    release: kube-prometheus-stack\nspec:\n  groups:\n"
                                       "  - name: gpu\n    interval: 1m\n" + rule)
    (tmp_path / "new.yaml").write_text(head + "spec:\n  groups:\n  - name: gpu\n" + rule)
    md = compare(read(str(tmp_path / "old.yaml")), read(str(tmp_path / "new.yaml")), "a", "b").markdown()
    assert "- group `gpu`: evaluation interval 1m → global default" in md
    assert "- PrometheusRule `mon/gpu`: metadata label `release`: `kube-prometheus-stack` → none" in md
    assert "rule groups / PrometheusRule objects: 2 changed" in md


@pytest.fixture(scope="module")
def without_mem_clock(tmp_path_factory, root):
    """(output/, a render without DCGM_FI_DEV_MEM_CLOCK): rendered once for the tests that read it."""
    return _render_without(tmp_path_factory.mktemp("without"), root, "DCGM_FI_DEV_MEM_CLOCK")


def _render_without(tmp_path, root, metric: str):
    """output/ of the bundled spec, and a render of it with ``metric`` removed."""
    text = (root / "gpumon.yaml").read_text()
    start = text.index(f"  - name: {metric}\n")
    end = text.index("  - name: ", start + 10)
    spec = tmp_path / "gpumon.yaml"
    spec.write_text(text[:start] + text[end:])
    res = CliRunner().invoke(cli, ["render", str(spec), "-o", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    return root / "output", tmp_path / "out"


def test_removing_one_metric_reads_as_its_panel_and_alerts_removed(without_mem_clock):
    """Issue #14: removing DCGM_FI_DEV_MEM_CLOCK used to read as three renamed panels and a
    removed XID rule (panels matched by positional id). Now: the field, its panel, its alerts."""
    before, after = without_mem_clock
    md = compare(read(str(before)), read(str(after)), "before", "after").markdown()
    by_field = md.split("**By field:**", 1)[1].split("<details>", 1)[0].strip().splitlines()
    assert by_field == ["- **removed** `DCGM_FI_DEV_MEM_CLOCK`: Memory clock panel (GPU fleet overview, GPU node and "
                        "device detail); its alerts: `GpuFleetTelemetryImplausible`, `GpuNodeTelemetryImplausible`, "
                        "`GpuTelemetryImplausible`; its recording rules: `job_dcgm_field:gpumon_coverage:ratio`, "
                        "`job_gpu:dcgm_field_implausible:max`, "
                        "`job_gpu:dcgm_field_implausible:unless`, `job_gpu:dcgm_field_missing:group`, "
                        "`job_node:dcgm_field_absent:group`, `job_node_dcgm_field:gpumon_plausible:group`; "
                        "dropped from the field lists of 3 rule(s)/quer(ies)"]
    assert md.count("panel removed:") == 2 and md.count('panel removed: "Memory clock"') == 2
    assert ": title " not in md and "query A changed" not in md and "XID" not in md
    assert "panel id(s) changed" not in md  # the other panels keep their ids
    # the field, its 3 alerts, its 6 records (the unlabelled-series record lists the field: dropped from it)
    assert md.count("**removed**") == 10 and "**added**" not in md
    assert len(md) < 4000


def test_panel_ids_follow_the_panel_not_its_position(without_mem_clock):
    before, after = without_mem_clock
    for name in ("gpumon-fleet", "gpumon-gpu", "gpumon-health"):
        ids = []
        for side in (before, after):
            doc = json.loads((side / "dashboards" / f"{name}.json").read_text())
            panels = [q for p in doc["panels"] for q in [p] + p.get("panels", [])]
            ids.append({p["title"]: p["id"] for p in panels})
        assert {t: i for t, i in ids[0].items() if t != "Memory clock"} == ids[1], name


def test_pr_comment_fits_githubs_limit(tmp_path):
    """A change too big for one comment: summary first, sections in <details>, cut at item
    boundaries (no open code block) with a note of how much was cut."""
    def rules(threshold):
        body = "".join(f"    - alert: GpuAlert{i}\n      expr: DCGM_FI_DEV_GPU_TEMP{{gpu=\"{i}\"}} > {threshold}\n"
                       for i in range(2000))
        return "groups:\n  - name: gpu\n    rules:\n" + body
    (tmp_path / "a.yaml").write_text(rules(80))
    (tmp_path / "b.yaml").write_text(rules(90))
    result = compare(read(str(tmp_path / "a.yaml")), read(str(tmp_path / "b.yaml")), "a", "b")
    whole = result.markdown(limit=10 ** 9)
    assert len(whole) > 65536
    md = result.markdown()
    assert len(md) <= 65536
    assert md.startswith("### gpumon diff: `a` → `b`\n\n**Summary:** alerting rules: 2000 changed")
    assert "<details><summary>Alerting rules (2000)</summary>" in md and md.count("</details>") == 1
    assert md.count("```") % 2 == 0
    shown = md.count("- **changed**")
    assert 0 < shown < 2000
    assert f"_… {2000 - shown} more change(s) not shown here: the comment is capped at 65,536 characters" in md


def test_git_revision_reads_files_whose_names_git_quotes(tmp_path, monkeypatch):
    """Names with non-ASCII or quote characters are listed verbatim (git ls-tree -z), so a
    dashboard named like that is compared, not left out."""
    repo = tmp_path / "repo"
    (repo / "dash").mkdir(parents=True)
    names = ["donn\u20aces.json", 'say "hi".json']
    for name in names:
        shutil.copy(DIFF / "v1" / "dashboard.json", repo / "dash" / name)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "core.quotePath=true"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(git + ["-C", str(repo), "add", "-A"], check=True)
    subprocess.run(git + ["-C", str(repo), "commit", "-qm", "v1"], check=True)
    monkeypatch.chdir(repo)
    side = read("git:HEAD:dash")
    assert sorted(d.file for d in side.dashboards) == sorted(f"dash/{n}" for n in names)
    for name in names:
        (repo / "dash" / name).write_text('{"title": "gutted", "uid": "x", "panels": []}')
    result = CliRunner().invoke(cli, ["diff", "git:HEAD:dash", "dash"])
    assert result.exit_code == 1 and "No semantic differences" not in result.output
    bad = CliRunner().invoke(cli, ["diff", "git:--output=x:dash", "dash"])
    assert bad.exit_code == 2 and "cannot start with '-'" in bad.output


_ODD_VALUES = [5, -1.5, "x", [], [1, "a"], {}, {"a": [1]}, None, True]
_PANEL_KEYS = ["gridPos", "title", "type", "id", "targets", "datasource", "fieldConfig", "panels", "yaxes",
               "thresholds"]
_TARGET_KEYS = ["expr", "refId", "legendFormat", "datasource"]
_DASH_KEYS = ["title", "uid", "templating", "panels"]


def _odd_dashboards():
    base = json.loads((DIFF / "v1" / "dashboard.json").read_text())
    for value in _ODD_VALUES:
        for key in _DASH_KEYS:
            yield f"dashboard.{key}={value!r}", dict(base, **{key: value})
        for key in _PANEL_KEYS:
            doc = json.loads(json.dumps(base))
            doc["panels"][0][key] = value
            yield f"panel.{key}={value!r}", doc
        for key in _TARGET_KEYS:
            doc = json.loads(json.dumps(base))
            doc["panels"][0]["targets"][0][key] = value
            yield f"target.{key}={value!r}", doc
        doc = json.loads(json.dumps(base))
        doc["templating"] = {"list": [{"name": "v", "type": "query", "query": value, "definition": value}]}
        yield f"variable.query={value!r}", doc


def test_dashboards_of_any_shape_diff_without_crashing(tmp_path):
    """A gridPos of 5 or an expr of 5 (lint accepts both) crashed diff with an internal error:
    whatever type a dashboard field holds, both directions compare."""
    from gpumon.readers import loader
    from gpumon.readers.model import Inputs

    base = Inputs()
    loader.load_text((DIFF / "v1" / "dashboard.json").read_text(), "d.json", base)
    for case, doc in _odd_dashboards():
        odd = Inputs()
        loader.load_text(json.dumps(doc), "d.json", odd)
        assert not odd.problems, case
        for old, new in ((base, odd), (odd, base)):
            md = compare(old, new, "a", "b").markdown()
            assert md.startswith("### gpumon diff"), case


_INJECTED = ["x\n### No semantic differences", "</details>", "@acme/security-team", "[click](https://evil.example)",
             "<img src=https://evil.example/x.png>", "aaa\n<!--", "a ``` b\n```\nout", "`tick`", "x\r\n- **removed** all"]


def _outside_code(md: str) -> str:
    """``md`` without fenced code blocks and inline code spans (which GitHub shows literally)."""
    kept, fence = [], ""
    for line in md.splitlines():
        stripped = line.strip()
        if not fence and stripped.startswith("```"):
            fence = stripped[:len(stripped) - len(stripped.lstrip("`"))]
        elif fence and stripped.startswith(fence) and not stripped.strip("`"):
            fence = ""
        elif not fence:
            kept.append(re.sub(r"(`+)(?!`).*?(?<!`)\1(?!`)", "CODE", line))
    assert not fence, "a code block left open"
    return "\n".join(kept)


def _check_markdown_is_inert(md: str) -> None:
    """No line of ``md`` starts markup that came from the input; no HTML, mention or link from it."""
    text = _outside_code(md)
    for line in text.splitlines():
        assert not line.startswith(("### No", "<!--", "- **removed** all", "out")), line
    assert text.count("</details>") == text.count("<details>")
    for bad in ("<img", "<!--", "[click]", "@acme"):
        assert bad not in text, (bad, text)
    for unescaped in (r"(?<!\\)\]\(", r"(?<!\\)`"):
        assert not re.search(unescaped, text), (unescaped, text)


def test_values_from_the_pull_request_cannot_inject_markdown(tmp_path):
    """Titles, group names, labels, queries and names were copied into the PR comment verbatim: a
    newline started a heading, </details> and <!-- hid the rest, @team mentioned, links and images
    rendered. Each value is now a one-line code span or escaped text; code blocks outfence it."""
    base = json.loads((DIFF / "v1" / "dashboard.json").read_text())
    for i, bad in enumerate(_INJECTED):
        old, new = tmp_path / f"old{i}", tmp_path / f"new{i}"
        old.mkdir()
        new.mkdir()
        (old / "rules.yaml").write_text(
            "groups:\n- name: g\n  rules:\n  - alert: A\n    expr: up == 0\n    labels: {severity: warning}\n"
            "  - alert: Gone\n    expr: up\n")
        (new / "rules.yaml").write_text(json.dumps({"groups": [
            {"name": bad, "interval": "1m", "rules": [
                {"alert": "A", "expr": f"up == 0 # {bad}", "labels": {"severity": bad, "team": bad}},
                {"alert": bad, "expr": f"up # {bad}", "labels": {bad: bad}}]}]}))
        (old / "dashboard.json").write_text(json.dumps(base))
        changed = json.loads(json.dumps(base))
        changed["title"] = bad
        changed["panels"][0]["title"] = bad
        changed["panels"][0]["type"] = bad
        changed["panels"][0]["targets"][0]["expr"] = f"up # {bad}"
        changed["panels"][0]["targets"][0]["legendFormat"] = bad
        changed["panels"].append({"id": 99, "title": bad, "type": bad, "gridPos": {"x": bad, "y": 0, "w": 1, "h": 1},
                                  "targets": [{"refId": bad, "expr": bad}]})
        changed["templating"] = {"list": [{"name": bad, "type": bad, "query": bad}]}
        (new / "dashboard.json").write_text(json.dumps(changed))
        for a, b in ((old, new), (new, old)):
            md = compare(read(str(a)), read(str(b)), f"git:main:{bad}", bad).markdown()
            _check_markdown_is_inert(md)


def test_markdown_values_keep_what_they_say():
    from gpumon.diff.comment import code, fence, text

    assert code("a`b") == "``a`b``" and code("`x`") == "`` `x` ``" and code("a\nb") == "`a⏎b`"
    assert text("<b>@me</b> *x* [l](u)") == "&lt;b&gt;@&#8203;me&lt;/b&gt; \\*x\\* \\[l\\](u)"
    assert fence(["a ``` b"], "diff") == ["````diff", "a ``` b", "````"]
