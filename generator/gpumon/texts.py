"""Jinja2 templates from ``templates/``: alert annotation texts (and, later, runbook pages).

Annotation templates use ``[[ ]]`` / ``[% %]`` delimiters so that Prometheus' own ``{{ }}``
templating (``{{ $labels.Hostname }}``) passes through untouched.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import jinja2
import yaml


def templates_dir() -> Path:
    """The templates folder: ``<repo>/templates`` in a checkout, ``gpumon/templates`` when
    installed from a wheel (pyproject force-includes it there)."""
    here = Path(__file__).resolve().parent
    for candidate in (here.parent.parent / "templates", here / "templates"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("gpumon templates folder not found next to the generator package")


@lru_cache(maxsize=None)
def _annotation_env() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        variable_start_string="[[", variable_end_string="]]",
        block_start_string="[%", block_end_string="%]",
        undefined=jinja2.StrictUndefined, keep_trailing_newline=False, autoescape=False,
    )


@lru_cache(maxsize=None)
def _annotation_sources() -> dict[str, dict]:
    text = (templates_dir() / "annotations.yaml").read_text("utf-8")
    return yaml.safe_load(text)


def annotations(kind: str, **context) -> tuple[tuple[str, str], ...]:
    """Render the ``summary`` and ``description`` of alert ``kind`` from ``templates/annotations.yaml``.

    Only those two keys become annotations: a kind's ``table:`` entry is its row in the docs' alert
    tables (:mod:`gpumon.alerttable`), never rendered into a rule.

    Args:
        kind: a top-level key of annotations.yaml (e.g. ``exporter_down``).
        context: template variables (``job``, ``node``, ``metric`` ...).
    Returns:
        ((``summary``, text), (``description``, text)) with surrounding whitespace stripped.
    Raises:
        KeyError: unknown kind; jinja2.UndefinedError: a variable the template needs is missing.
    """
    out = []
    for key in ("summary", "description"):
        text = _annotation_template(kind, key).render(**context)
        out.append((key, " ".join(text.split())))
    return tuple(out)


@lru_cache(maxsize=None)
def _annotation_template(kind: str, key: str) -> jinja2.Template:
    # Compiling a template costs ~2 ms; a render fills each of them dozens of times.
    return _annotation_env().from_string(_annotation_sources()[kind][key])
