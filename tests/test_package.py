"""gpumon as a new user gets it: the wheel built from this checkout, installed into a fresh venv,
run from an empty folder (no checkout on the path, no spec in the folder).

The venv reuses this venv's installed dependencies through a ``.pth`` line (so no network is
needed) and gets gpumon itself only from the wheel (``pip install --no-deps``).
"""

from __future__ import annotations

import filecmp
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


def _run(args: list[str], cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=300)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, args))} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """bin/ folder of a fresh venv with the built wheel installed."""
    tmp = tmp_path_factory.mktemp("pkg")
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp / "dist"),
          str(ROOT)], cwd=tmp)
    wheel = next((tmp / "dist").glob("gpumon-*.whl"))
    venv = tmp / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=tmp)
    python = venv / "bin" / "python"
    purelib = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=tmp)
    (Path(purelib.stdout.strip()) / "gpumon-test-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-index",
          str(wheel)], cwd=tmp)
    return venv / "bin"


@pytest.fixture
def empty(tmp_path) -> Path:
    folder = tmp_path / "empty"
    folder.mkdir()
    return folder


def test_the_installed_package_is_the_wheel_not_the_checkout(installed, empty):
    where = _run([str(installed / "python"), "-c", "import gpumon; print(gpumon.__file__)"], cwd=empty)
    assert str(installed.parent) in where.stdout and str(ROOT) not in where.stdout
    assert _run([str(installed / "gpumon"), "--version"], cwd=empty).stdout.startswith("gpumon ")
    # the import package is gpumon: `python -m gpumon` is the same command
    assert _run([str(installed / "python"), "-m", "gpumon", "--version"], cwd=empty).stdout.startswith("gpumon ")
    assert _run([str(installed / "python"), "-c", "import generator"], cwd=empty, check=False).returncode == 1


def test_render_lint_validate_from_an_empty_folder(installed, empty):
    gpumon = str(installed / "gpumon")
    # no gpumon.yaml here or above: nothing is guessed, every command says how to get a spec
    for command in (["render"], ["lint", "output"], ["validate", "--prom", "http://127.0.0.1:9"]):
        proc = _run([gpumon, *command], cwd=empty, check=False)
        how = "--spec SPEC" if command[0] == "lint" else "SPEC"   # lint has no SPEC argument
        assert proc.returncode == 2 and f"no spec found: pass {how} or run `gpumon init`" in proc.stderr, proc.stderr
    assert not (empty / "output").exists()
    # `default` asks for the bundled example spec: it renders exactly what the checkout renders
    _run([gpumon, "render", "default"], cwd=empty)
    cmp = filecmp.dircmp(empty / "output", ROOT / "output")
    files = sorted(p.relative_to(empty / "output") for p in (empty / "output").rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(ROOT / "output") for p in (ROOT / "output").rglob("*") if p.is_file())
    assert all(filecmp.cmp(empty / "output" / f, ROOT / "output" / f, shallow=False) for f in files), cmp.report()
    _run([gpumon, "render", "--spec", "default", "--check"], cwd=empty)
    _run([gpumon, "lint", "--spec", "default", "output"], cwd=empty)
    # validate loads the spec and reaches for the server: a closed port is a connection error (2)
    proc = _run([gpumon, "validate", "default", "--prom", "http://127.0.0.1:9", "--timeout", "2"], cwd=empty,
                check=False)
    assert proc.returncode == 2 and "127.0.0.1:9" in proc.stdout + proc.stderr, proc.stdout + proc.stderr


def test_init_writes_a_spec_whose_modeline_finds_its_schema(installed, empty):
    gpumon = str(installed / "gpumon")
    _run([gpumon, "init", "cfg"], cwd=empty)
    spec = empty / "cfg" / "gpumon.yaml"
    modeline = spec.read_text().splitlines()[0]
    assert modeline.startswith("# yaml-language-server: $schema=")
    schema = (spec.parent / modeline.split("$schema=", 1)[1]).resolve()
    assert schema == (empty / "cfg" / "gpumon.schema.json")
    assert schema.read_text() == (ROOT / "generator/gpumon/schema/gpumon.schema.json").read_text()
    _run([gpumon, "render", "cfg/gpumon.yaml", "-o", "out"], cwd=empty)
    again = _run([gpumon, "init", "cfg"], cwd=empty, check=False)
    assert again.returncode == 2 and "--force" in again.stderr


def test_a_missing_spec_says_how_to_get_one(installed, empty):
    proc = _run([str(installed / "gpumon"), "render", "nope.yaml"], cwd=empty, check=False)
    assert proc.returncode == 2
    assert "no spec found at nope.yaml: pass SPEC or run `gpumon init`" in proc.stderr
    assert "Traceback" not in proc.stderr
