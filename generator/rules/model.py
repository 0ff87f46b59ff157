"""The rule model every rule constructor returns and every writer reads."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Rule:
    """One Prometheus rule: an alerting rule (``alert`` set) or a recording rule (``record`` set).

    ``for_`` is in seconds (None for recording rules); ``labels``/``annotations`` are tuples of
    (key, value) pairs in the order they are written.
    """

    expr: str
    alert: str | None = None
    record: str | None = None
    for_: float | None = None
    labels: tuple[tuple[str, str], ...] = ()
    annotations: tuple[tuple[str, str], ...] = ()
    #: alert shape (a key of templates/annotations.yaml, e.g. ``exporter_down``); picks the
    #: runbook template. Not written to rule files.
    kind: str | None = None
    #: switched off by the spec's ``overrides`` (``disable: true``): not rendered, not tested
    disabled: bool = False

    @property
    def name(self) -> str:
        return self.alert or self.record or ""

    @property
    def label_map(self) -> dict[str, str]:
        return dict(self.labels)


@dataclass(frozen=True)
class RuleGroup:
    """A Prometheus rule group; ``interval`` in seconds (None = the global evaluation interval)."""

    name: str
    rules: tuple[Rule, ...]
    interval: float | None = None
