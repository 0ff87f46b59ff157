"""Which spec a command uses when none is named: the nearest gpumon.yaml from the working
directory upwards, the bundled example only when asked for by name (`default`), never guessed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import ROOT

NO_SPEC = "no spec found: pass SPEC or run `gpumon init`"


def gpumon(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpumon.cli", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=120)


@pytest.mark.parametrize("command", [["render"], ["render", "--check"], ["lint", "somewhere"],
                                     ["validate", "--prom", "http://127.0.0.1:9"]])
def test_no_spec_anywhere_stops_with_exit_2_and_writes_nothing(tmp_path, command):
    proc = gpumon(*command, cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert NO_SPEC in proc.stderr and "Traceback" not in proc.stderr
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
    assert proc.returncode == 2 and NO_SPEC in proc.stderr


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
