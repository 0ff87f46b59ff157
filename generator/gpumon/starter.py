"""``gpumon init``: a starter spec to edit, with its JSON Schema beside it.

The starter is the bundled default spec (dcgm-exporter 4.x as shipped). Its first line is a
yaml-language-server modeline (the YAML extension of VS Code and other LSP editors reads it for
completion and checks); in the starter it points at ``./gpumon.schema.json``, the schema written
next to it, so the pair keeps working wherever it is copied (a modeline's relative path is resolved
against the YAML file's own folder).

The bundled spec links runbooks relatively (``../runbooks``, read in a git forge's file view of
output/rules/). A starter lands in someone else's repository, where that link would be dead in every
notification, so the starter carries either the absolute base given with ``--runbook-url`` or none
(alerts then carry no ``runbook_url`` annotation; the runbooks are still rendered) and a comment
saying how to set one.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlsplit

from .spec import default_spec_path, schema_text
from .writer import atomic_write

SPEC_NAME = "gpumon.yaml"
SCHEMA_NAME = "gpumon.schema.json"
MODELINE = f"# yaml-language-server: $schema=./{SCHEMA_NAME}"


#: what replaces the bundled spec's relative runbook base when no --runbook-url is given
UNSET_RUNBOOK = ("  # runbook_url: https://<your forge>/<repo>/blob/main/output/runbooks\n"
                 "  #   set an absolute base to give every alert a runbook_url annotation (<base>/<AlertName>.md);\n"
                 "  #   notifications and Grafana carry it verbatim, so a relative one is a dead link there\n")


#: the starter's header, instead of the bundled spec's (which calls itself the bundled spec and points
#: to `gpumon init`: the starter is what it writes, already the user's own file)
HEADER = ("#\n"
          "# Your gpumon spec, written by `gpumon init` from gpumon's bundled one: dcgm-exporter 4.x as shipped,\n"
          "# with the image's default field list. Edit it and keep it in your GitOps repo; `gpumon render`\n"
          "# turns it into rules, dashboards, rule tests and runbooks (in output/ beside this file).\n")


class InitError(Exception):
    """A starter file exists already, or an option is unusable (nothing was written)."""


def runbook_base(url: str) -> str:
    """``url`` without a trailing slash, checked to be an absolute http(s) URL.

    Raises:
        InitError: the URL is relative or not http(s) (a notification would carry a dead link).
    """
    try:
        parts = urlsplit(url)
    except ValueError:  # an unclosed IPv6 bracket: not a URL either
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
        raise InitError(f"--runbook-url {url!r} is not an absolute http(s) URL: Alertmanager notifications and Grafana "
                        "carry it verbatim (e.g. https://github.com/acme/gitops/blob/main/monitoring/runbooks)")
    return url.rstrip("/")


def _runbook_lines(runbook_url: str | None) -> str:
    """The ``alerts.runbook_url`` lines of the starter (JSON-quoted: a valid YAML scalar for any URL)."""
    if runbook_url is None:
        return UNSET_RUNBOOK
    return f"  runbook_url: {json.dumps(runbook_base(runbook_url))}\n"


def starter_spec(runbook_url: str | None = None) -> str:
    """The bundled default spec with its modeline pointing at the schema beside it, a header of
    its own (:data:`HEADER`) and the bundled relative runbook base replaced (see the module
    docstring).

    Raises:
        InitError: ``runbook_url`` is not an absolute http(s) URL.
        RuntimeError: the bundled spec no longer has the runbook lines this replaces (a packaging bug).
    """
    lines = default_spec_path().read_text(encoding="utf-8").splitlines(keepends=True)
    if lines and lines[0].startswith("# yaml-language-server:"):
        lines = lines[1:]
    # the bundled spec's header: its leading comment lines
    body = next((i for i, line in enumerate(lines) if not line.startswith("#")), len(lines))
    lines = [HEADER] + lines[body:]
    start = next((i for i, line in enumerate(lines) if line.startswith("  runbook_url:")), None)
    if start is None:
        raise RuntimeError("the bundled spec has no alerts.runbook_url line to replace")
    end = start + 1
    # the runbook_url_relative line and the comment lines that continue it
    while end < len(lines) and (lines[end].startswith("  runbook_url_relative:")
                                or (lines[end].startswith("   ") and lines[end].lstrip().startswith("#"))):
        end += 1
    return MODELINE + "\n" + "".join(lines[:start]) + _runbook_lines(runbook_url) + "".join(lines[end:])


def write(folder: Path, force: bool = False, runbook_url: str | None = None) -> list[Path]:
    """Write ``gpumon.yaml`` and ``gpumon.schema.json`` into ``folder`` (created if missing).

    Args:
        runbook_url: absolute base of the alerts' runbook links, or None for none.
    Returns:
        the paths written.
    Raises:
        InitError: a file exists and ``force`` is false, or ``runbook_url`` is not absolute
            (then nothing is written).
        OSError: the folder or a file cannot be written.
    """
    files = {folder / SPEC_NAME: starter_spec(runbook_url), folder / SCHEMA_NAME: schema_text()}
    existing = [str(p) for p in files if p.exists()]
    if existing and not force:
        raise InitError(f"{', '.join(existing)} {'exists' if len(existing) == 1 else 'exist'} already; "
                        "pass --force to overwrite")
    for path, text in files.items():
        atomic_write(path, text.encode("utf-8"))
    return list(files)
