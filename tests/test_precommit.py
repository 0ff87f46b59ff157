"""The pre-commit hooks gpumon ships (.pre-commit-hooks.yaml) run clean on gpumon's own repository:
each hook's entry and args, on the files pre-commit would pass it (tracked files of the hook's
types, less the repository's top-level ``exclude``), from the repository root as pre-commit does."""

from __future__ import annotations

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
