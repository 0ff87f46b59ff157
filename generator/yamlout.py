"""Deterministic YAML output: keys in insertion order, multi-line strings as literal blocks."""

from __future__ import annotations

import yaml


# libyaml's emitter (when PyYAML was built with it) writes the same text ~5x faster.
_Base = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _Dumper(_Base):
    """SafeDumper that never emits anchors/aliases (repeated values are written out)."""

    def ignore_aliases(self, data):  # noqa: D401 - PyYAML hook
        return True


def _str(dumper: yaml.SafeDumper, value: str):
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def dump(obj, header: str | None = None) -> str:
    """Serialise ``obj`` (dicts, lists, scalars) to YAML text.

    Args:
        obj: the document; dict order is kept.
        header: optional comment lines (without ``#``) put above the document.
    Returns:
        the YAML text, ending in a newline.
    """
    text = yaml.dump(obj, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100,
                     default_flow_style=False)
    if header:
        text = "".join(f"# {line}".rstrip() + "\n" for line in header.splitlines()) + text
    return text


def dump_all(docs: list, header: str | None = None) -> str:
    """Several YAML documents separated by ``---``."""
    parts = [dump(d) for d in docs]
    text = "---\n" + "---\n".join(parts)
    if header:
        text = "".join(f"# {line}".rstrip() + "\n" for line in header.splitlines()) + text
    return text
