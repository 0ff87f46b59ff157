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
