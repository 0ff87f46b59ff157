"""`gpumon render` writes into a folder a pull request can plant files in (issue #15, findings 1, 4
and 8): a hostile manifest never makes it delete outside the folder, a failed or killed write
leaves the old tree or the new one (never a mix), and stale temporary files are cleaned."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gpumon import writer

from .clirun import gpumon
from .conftest import ROOT



def own(rel: str, body: str) -> str:
    """``body`` as a file gpumon renders at ``rel``: with gpumon's mark (writer.carries_mark)."""
    if rel.endswith(".json"):
        return json.dumps({writer.DASHBOARD_FIELD: {"generated": f"{writer.GENERATED} from t.yaml."}, "body": body})
    if rel.endswith(".md"):
        return f"# {rel}\n\nRendered by `gpumon render` from `t.yaml`; do not edit\n{body}"
    return f"# {writer.GENERATED} from t.yaml. Do not edit.\n{body}"


def owned(files: dict[str, str]) -> dict[str, str]:
    return {rel: own(rel, body) for rel, body in files.items()}


OLD = owned({"rules/a.rules.yaml": "old a\n", "rules/b.rules.yaml": "old b\n", "runbooks/Gone.md": "old gone\n",
             "dashboards/d.json": "{}\n"})
NEW = owned({"rules/a.rules.yaml": "new a\n", "rules/b.rules.yaml": "old b\n", "runbooks/New.md": "new\n",
             "dashboards/d.json": "{\"x\": 1}\n", "tests/t.test.yaml": "t\n"})



def tree(out: Path) -> dict[str, str]:
    """Every file under ``out`` but the manifest: relative path -> text."""
    return {p.relative_to(out).as_posix(): p.read_text() for p in sorted(out.rglob("*"))
            if p.is_file() and p.name != writer.MANIFEST}


@pytest.mark.parametrize("line", ["../victim", "rules/../../victim", "/tmp/VICTIM", "victim.txt", "rules/x.sh"])
def test_hostile_manifest_line_is_an_error_and_nothing_is_removed(tmp_path, line):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    out = tmp_path / "out"
    writer.write(OLD, out)
    (out / "victim.txt").write_text("mine")
    line = line.replace("/tmp/VICTIM", str(victim))
    with (out / writer.MANIFEST).open("a") as fh:
        fh.write(line + "\n")
    number = len((out / writer.MANIFEST).read_text().splitlines())
    before = tree(out)
    with pytest.raises(writer.OutputError, match=rf"\.gpumon-files:{number}: "):
        writer.write(NEW, out)
    assert victim.read_text() == "precious" and tree(out) == before


def test_manifest_symlink_escape_is_an_error(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "x.yaml").write_text("precious")
    out = tmp_path / "out"
    writer.write({"rules/a.yaml": "a\n"}, out)
    (out / "tests").symlink_to(outside)
    with (out / writer.MANIFEST).open("a") as fh:
        fh.write("tests/x.yaml\n")
    with pytest.raises(writer.OutputError, match=r"\.gpumon-files:3: 'tests/x.yaml' leads out"):
        writer.write({"rules/a.yaml": "a\n"}, out)
    assert (outside / "x.yaml").read_text() == "precious"
    # and writing through the symlinked folder is refused as well
    with pytest.raises(writer.OutputError, match="leads out"):
        writer.diff({"tests/y.yaml": "y\n"}, out)
    assert not (outside / "y.yaml").exists()


def test_cli_names_the_manifest_line_and_exits_2(tmp_path):
    out = tmp_path / "out"
    victim = tmp_path / "victim"
    victim.write_text("precious")
    assert gpumon("render", "-o", str(out)).returncode == 0
    with (out / writer.MANIFEST).open("a") as fh:
        fh.write(f"{victim}\n")
    for extra in ([], ["--check"]):
        proc = gpumon("render", "-o", str(out), *extra)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert ".gpumon-files:" in proc.stderr and "absolute path" in proc.stderr
        assert "Traceback" not in proc.stderr and "(removed)" not in proc.stdout
    assert victim.read_text() == "precious"


def test_a_committed_output_symlink_leading_elsewhere_is_refused(tmp_path):
    """A repository can commit ``output`` as a symlink to any folder: rendering with the default
    output must not create gpumon's files there; an explicit -o (or a symlink inside the spec's
    folder) is the user's choice and is honoured."""
    repo, victim = tmp_path / "repo", tmp_path / "victim"
    repo.mkdir()
    victim.mkdir()
    (repo / "gpumon.yaml").write_text((ROOT / "gpumon.yaml").read_text())
    (repo / "output").symlink_to("../victim")
    for extra in ([], ["--check"]):
        proc = gpumon("render", *extra, cwd=repo)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert f"leads through a symlink to {victim.resolve()}" in proc.stderr and "-o" in proc.stderr
    assert list(victim.iterdir()) == []
    assert gpumon("render", "-o", str(victim), cwd=repo).returncode == 0
    assert (victim / "rules").is_dir()
    (repo / "output").unlink()
    (repo / "real").mkdir()
    (repo / "output").symlink_to("real")
    assert gpumon("render", cwd=repo).returncode == 0
    assert (repo / "real" / "rules").is_dir()


def test_check_when_a_rendered_path_is_a_directory_exits_2(tmp_path):
    out = tmp_path / "out"
    (out / "rules" / "gpumon.rules.yaml").mkdir(parents=True)
    for extra in (["--check"], []):
        proc = gpumon("render", "-o", str(out), *extra)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert "is a directory" in proc.stderr and "Traceback" not in proc.stderr


def test_failure_partway_through_the_swap_restores_the_old_tree(tmp_path, monkeypatch):
    out = tmp_path / "out"
    writer.write(OLD, out)
    before = tree(out) | {writer.MANIFEST: (out / writer.MANIFEST).read_text()}
    real = os.replace
    calls = {"n": 0}

    def flaky(src, dst):
        calls["n"] += 1
        if calls["n"] == 4:  # journal is call 1; fail on the third file swapped
            raise PermissionError(13, "Permission denied", str(dst))
        return real(src, dst)

    monkeypatch.setattr(writer.os, "replace", flaky)
    with pytest.raises(PermissionError):
        writer.write(NEW, out)
    monkeypatch.setattr(writer.os, "replace", real)
    assert tree(out) | {writer.MANIFEST: (out / writer.MANIFEST).read_text()} == before
    assert not list(out.rglob(".gpumon-*")) or [p.name for p in out.rglob(".gpumon-*")] == [writer.MANIFEST]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_folder_leaves_the_old_tree(tmp_path):
    out = tmp_path / "out"
    writer.write(OLD, out)
    before = tree(out)
    (out / "rules").chmod(0o555)
    try:
        with pytest.raises(OSError):
            writer.write(NEW, out)
    finally:
        (out / "rules").chmod(0o755)
    assert tree(out) == before


def test_staging_failure_leaves_the_old_tree(tmp_path, monkeypatch):
    """What a read-only rules/ does for a non-root user: creating a temporary file fails."""
    out = tmp_path / "out"
    writer.write(OLD, out)
    before = tree(out)
    real = writer._stage

    def fail_in_rules(path, data):
        if path.parent.name == "runbooks":
            raise PermissionError(13, "Permission denied", str(path.parent))
        return real(path, data)

    monkeypatch.setattr(writer, "_stage", fail_in_rules)
    with pytest.raises(PermissionError):
        writer.write(NEW, out)
    assert tree(out) == before


def test_stale_temp_files_of_gpumon_naming_are_cleaned(tmp_path):
    out = tmp_path / "out"
    writer.write(OLD, out)
    (out / "rules" / ".gpumon-tmp.a.rules.yaml.k3j2h1ab").write_bytes(b"")
    (out / "rules" / ".keep-me").write_text("user file")
    writer.write(NEW, out)
    assert sorted(p.name for p in (out / "rules").iterdir()) == [".keep-me", "a.rules.yaml", "b.rules.yaml"]


@pytest.mark.parametrize("name", [".a.rules.yaml.mybackup", ".gpumon-tmp.a.rules.yaml.mybackup.old",
                                  ".gpumon-tmp.someone-else.yaml.ab12cd_x", ".gpumon-tmp.a.rules.yaml.k3j2"])
def test_cleanup_leaves_user_files_that_only_look_like_temp_files(tmp_path, name):
    """A user's ``.gpumon.rules.yaml.mybackup`` beside ``gpumon.rules.yaml`` was deleted: the
    cleanup took any ``.<rendered name>.<8 characters>`` for a temporary file of gpumon's."""
    out = tmp_path / "out"
    writer.write(OLD, out)
    (out / "rules" / name).write_text("my backup")
    writer.write(NEW, out)
    assert (out / "rules" / name).read_text() == "my backup"


def test_manifest_line_naming_a_file_gpumon_never_wrote_removes_nothing(tmp_path):
    """A planted manifest line ``rules/team-b.rules.yaml`` deleted the team's own rule file (exit 0):
    a line is no proof of ownership; the content hash gpumon recorded is."""
    out = tmp_path / "out"
    writer.write(OLD, out)
    (out / "rules" / "team-b.rules.yaml").write_text("groups: []  # team b's own\n")
    for planted in ("rules/team-b.rules.yaml", "0" * 64 + "  rules/team-b.rules.yaml"):
        with (out / writer.MANIFEST).open("a") as fh:
            fh.write(planted + "\n")
        drift = writer.write(NEW, out)
        assert (out / "rules" / "team-b.rules.yaml").read_text() == "groups: []  # team b's own\n"
        assert drift.kept == ["rules/team-b.rules.yaml"] and "rules/team-b.rules.yaml" not in drift.removed
        assert "left alone" in drift.lines(applied=True)[-1]


def test_a_file_edited_after_gpumon_wrote_it_is_not_removed(tmp_path):
    out = tmp_path / "out"
    writer.write(OLD, out)
    (out / "runbooks" / "Gone.md").write_text(OLD["runbooks/Gone.md"] + "and my notes\n")
    drift = writer.write(NEW, out)
    assert drift.kept == ["runbooks/Gone.md"] and (out / "runbooks" / "Gone.md").exists()
    assert not (out / "rules" / "nothing").exists()
    # a file still as gpumon wrote it goes
    writer.write({**NEW, "runbooks/Other.md": own("runbooks/Other.md", "x\n")}, out)
    assert writer.write(NEW, out).removed == ["runbooks/Other.md"]


def test_planted_journal_cannot_delete_a_file_gpumon_never_wrote(tmp_path):
    """A planted ``.gpumon-journal`` listing ``rules/team-b.rules.yaml`` deleted it on the next run."""
    import json

    out = tmp_path / "out"
    writer.write(OLD, out)
    team = out / "rules" / "team-b.rules.yaml"
    team.write_text("team b\n")
    for remove in (["rules/team-b.rules.yaml"], {"rules/team-b.rules.yaml": "0" * 64}):
        (out / writer.JOURNAL).write_text(json.dumps({"replace": {}, "remove": remove}))
        try:
            writer.write(NEW, out)
        except writer.OutputError as exc:
            assert "not a journal gpumon wrote" in str(exc)
            (out / writer.JOURNAL).unlink()
        assert team.read_text() == "team b\n"


_KILLER = textwrap.dedent("""
    import json, os, signal, sys
    from pathlib import Path
    from gpumon import writer
    out, point, n = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    new = json.loads(sys.argv[4])
    count = {"n": 0}
    def hook(real):
        def wrapped(*a, **k):
            count["n"] += 1
            if count["n"] == n:
                os.kill(os.getpid(), signal.SIGKILL)
            return real(*a, **k)
        return wrapped
    if point == "replace":
        writer.os.replace = hook(os.replace)
    elif point == "fsync":
        writer.os.fsync = hook(os.fsync)
    else:
        writer.os.unlink = hook(os.unlink)
        Path.unlink = hook(Path.unlink)
    writer.write(new, out)
""")


@pytest.mark.parametrize("point,n", [(p, n) for p in ("fsync", "replace", "unlink") for n in range(1, 8)])
def test_sigkill_mid_write_leaves_old_or_new_never_a_mix(tmp_path, point, n):
    import json

    out = tmp_path / "out"
    writer.write(OLD, out)
    proc = subprocess.run([sys.executable, "-c", _KILLER, str(out), point, str(n), json.dumps(NEW)], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode in (0, -signal.SIGKILL), proc.stderr
    # as the next run sees it: a journal left behind is finished, then stale temp files removed
    writer.recover(out, NEW)      # the next run renders NEW: a journal may replay onto those paths
    writer.clean_stale(out, NEW | OLD)
    after = tree(out)
    assert after in (OLD, NEW), f"a mix after SIGKILL at {point} #{n}: {sorted(after)}"
    assert not [p for p in out.rglob("*") if p.name.startswith(".gpumon-") and p.name != writer.MANIFEST]
    writer.write(NEW, out)
    assert tree(out) == NEW
