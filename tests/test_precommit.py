"""The pre-commit hooks gpumon ships (.pre-commit-hooks.yaml) run clean on gpumon's own repository:
each hook's entry and args, on the files pre-commit would pass it (tracked files of the hook's
types, less the repository's top-level ``exclude``), from the repository root as pre-commit does."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from .conftest import ROOT

#: the file types pre-commit's `identify` gives by extension, for the types hooks use here
TYPES = {"yaml": (".yaml", ".yml"), "json": (".json",)}


def hooks() -> list[dict]:
    return yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())


def files_for(hook: dict) -> list[str]:
    """What pre-commit passes ``hook`` in a run over every file (``pre-commit run --all-files``)."""
    if not hook.get("pass_filenames", True):
        return []
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())
    exclude = re.compile(config.get("exclude", "^$"))
    types = hook.get("types_or") or hook.get("types") or []
    suffixes = tuple(s for t in types for s in TYPES[t])
    return [f for f in tracked if f.endswith(suffixes) and not exclude.search(f) and (ROOT / f).is_file()]


def test_the_repository_config_runs_the_shipped_hooks():
    shipped = {h["id"]: h for h in hooks()}
    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())
    local = {h["id"]: h for repo in config["repos"] for h in repo["hooks"]}
    assert set(local) == set(shipped)
    for hid, hook in shipped.items():
        for key in ("entry", "args", "types_or", "pass_filenames", "always_run"):
            assert local[hid].get(key) == hook.get(key), (hid, key)


@pytest.mark.skipif(not shutil.which("git") or not (ROOT / ".git").exists(), reason="needs the git checkout")
@pytest.mark.parametrize("hook", hooks(), ids=lambda h: h["id"])
def test_hook_passes_on_this_repository(hook):
    command = shlex.split(hook["entry"]) + list(hook.get("args", [])) + files_for(hook)
    assert command[0] == "gpumon"
    gpumon = Path(sys.executable).parent / "gpumon"
    proc = subprocess.run([str(gpumon), *command[1:]], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    if hook.get("types_or"):
        assert "gpumon.yaml" in command and "input-unreadable" not in proc.stdout


def documented_config() -> dict:
    """The first YAML block of docs/lint.md's pre-commit section: what users copy."""
    text = (ROOT / "docs" / "lint.md").read_text()
    section = text[text.index("## pre-commit\n"):]
    return yaml.safe_load(section.split("```yaml\n", 1)[1].split("```", 1)[0])


def _git(*args, cwd):
    subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=True)


@pytest.mark.slow
@pytest.mark.skipif(not shutil.which("git") or not (ROOT / ".git").exists(), reason="needs the git checkout")
def test_the_documented_config_installs_and_runs_from_a_tag(tmp_path):
    """pre-commit itself installs the hooks from a tag (its own virtualenv, `pip install` of the
    tagged checkout, dependencies from PyPI) and runs them on a GitOps folder."""
    config = documented_config()
    (repo,) = config["repos"]
    assert re.fullmatch(r"v\d+\.\d+\.\d+", repo["rev"]) and [h["id"] for h in repo["hooks"]] == [h["id"] for h in hooks()]
    source = tmp_path / "gpumon"
    _git("clone", "-q", str(ROOT), str(source), cwd=tmp_path)
    _git("tag", repo["rev"], cwd=source)
    repo["repo"] = str(source)
    gitops = tmp_path / "gitops"
    gitops.mkdir()
    (gitops / "gpumon.yaml").write_text((ROOT / "gpumon.yaml").read_text())
    shutil.copytree(ROOT / "output", gitops / "output")
    (gitops / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config))
    _git("init", "-q", cwd=gitops)
    _git("add", "-A", cwd=gitops)
    _git("-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-qm", "spec and output", cwd=gitops)
    pre_commit = [str(Path(sys.executable).parent / "pre-commit"), "run", "--all-files", "--color", "never"]
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "cache")}
    proc = subprocess.run(pre_commit, cwd=gitops, capture_output=True, text=True, timeout=900, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.stdout.count("Passed") == 2
    rules = gitops / "output" / "rules" / "gpumon.rules.yaml"
    rules.write_text(rules.read_text().replace("for: 5m", "for: 6m", 1))
    proc = subprocess.run(pre_commit, cwd=gitops, capture_output=True, text=True, timeout=900, env=env)
    assert proc.returncode == 1 and "rules/gpumon.rules.yaml" in proc.stdout, proc.stdout[-3000:]
