"""What ``gpumon --help`` and the README say about the commands agrees with the code: which
commands can exit 3 (inconclusive), and that the README's CLI tour lists every command."""

from __future__ import annotations

import re

from click.testing import CliRunner

from gpumon.cli import cli

from .conftest import ROOT

CLI = ROOT / "generator" / "gpumon" / "cli"


def _inconclusive_commands() -> set[str]:
    """Commands that can exit 3: those that run validate's checks (its exit code is theirs)."""
    return {p.stem for p in CLI.glob("*.py") if p.stem not in ("__init__", "common")
            and re.search(r"from \.\.validate import validate\b", p.read_text())}


def test_the_commands_that_exit_3_are_validate_and_preview():
    assert _inconclusive_commands() == {"validate", "preview"}


def test_help_and_readme_name_the_commands_that_exit_3():
    wanted = _inconclusive_commands()
    line = next(x for x in CliRunner().invoke(cli, ["--help"]).output.splitlines() if x.strip().startswith("3 "))
    assert set(re.findall(r"\b(\w+)\b", line.split("(")[1].split(")")[0])) == wanted, line
    readme = (ROOT / "README.md").read_text()
    row = next(x for x in readme.splitlines() if x.startswith("| 3 |"))
    assert set(re.findall(r"`(\w+)`", row)) == wanted, row


def test_readme_cli_tour_lists_every_command():
    readme = (ROOT / "README.md").read_text()
    tour = readme.split("## A tour of the CLI", 1)[1].split("```", 2)[1]
    listed = set(re.findall(r"^gpumon (\w+)", tour, re.M))
    assert listed == set(cli.commands), sorted(set(cli.commands) ^ listed)
