"""gpumon replaces only files it owns: a planted journal cannot swap a file it never wrote, a
hand-written file at a path gpumon renders is refused (not overwritten), and a FIFO, device or
socket at a rendered path is refused instead of hanging the render."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from gpumon import writer

from .clirun import gpumon
from .conftest import ROOT
from .test_writes import NEW, OLD, tree

TEAM_B = "groups: []  # team b's own\n"
EVIL = "groups: [EVIL]\n"


def _plant_journal(out: Path, rel: str, tmp_name: str) -> None:
    (out / rel).parent.mkdir(parents=True, exist_ok=True)
    ((out / rel).parent / tmp_name).write_text(EVIL)
    (out / writer.JOURNAL).write_text(json.dumps({"replace": {rel: tmp_name}, "remove": {}}))


def test_a_planted_journal_cannot_replace_a_file_gpumon_never_wrote(tmp_path):
    out = tmp_path / "out"
    writer.write(OLD, out)
    (out / "rules/team-b.rules.yaml").write_text(TEAM_B)
    _plant_journal(out, "rules/team-b.rules.yaml", ".gpumon-tmp.team-b.rules.yaml.abcdefgh")
    with pytest.raises(writer.OutputError, match="would replace 'rules/team-b.rules.yaml'"):
        writer.write(NEW, out)
    assert (out / "rules/team-b.rules.yaml").read_text() == TEAM_B
    assert tree(out)["rules/a.rules.yaml"] == OLD["rules/a.rules.yaml"], "nothing written"


def test_a_planted_journal_through_the_cli_is_exit_2(tmp_path):
    out = tmp_path / "oj"
    assert gpumon("render", "gpumon.yaml", "-o", str(out)).returncode == 0
    (out / "rules/team-b.rules.yaml").write_text(TEAM_B)
    _plant_journal(out, "rules/team-b.rules.yaml", ".gpumon-tmp.team-b.rules.yaml.abcdefgh")
    ran = gpumon("render", "gpumon.yaml", "-o", str(out))
    assert ran.returncode == 2 and "would replace 'rules/team-b.rules.yaml'" in ran.stderr, ran.stderr
    assert (out / "rules/team-b.rules.yaml").read_text() == TEAM_B


def test_a_journal_temp_file_must_be_named_for_its_target(tmp_path):
    out = tmp_path / "out"
    writer.write(OLD, out)
    _plant_journal(out, "rules/a.rules.yaml", ".gpumon-tmp.b.rules.yaml.abcdefgh")
    with pytest.raises(writer.OutputError, match="not a journal gpumon wrote"):
        writer.recover(out, OLD)
    assert (out / "rules/a.rules.yaml").read_text() == OLD["rules/a.rules.yaml"]


def test_a_journal_may_still_finish_a_swap_onto_a_path_gpumon_wrote(tmp_path):
    out = tmp_path / "out"
    writer.write(OLD, out)
    _plant_journal(out, "rules/a.rules.yaml", ".gpumon-tmp.a.rules.yaml.abcdefgh")
    assert writer.recover(out) is True      # listed in the manifest, unchanged since gpumon wrote it
    assert (out / "rules/a.rules.yaml").read_text() == EVIL


def test_a_hand_written_file_at_a_rendered_path_is_refused_not_overwritten(tmp_path):
    out = tmp_path / "out"
    (out / "rules").mkdir(parents=True)
    (out / "rules/gpumon.rules.yaml").write_text(TEAM_B)
    for args in ((), ("--check",)):
        ran = gpumon("render", "gpumon.yaml", "-o", str(out), *args)
        assert ran.returncode == 2, ran.stderr
        assert "gpumon.rules.yaml: exists but gpumon did not write it" in ran.stderr
    assert (out / "rules/gpumon.rules.yaml").read_text() == TEAM_B
    assert not (out / writer.MANIFEST).exists()


def test_a_file_gpumon_wrote_is_replaced_even_once_edited(tmp_path):
    out = tmp_path / "out"
    assert gpumon("render", "gpumon.yaml", "-o", str(out)).returncode == 0
    (out / "rules/gpumon.rules.yaml").write_text(TEAM_B)      # in the manifest: gpumon's path and file
    assert gpumon("render", "gpumon.yaml", "-o", str(out)).returncode == 0
    assert (out / "rules/gpumon.rules.yaml").read_text().startswith(f"# {writer.GENERATED}")


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _socket(path: Path) -> None:
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(path))
    sock.close()


@pytest.mark.parametrize("make, kind", [(_fifo, "a FIFO"), (_socket, "a socket")])
@pytest.mark.parametrize("check", [True, False])
def test_a_special_file_at_a_rendered_path_is_refused_without_hanging(tmp_path, make, kind, check):
    out = tmp_path / "out"
    (out / "rules").mkdir(parents=True)
    make(out / "rules/gpumon.rules.yaml")
    # a separate process with a timeout: a FIFO would block the open for ever
    proc = subprocess.run([sys.executable, "-m", "gpumon", "render", "gpumon.yaml", "-o", str(out),
                           *(["--check"] if check else [])], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "generator"), str(ROOT)])})
    assert proc.returncode == 2, proc.stderr
    assert f"is {kind}" in proc.stderr and "Traceback" not in proc.stderr


def test_a_fifo_journal_or_manifest_is_refused(tmp_path):
    out = tmp_path / "out"
    writer.write(OLD, out)
    (out / writer.MANIFEST).unlink()
    os.mkfifo(out / writer.MANIFEST)
    with pytest.raises(writer.OutputError, match="not a regular file"):
        writer.write(NEW, out)
    (out / writer.MANIFEST).unlink()
    os.mkfifo(out / writer.JOURNAL)
    with pytest.raises(writer.OutputError, match="a FIFO"):
        writer.write(NEW, out)
