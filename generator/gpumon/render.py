"""``gpumon render``: spec -> every output file, as text keyed by relative path.

Each renderer is a function ``(spec, groups) -> {relative path: text}``; the rule groups are built
once (:func:`gpumon.rules.build_groups`) and handed to every renderer; their results are
merged. A new output adds a function to :data:`RENDERERS`.
"""

from __future__ import annotations

from functools import partial
from typing import Callable

from . import alertmanager, dashboards, ruletests, runbooks, sidecar, writer
from .readers.files import Limits
from .rules import RuleGroup, build_groups
from .rules import output as rule_output
from .spec import Spec

Renderer = Callable[[Spec, list[RuleGroup]], dict[str, str]]



RENDERERS: list[Renderer] = [rule_output.files, alertmanager.files, dashboards.files, ruletests.files, runbooks.files,
                             sidecar.files]


def render(spec: Spec, groups: list[RuleGroup] | None = None, *, inputs: Limits | None = None) -> dict[str, str]:
    """Render every output file for ``spec`` from its rule ``groups`` (built here when not given:
    :func:`gpumon.rules.build_groups`; a caller that built them already passes them). ``inputs``
    says how the spec's own runbook templates are read (``--follow-symlinks``, ``--max-input-mib``).

    Returns:
        {relative path: file text}, sorted by path.
    Raises:
        ValueError: when two renderers produce the same path, or one a path or content the writer
            would not remove later (programming errors).
    """
    files: dict[str, str] = {}
    groups = build_groups(spec) if groups is None else groups
    for renderer in RENDERERS:
        if renderer is runbooks.files and inputs is not None:
            renderer = partial(runbooks.files, limits=inputs)
        for path, text in renderer(spec, groups).items():
            if path in files:
                raise ValueError(f"two renderers wrote {path}")
            if not writer.is_own_path(path):
                # the writer removes only paths of this shape (a manifest is untrusted input)
                raise ValueError(f"a renderer produced {path!r}, outside writer.OWN_PATH")
            if not writer.carries_mark(path, text.encode("utf-8")):
                # the writer removes only files that say gpumon generated them
                raise ValueError(f"a renderer produced {path!r} without gpumon's mark (writer.carries_mark)")
            files[path] = text
    return dict(sorted(files.items()))
