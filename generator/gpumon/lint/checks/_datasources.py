"""Where a dashboard names datasources (shared by the two datasource checks; not a check)."""

from __future__ import annotations

from typing import Iterator

#: Grafana's built-in pseudo datasources (not instances that differ between servers).
BUILTIN = {"-- Grafana --", "-- Mixed --", "-- Dashboard --", "grafana", "dashboard", "mixed"}


def references(doc, pointer: str = "") -> Iterator[tuple[str, str]]:
    """``(pointer, reference)`` for every ``datasource`` value in the dashboard: the uid of an
    object reference, or the legacy name string."""
    if isinstance(doc, dict):
        for key, value in doc.items():
            here = f"{pointer}/{key}"
            if key == "datasource":
                if isinstance(value, str):
                    yield here, value
                elif isinstance(value, dict) and isinstance(value.get("uid"), str):
                    yield here + "/uid", value["uid"]
                continue
            yield from references(value, here)
    elif isinstance(doc, list):
        for i, item in enumerate(doc):
            yield from references(item, f"{pointer}/{i}")
