"""The composite GitHub Action (action.yml): its steps' commands, run as a runner would run them
(bash, the step's env with the inputs filled in), on a GitOps folder with a spec and its rendered
output: clean, then with a rendered file edited by hand, then with a broken hand-written rule."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from .conftest import ROOT

ACTION = yaml.safe_load((ROOT / "action.yml").read_text())
EXPR = re.compile(r"\$\{\{\s*([\w.-]+)\s*\}\}")


def run_steps(inputs: dict[str, str], only: str = "") -> list[tuple[str, subprocess.CompletedProcess]]:
    """Run every ``run:`` step in order with ``inputs`` over the action's defaults, until one
    fails, as a runner does (``only``: just the steps whose name starts with it). ``pip`` is a
    stub that records what it would install (gpumon comes from this venv, first on PATH)."""
    values = {name: spec.get("default", "") for name, spec in ACTION["inputs"].items()} | inputs
    cwd = Path(values.pop("workdir"))
    stub = cwd.parent / "stub-bin"
    stub.mkdir(exist_ok=True)
    (stub / "python").write_text('#!/bin/sh\necho "$@" >> "$PIP_LOG"\n')
    (stub / "python").chmod(0o755)
    context = {f"inputs.{k}": v for k, v in values.items()} | {"github.action_path": str(ROOT)}
    done = []
    for step in ACTION["runs"]["steps"]:
        if "run" not in step or not step["name"].startswith(only):
            continue
        assert step["shell"] == "bash"
        env = {k: EXPR.sub(lambda m: context[m.group(1)], str(v)) for k, v in (step.get("env") or {}).items()}
        # the step's script never holds an expression: inputs reach it only through env (no injection)
        assert not EXPR.search(step["run"]), step["run"]
        bin_ = str(Path(sys.executable).parent)
        path = f"{stub}:{bin_}" if "pip install" in step["run"] else f"{bin_}:{os.environ['PATH']}"
        proc = subprocess.run([shutil.which("bash"), "-e", "-c", step["run"]], cwd=cwd, capture_output=True, text=True, timeout=300,
                              env={**os.environ, **env, "PATH": path, "GITHUB_ACTION_PATH": str(ROOT),
                                   "PIP_LOG": str(cwd.parent / "pip.log")})
        done.append((step["name"], proc))
        if proc.returncode:
            break
    return done


@pytest.fixture
def repo(tmp_path) -> Path:
    """A GitOps folder: gpumon's bundled spec and its committed output/, hand-written rules."""
    work = tmp_path / "repo"
    work.mkdir()
    shutil.copy(ROOT / "gpumon.yaml", work / "gpumon.yaml")
    shutil.copytree(ROOT / "output", work / "output")
    (work / "monitoring").mkdir()
    (work / "monitoring" / "extra.yaml").write_text(
        "groups:\n- name: extra\n  rules:\n  - record: job:gpu_temp:max\n"
        "    expr: max by (job) (DCGM_FI_DEV_GPU_TEMP)\n")
    return work


def test_the_action_is_composite_and_pins_its_actions():
    assert ACTION["runs"]["using"] == "composite"
    uses = [s["uses"] for s in ACTION["runs"]["steps"] if "uses" in s]
    assert uses and all(re.fullmatch(r"[\w-]+/[\w-]+@v\d+", u) for u in uses)
    commands = " ".join(s.get("run", "") for s in ACTION["runs"]["steps"])
    assert "gpumon render" in commands and "--check" in commands and "gpumon lint" in commands


def test_a_clean_repository_passes(repo):
    steps = run_steps({"workdir": str(repo), "lint-paths": "monitoring"})
    assert [name for name, _ in steps] == [s["name"] for s in ACTION["runs"]["steps"] if "run" in s]
    assert all(p.returncode == 0 for _, p in steps), [(n, p.stdout[-2000:], p.stderr[-2000:]) for n, p in steps]
    # the install step asks pip for the action's own checkout (the tag the workflow pinned)
    assert (repo.parent / "pip.log").read_text().split() == ["-m", "pip", "install", "--quiet", str(ROOT)]
    assert "is up to date with gpumon.yaml" in steps[1][1].stdout


def test_a_hand_edited_output_fails_the_drift_step(repo):
    rules = repo / "output" / "rules" / "gpumon.rules.yaml"
    rules.write_text(rules.read_text().replace("for: 5m", "for: 6m", 1))
    run_steps({"workdir": str(repo), "gpumon": "gpumon==0.1.0"}, only="install")
    assert (repo.parent / "pip.log").read_text().split()[-1] == "gpumon==0.1.0"
    name, proc = run_steps({"workdir": str(repo)}, only="rendered")[-1]
    assert name.startswith("rendered output matches the spec") and proc.returncode == 1
    assert "rules/gpumon.rules.yaml" in proc.stdout


def test_a_broken_hand_written_rule_fails_the_lint_step_with_an_annotation(repo):
    (repo / "monitoring" / "extra.yaml").write_text(
        "groups:\n- name: extra\n  rules:\n  - alert: GpuHot\n    expr: max by (job DCGM_FI_DEV_GPU_TEMP) > 90\n"
        "    for: 5m\n")
    (repo / "output").rename(repo / "rendered")   # lint only the hand-written rule (the output lints clean above)
    (repo / "output").mkdir()
    name, proc = run_steps({"workdir": str(repo), "lint-paths": "monitoring"}, only="lint")[-1]
    assert name.startswith("lint") and proc.returncode == 1, proc.stdout + proc.stderr
    assert "::error file=monitoring/extra.yaml,line=5" in proc.stdout and "promql-syntax" in proc.stdout


def test_without_output_the_steps_check_the_output_beside_the_spec(repo):
    """`spec: clusters/a/gpumon.yaml` checks clusters/a/output (render's default), not ./output."""
    cluster = repo / "clusters" / "a"
    cluster.mkdir(parents=True)
    (repo / "gpumon.yaml").rename(cluster / "gpumon.yaml")
    (repo / "output").rename(cluster / "output")
    done = run_steps({"workdir": str(repo), "spec": "clusters/a/gpumon.yaml"})
    assert [p.returncode for _, p in done] == [0, 0, 0], [(n, p.stdout + p.stderr) for n, p in done]
    assert "clusters/a/output" in done[1][1].stdout, done[1][1].stdout
    assert not (repo / "output").exists()
    # an output given still wins
    (cluster / "output").rename(repo / "rendered")
    done = run_steps({"workdir": str(repo), "spec": "clusters/a/gpumon.yaml", "output": "rendered"})
    assert [p.returncode for _, p in done] == [0, 0, 0], [(n, p.stdout + p.stderr) for n, p in done]
