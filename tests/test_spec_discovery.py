"""Which spec a command uses when none is named: the nearest gpumon.yaml from the working
directory upwards, the bundled example only when asked for by name (`default`), never guessed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import ROOT

NO_SPEC = "no spec found: pass SPEC or run `gpumon init`"
#: lint and preview take a spec only as an option
NO_SPEC_OPTION = "no spec found: pass --spec SPEC or run `gpumon init`"


def gpumon(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpumon.cli", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=120)


@pytest.mark.parametrize("command,said", [(["render"], NO_SPEC), (["render", "--check"], NO_SPEC),
                                           (["lint", "somewhere"], NO_SPEC_OPTION),
                                           (["validate", "--prom", "http://127.0.0.1:9"], NO_SPEC),
                                           (["preview", ".", "--prom", "http://127.0.0.1:9"], NO_SPEC_OPTION),
                                           (["lint", "--spec", "nothere.yaml", "."], "no spec found at nothere.yaml: "
                                            "pass --spec SPEC or run")])
def test_no_spec_anywhere_stops_with_exit_2_and_writes_nothing(tmp_path, command, said):
    """Says how this command takes a spec: SPEC for render and validate, --spec SPEC for lint and preview."""
    proc = gpumon(*command, cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert said in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_the_nearest_spec_above_the_working_directory_is_used(tmp_path):
    spec = (ROOT / "examples" / "mixed-fleet.yaml").read_text()
    (tmp_path / "gpumon.yaml").write_text(spec)
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    proc = gpumon("render", "-o", "out", cwd=deep)
    assert proc.returncode == 0, proc.stderr
    assert "from ../../gpumon.yaml" in proc.stdout
    golden = ROOT / "tests" / "golden" / "mixed-fleet" / "rules" / "gpumon.rules.yaml"
    rendered = (deep / "out" / "rules" / "gpumon.rules.yaml").read_text()
    assert rendered == golden.read_text().replace("from mixed-fleet.yaml.", "from gpumon.yaml.")


def test_default_names_the_bundled_spec(tmp_path):
    proc = gpumon("render", "--spec", "default", "--check", "-o", str(ROOT / "output"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = gpumon("render", "a.yaml", "--spec", "b.yaml", cwd=tmp_path)
    assert proc.returncode == 2 and "two specs given" in proc.stderr


def test_lint_without_a_spec_does_not_pass_relative_runbook_links(tmp_path):
    """The bundled spec allows relative runbook links (its output/ is read in a forge's file view);
    a repository without a spec must not lint under that allowance."""
    rules = tmp_path / "rules.yaml"
    rules.write_text("groups:\n- name: g\n  rules:\n  - alert: A\n    expr: up == 0\n    for: 5m\n"
                     "    annotations: {runbook_url: ../runbooks/A.md}\n")
    proc = gpumon("lint", str(rules), cwd=tmp_path)
    assert proc.returncode == 2 and NO_SPEC_OPTION in proc.stderr


def test_without_o_the_output_is_beside_the_spec_from_any_folder(tmp_path):
    """`gpumon render` and `render --check` from a subfolder mean the spec's output/ (as `make
    render` at the root does), not an output/ in the subfolder; -o stays relative to the working
    directory."""
    (tmp_path / "gpumon.yaml").write_text((ROOT / "examples" / "mixed-fleet.yaml").read_text())
    sub = tmp_path / "dashboards" / "team"
    sub.mkdir(parents=True)
    proc = gpumon("render", cwd=tmp_path)
    assert proc.returncode == 0 and "wrote output/ from gpumon.yaml" in proc.stdout, proc.stdout + proc.stderr
    proc = gpumon("render", "--check", cwd=sub)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("../../output/ is up to date with ../../gpumon.yaml")
    assert not (sub / "output").exists()
    (tmp_path / "output" / "rules" / "gpumon.rules.yaml").write_text("groups: []\n")
    proc = gpumon("render", "--check", cwd=sub)
    assert proc.returncode == 1 and "run `gpumon render`" in proc.stderr, proc.stdout + proc.stderr
    proc = gpumon("render", "../../gpumon.yaml", "-o", "here", cwd=sub)
    assert proc.returncode == 0 and (sub / "here" / "rules" / "gpumon.rules.yaml").is_file()


RULES = ("groups:\n- name: g\n  rules:\n  - alert: A\n    expr: up == 0\n    for: 5m\n"
         "    annotations: {runbook_url: ../runbooks/A.md}\n")


def test_lint_checks_each_file_against_the_spec_above_it(tmp_path):
    """Lint without --spec uses the spec that governs each file (the nearest gpumon.yaml from the
    file's folder upwards), not the working directory's: tree `relaxed` declares relative runbook
    links, tree `strict` does not, and lint run from a folder without a spec tells them apart."""
    for tree, spec in (("relaxed", ROOT / "gpumon.yaml"), ("strict", ROOT / "examples" / "mixed-fleet.yaml")):
        (tmp_path / tree / "rules").mkdir(parents=True)
        (tmp_path / tree / "gpumon.yaml").write_text(spec.read_text())
        (tmp_path / tree / "rules" / "a.yaml").write_text(RULES)
    proc = gpumon("lint", "relaxed/rules/a.yaml", "strict/rules", "--format", "json", "--fail-on", "warning",
                  cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    flagged = {f["location"]["file"] for f in doc["findings"] if f["check"] == "runbook-url-not-absolute"}
    assert flagged == {"strict/rules/a.yaml"}
    assert doc["summary"]["spec"] == "relaxed/gpumon.yaml; strict/gpumon.yaml"
    # from inside one tree, the other tree's file still gets its own spec
    proc = gpumon("lint", "../strict/rules/a.yaml", "--format", "json", "--fail-on", "warning", cwd=tmp_path / "relaxed")
    assert proc.returncode == 1 and json.loads(proc.stdout)["summary"]["spec"] == "../strict/gpumon.yaml"
    # --spec names one spec for every file
    proc = gpumon("lint", "strict/rules/a.yaml", "--spec", "relaxed/gpumon.yaml", "--fail-on", "warning", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_lint_names_the_file_no_spec_governs(tmp_path):
    (tmp_path / "governed").mkdir()
    (tmp_path / "governed" / "gpumon.yaml").write_text((ROOT / "gpumon.yaml").read_text())
    (tmp_path / "governed" / "a.yaml").write_text(RULES)
    (tmp_path / "loose.yaml").write_text(RULES)
    proc = gpumon("lint", "governed/a.yaml", "loose.yaml", cwd=tmp_path)
    assert proc.returncode == 2 and NO_SPEC_OPTION in proc.stderr and "for loose.yaml" in proc.stderr, proc.stderr
