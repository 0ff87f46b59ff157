"""The container image (Containerfile): what it is made of, its steps run in a venv, and, where
podman and the base image are at hand, the image itself built and run.

No base image can be pulled where gpumon's CI runs (it reaches only package registries), so the
steps are checked without a builder: the build stage's COPY sources alone must build the wheel
(a path missing from the COPY list or from .dockerignore fails here), the wheel installs into a
fresh venv as the image's RUN step does, and the ENTRYPOINT runs as the image's unprivileged
user from its working directory.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest

from .conftest import ROOT

CONTAINERFILE = ROOT / "Containerfile"


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    out, pending = [], ""
    for line in text.splitlines():
        if line.lstrip().startswith("#") and not pending:
            continue
        pending += line.rstrip()
        if pending.endswith("\\"):
            pending = pending[:-1] + " "
            continue
        if pending.strip():
            word, _, rest = pending.strip().partition(" ")
            out.append((word.upper(), " ".join(rest.split())))
        pending = ""
    return out


def stages(text: str) -> list[list[tuple[str, str]]]:
    """The instructions of each stage (a FROM starts one), ARG defaults substituted in FROM."""
    args, out = {}, []
    for word, rest in instructions(text):
        if word == "ARG" and not out:
            name, _, default = rest.partition("=")
            args[name] = default
        elif word == "FROM":
            for name, value in args.items():
                rest = rest.replace("${" + name + "}", value)
            out.append([(word, rest)])
        elif out:
            out[-1].append((word, rest))
    return out


def first(stage, word):
    return next(rest for w, rest in stage if w == word)


def test_the_image_is_a_slim_python_running_gpumon_as_an_unprivileged_user():
    build, final = stages(CONTAINERFILE.read_text())
    assert first(build, "FROM") == "python:3.11-slim AS wheel" and first(final, "FROM") == "python:3.11-slim"
    assert first(final, "COPY") == "--from=wheel /dist /dist"
    assert "pip install --no-cache-dir /dist/gpumon-*.whl" in first(final, "RUN")
    user = first(final, "USER").split(":")[0]
    assert user.isdigit() and int(user) >= 1000 and f"--uid {user}" in first(final, "RUN")
    assert first(final, "ENTRYPOINT") == '["gpumon"]' and first(final, "WORKDIR") == "/work"
    # everything the build stage copies is in the build context (.dockerignore lets it through)
    allowed = [ln[1:] for ln in (ROOT / ".dockerignore").read_text().splitlines() if ln.startswith("!")]
    copied = [src for w, rest in build if w == "COPY" for src in rest.split()[:-1]]
    assert copied and all(src in allowed and (ROOT / src).exists() for src in copied), copied


def _run(args, cwd, user=None, check=True) -> subprocess.CompletedProcess:
    def drop():  # the image's USER: no root, no supplementary groups
        os.setgroups([])
        os.setgid(user)
        os.setuid(user)

    proc = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=300,
                          preexec_fn=drop if user is not None else None, env={**os.environ, "HOME": str(cwd)})
    if check and proc.returncode != 0:
        raise AssertionError(f"{shlex.join(map(str, args))} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture(scope="module")
def image_steps():
    """A folder laid out as the image is: the wheel built from the build stage's COPY sources
    only, installed into a fresh venv (dependencies through a .pth line to this venv's, as
    tests/test_package.py does: no network). Returns (venv bin/, work folder, uid to run as)."""
    build, final = stages(CONTAINERFILE.read_text())
    top = Path(tempfile.mkdtemp(prefix="gpumon-image-"))
    try:
        src = top / "src"
        for word, rest in build:
            if word == "COPY":
                *sources, dest = rest.split()
                for source in sources:
                    target = src / dest / source if dest == "./" else src / dest
                    if (ROOT / source).is_dir():
                        shutil.copytree(ROOT / source, target, ignore=shutil.ignore_patterns("__pycache__"))
                    else:
                        target.parent.mkdir(parents=True, exist_ok=True)
                        shutil.copy2(ROOT / source, target)
        # the build stage's RUN: hatchling comes with the test extras here
        _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "--wheel-dir",
              str(top / "dist"), "."], cwd=src)
        wheel = next((top / "dist").glob("gpumon-*.whl"))
        # an unprivileged user needs a Python it may run: this venv's base may sit in root's home
        base = Path(sys.base_prefix) / "bin" / "python3"
        system = Path("/usr/bin/python3")
        root = os.geteuid() == 0
        if root and system.is_file() and str(Path(sys.base_prefix)).startswith("/root"):
            base = system
        venv = top / "venv"
        _run([str(base), "-m", "venv", "--without-pip", str(venv)], cwd=top)
        python = venv / "bin" / "python"
        purelib = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=top)
        (Path(purelib.stdout.strip()) / "gpumon-test-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
        # the final stage's RUN (dependencies already reachable: --no-deps --no-index)
        _run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-index",
              str(wheel)], cwd=top)
        uid = int(first(final, "USER").split(":")[0]) if root else None
        work = top / first(final, "WORKDIR").lstrip("/")
        work.mkdir()
        top.chmod(0o755)
        if uid is not None:
            os.chown(work, uid, uid)
        yield venv / "bin", work, uid
    finally:
        shutil.rmtree(top, ignore_errors=True)


@pytest.mark.slow
def test_the_image_steps_give_a_gpumon_that_works_as_its_user(image_steps):
    bin_, work, uid = image_steps
    entry = str(bin_ / "gpumon")
    assert _run([entry, "--version"], cwd=work, user=uid).stdout.startswith("gpumon ")
    # the mounted repository's use: render, then the drift check and lint on what was rendered
    (work / "gpumon.yaml").write_text((ROOT / "gpumon.yaml").read_text())
    if uid is not None:
        os.chown(work / "gpumon.yaml", uid, uid)
    _run([entry, "render"], cwd=work, user=uid)
    assert (work / "output" / "rules" / "gpumon.rules.yaml").read_text() == \
        (ROOT / "output" / "rules" / "gpumon.rules.yaml").read_text()
    _run([entry, "render", "--check"], cwd=work, user=uid)
    _run([entry, "lint", "output"], cwd=work, user=uid)
    if uid is not None:  # really unprivileged: a path behind a folder it may not enter is an input error
        closed = Path(tempfile.mkdtemp(prefix="gpumon-closed-"))
        try:
            (closed / "gpumon.yaml").write_text((ROOT / "gpumon.yaml").read_text())
            closed.chmod(0o700)
            proc = _run([entry, "render", str(closed / "gpumon.yaml")], cwd=work, user=uid, check=False)
            assert proc.returncode == 2 and "cannot read spec" in proc.stderr and "Permission denied" in proc.stderr
            proc = _run([entry, "lint", "--spec", "default", str(closed / "gpumon.yaml")], cwd=work, user=uid,
                        check=False)
            assert proc.returncode == 2 and "cannot read: Permission denied" in proc.stdout, proc.stdout + proc.stderr
        finally:
            shutil.rmtree(closed)


def _podman_with_base_image() -> str | None:
    podman = shutil.which("podman")
    if not podman:
        return None
    base = stages(CONTAINERFILE.read_text())[1][0][1]
    exists = subprocess.run([podman, "image", "exists", base], capture_output=True, timeout=60)
    return podman if exists.returncode == 0 else None


@pytest.mark.slow
@pytest.mark.skipif(not _podman_with_base_image(), reason="needs podman and the base image (python:3.11-slim) "
                    "present locally; the image's steps are tested without them above")
def test_the_image_builds_and_runs(tmp_path):
    podman = _podman_with_base_image()
    tag = "localhost/gpumon-test:latest"
    _run([podman, "build", "--pull=never", "-t", tag, "-f", str(CONTAINERFILE), str(ROOT)], cwd=tmp_path)
    try:
        assert _run([podman, "run", "--rm", tag, "--version"], cwd=tmp_path).stdout.startswith("gpumon ")
        user = _run([podman, "run", "--rm", "--entrypoint", "id", tag, "-u"], cwd=tmp_path).stdout.strip()
        assert user == "10001"
        (tmp_path / "gpumon.yaml").write_text((ROOT / "gpumon.yaml").read_text())
        tmp_path.chmod(0o777)
        _run([podman, "run", "--rm", "-v", f"{tmp_path}:/work", tag, "render"], cwd=tmp_path)
        _run([podman, "run", "--rm", "-v", f"{tmp_path}:/work", tag, "render", "--check"], cwd=tmp_path)
    finally:
        subprocess.run([podman, "rmi", "-f", tag], capture_output=True, timeout=120)
