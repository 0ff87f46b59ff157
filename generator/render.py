"""``gpumon render``: spec -> every output file, as text keyed by relative path.

Each renderer is a function ``(spec) -> {relative path: text}``; their results are merged. New
outputs (dashboards, rule tests, runbooks) add a function to :data:`RENDERERS`.
"""

from __future__ import annotations

from typing import Callable

from . import dashboards
from .rules import output as rule_output
from .spec import Spec

Renderer = Callable[[Spec], dict[str, str]]

RENDERERS: list[Renderer] = [rule_output.files, dashboards.files]


def render(spec: Spec) -> dict[str, str]:
    """Render every output file for ``spec``.

    Returns:
        {relative path: file text}, sorted by path.
    Raises:
        ValueError: when two renderers produce the same path (a programming error).
    """
    files: dict[str, str] = {}
    for renderer in RENDERERS:
        for path, text in renderer(spec).items():
            if path in files:
                raise ValueError(f"two renderers wrote {path}")
            files[path] = text
    return dict(sorted(files.items()))
