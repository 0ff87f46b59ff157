"""The CI integration files shipped for users: .pre-commit-hooks.yaml and the GitHub Actions
workflow in docs/lint.md run commands that exist, with options that exist."""

from __future__ import annotations

import re
import shlex

import yaml

from gpumon.cli import cli


def _check_command(line: str) -> None:
    """``gpumon SUB [options]`` names a real subcommand and only real options."""
    words = shlex.split(line.split(">")[0])
    assert words[0] == "gpumon", line
    command = cli.commands[words[1]]
    known = {opt for param in command.params for opt in getattr(param, "opts", [])}
    for word in words[2:]:
        if word.startswith("-"):
            assert word in known, f"{line}: unknown option {word}"


def test_pre_commit_hooks(root):
    hooks = yaml.safe_load((root / ".pre-commit-hooks.yaml").read_text())
    assert [h["id"] for h in hooks] == ["gpumon-render-check", "gpumon-lint"]
    for hook in hooks:
        assert hook["language"] == "python"
        _check_command(" ".join([hook["entry"], *hook.get("args", [])]))


def test_github_workflow_in_the_docs(root):
    text = (root / "docs" / "lint.md").read_text()
    block = text.split("## GitHub Actions workflow", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    workflow = yaml.safe_load(block)
    steps = workflow["jobs"]["gpumon"]["steps"]
    runs = [line.strip() for s in steps for line in str(s.get("run", "")).splitlines()
            if line.strip().startswith("gpumon ")]
    assert any(r.startswith("gpumon render") and "--check" in r for r in runs)
    assert any("--format sarif" in r for r in runs) and any("--format github" in r for r in runs)
    assert any(r.startswith("gpumon diff") for r in runs)
    # the second invariant is checked where users merge: promtool loads the rules and runs their tests
    shell = [line.strip() for s in steps for line in str(s.get("run", "")).splitlines()]
    assert "./promtool check rules output/rules/*.yaml" in shell and "./promtool test rules output/tests/*.test.yaml" in shell
    assert any(str(s.get("uses", "")).startswith("github/codeql-action/upload-sarif") for s in steps)
    assert workflow["permissions"]["security-events"] == "write"
    for line in runs:
        _check_command(re.sub(r"\$\{\{[^}]*\}\}", "base", line))
