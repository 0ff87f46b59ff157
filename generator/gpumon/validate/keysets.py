"""A set of GPU keys written as a shared set amended by a few keys: the GPUs carrying a metric
now are the reporting GPUs less the few lacking it, and those that carried it within the
lookback are those plus the few gone since. A copy per metric holds a reference per GPU (about
2 MiB per metric at 64,000 GPUs, and a faulty fleet has several such metrics); an amended set
holds the few keys that differ."""

from __future__ import annotations

from collections.abc import Set


class Amended(Set):
    """``(base - less) | more`` without copying ``base`` (read-only; ``base`` must not change
    while this is used). Supports what sets do through :class:`collections.abc.Set`: ``in``,
    ``len``, iteration, and ``&``, ``|``, ``-`` with a set on either side (results are plain sets,
    built by iterating the other operand, or this one)."""

    __slots__ = ("base", "less", "more")

    def __init__(self, base: set, less=(), more=()):
        more = frozenset(more)
        self.base = base
        self.less = frozenset(k for k in less if k in base and k not in more)
        self.more = frozenset(k for k in more if k not in base)

    def plus(self, more) -> "Amended":
        """This set with ``more`` added (the keys seen in the lookback: now and gone since)."""
        return Amended(self.base, self.less - set(more), self.more | set(more))

    def __contains__(self, key) -> bool:
        return key in self.more or (key in self.base and key not in self.less)

    def __iter__(self):
        less = self.less
        yield from (k for k in self.base if k not in less) if less else self.base
        yield from self.more

    def __len__(self) -> int:
        return len(self.base) - len(self.less) + len(self.more)

    def __repr__(self) -> str:
        return f"Amended({len(self.base)} keys, -{len(self.less)}, +{len(self.more)})"

    @classmethod
    def _from_iterable(cls, it) -> set:
        return set(it)
