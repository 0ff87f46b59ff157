"""``gpumon init``: a starter spec to edit, with its JSON Schema beside it.

The starter is the bundled default spec (dcgm-exporter 4.x as shipped). Its first line is a
yaml-language-server modeline (the YAML extension of VS Code and other LSP editors reads it for
completion and checks); in the starter it points at ``./gpumon.schema.json``, the schema written
next to it, so the pair keeps working wherever it is copied (a modeline's relative path is resolved
against the YAML file's own folder).
"""

from __future__ import annotations

from pathlib import Path

from .spec import default_spec_path, schema_text
from .writer import atomic_write

SPEC_NAME = "gpumon.yaml"
SCHEMA_NAME = "gpumon.schema.json"
MODELINE = f"# yaml-language-server: $schema=./{SCHEMA_NAME}"


class InitError(Exception):
    """A starter file exists already (nothing was written)."""


def starter_spec() -> str:
    """The bundled default spec with its modeline pointing at the schema beside it."""
    lines = default_spec_path().read_text(encoding="utf-8").splitlines(keepends=True)
    if lines and lines[0].startswith("# yaml-language-server:"):
        lines = lines[1:]
    return MODELINE + "\n" + "".join(lines)


def write(folder: Path, force: bool = False) -> list[Path]:
    """Write ``gpumon.yaml`` and ``gpumon.schema.json`` into ``folder`` (created if missing).

    Returns:
        the paths written.
    Raises:
        InitError: a file exists and ``force`` is false (then nothing is written).
        OSError: the folder or a file cannot be written.
    """
    files = {folder / SPEC_NAME: starter_spec(), folder / SCHEMA_NAME: schema_text()}
    existing = [str(p) for p in files if p.exists()]
    if existing and not force:
        raise InitError(f"{', '.join(existing)} exist(s) already; pass --force to overwrite")
    for path, text in files.items():
        atomic_write(path, text.encode("utf-8"))
    return list(files)
