"""docs/checks/: one generated page per lint and validate check, kept in sync like `render --check`."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from gpumon import checkdocs, lint
from gpumon.checkfind import sections
from gpumon.cli import cli
from gpumon.validate import CHECKS as VALIDATE_CHECKS

ROOT = Path(__file__).resolve().parent.parent


def test_check_pages_are_up_to_date():
    stale = checkdocs.write(ROOT, check=True)
    assert not stale, f"docs/checks is stale ({', '.join(stale)}): run `make docs`"


def test_every_check_has_a_page_with_every_part():
    pages = checkdocs.pages(ROOT)
    for cid in lint.check_ids():
        page = pages[f"lint/{cid}.md"]
        for part in ("## What it checks", "## Why", "## Example", "## How to silence", "`gpumon lint tests/lint_corpus/"):
            assert part in page, (cid, part)
    for cid, module in VALIDATE_CHECKS.items():
        page = pages[f"validate/{cid}.md"]
        assert "Recorded from a real run" in page, cid
        assert all(f"`{fid}`" in page for fid in module.FINDINGS), cid


def test_list_checks_prints_whole_summaries():
    out = CliRunner().invoke(cli, ["lint", "--list-checks"]).output
    for cid, _, doc in lint.describe():
        summary = sections(doc)["summary"].replace("``", "`")
        assert f"{cid} (" in out and summary in out.replace("\n", " "), cid
    # a summary longer than one docstring line used to lose its first line
    assert "a GPU metric name that neither the spec" in out


def test_sarif_rules_carry_help_and_a_link_to_their_page(tmp_path):
    result = CliRunner().invoke(cli, ["lint", "--format", "sarif", str(ROOT / "tests/lint_corpus/rate_window.yaml")])
    rules = json.loads(result.output)["runs"][0]["tool"]["driver"]["rules"]
    rule = next(r for r in rules if r["id"] == "rate-window-too-small")
    assert "Silence:" in rule["help"]["text"]
    assert rule["helpUri"].startswith("file:///") and rule["helpUri"].endswith("/docs/checks/lint/rate-window-too-small.md")
    assert Path(rule["helpUri"][len("file://"):]).is_file()


def test_docs_url_sets_where_help_links_point(monkeypatch):
    monkeypatch.setenv("GPUMON_DOCS_URL", "https://git.example.com/sre/gpumon/blob/main/docs/checks/")
    result = CliRunner().invoke(cli, ["lint", "--format", "sarif", str(ROOT / "tests/lint_corpus/rate_window.yaml")])
    rule = json.loads(result.output)["runs"][0]["tool"]["driver"]["rules"][0]
    assert rule["helpUri"] == "https://git.example.com/sre/gpumon/blob/main/docs/checks/lint/rate-window-too-small.md"


def test_the_readme_lint_sample_counts_are_generated():
    """README's `gpumon lint output` sample states what lint read; make docs rewrites that line,
    so it must stay findable (a rewording would silently stop the regeneration)."""
    readme = (ROOT / "README.md").read_text("utf-8")
    found = checkdocs._README_LINT_INPUTS.findall(readme)
    assert len(found) == 1 and found[0] == f"inputs: {checkdocs._lint_inputs(ROOT)}"


def test_the_lint_output_samples_say_how_many_checks_run_now():
    """README.md and docs/lint.md quote `gpumon lint output` down to its tally line; a lint check
    added since made both say one check fewer than a reader gets."""
    inputs, tally = checkdocs._lint_sample(ROOT)
    assert tally.startswith("gpumon lint: ") and " checks run; " in tally
    for rel in ("README.md", "docs/lint.md"):
        text = (ROOT / rel).read_text("utf-8")
        sample = f"$ gpumon lint output\ninputs: {inputs}\nspec: gpumon.yaml\n{tally}\n"
        assert sample in text, rel
    stale = "$ gpumon lint output\ninputs: 1 files: 2 rules\nspec: gpumon.yaml\ngpumon lint: 3 checks run; 0 error\n"
    fixed = checkdocs._LINT_SAMPLE_TALLY.sub(lambda m: m[1] + tally, stale)
    assert fixed == stale.replace("gpumon lint: 3 checks run; 0 error", tally)
