"""Facts several validate checks read: the exporter job's targets (:mod:`.targetfacts`), the GPU
inventory (:mod:`.inventoryfacts`, its queries in :mod:`.inventoryqueries`), which source serves
each GPU (:mod:`.sourcefacts`) and the loaded rule groups. Each is computed on first use by the
run context (:class:`~gpumon.validate.base.Context`
exposes them as ``ctx.targets``, ``ctx.inventory``, ``ctx.rule_groups``) and then shared, so a
check gives the same findings whether it runs alone (``--checks presence``) or after the others.

Facts are values; checks never change them. This module does not import the context (the context
imports it); ``ctx`` below is the run context.
"""

from __future__ import annotations

from ..promapi import Answer, PromError
# the inventory, targets and sources facts live in their own modules; read through this one
from .inventoryfacts import Inventory, _lacking, inventory  # noqa: F401
from .inventoryqueries import (DETAIL_CHARS, LEGACY_FIELD, LEGACY_NAME, STATE, _detail_queries,  # noqa: F401
                               _shard_matchers, gaps_query, gone_query, inventory_queries, last_seen_query, node_count_query,
                               reporting_query, seen_query)
from .gpus import other_spelling  # noqa: F401  (checks import it from here)
from .sourcefacts import Sources, sources  # noqa: F401
from .targetfacts import Target, Targets, not_up, seconds, targets  # noqa: F401


def loaded_groups(answer: "Answer | PromError") -> dict[str, list[dict]] | None:
    """``{group name: its rules}`` from a ``/api/v1/rules`` answer (groups of one name from several
    files merged), None when the query failed."""
    if isinstance(answer, PromError):
        return None
    out: dict[str, list[dict]] = {}
    for group in answer.data or []:
        out.setdefault(group.get("name", ""), []).extend(group.get("rules") or [])
    return out
