"""The rule model every rule constructor returns and every writer reads, and its rule-file form
(:func:`rule_dict`, :func:`group_dict`)."""

from __future__ import annotations

from dataclasses import dataclass

from ..durations import format_duration


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


def rule_dict(rule: Rule) -> dict:
    """One rule as Prometheus' rule-file format writes it (key order: alert/record, expr, for,
    labels, annotations)."""
    out: dict = {"alert": rule.alert} if rule.alert else {"record": rule.record}
    out["expr"] = rule.expr + ("\n" if "\n" in rule.expr else "")
    if rule.alert and rule.for_ is not None:
        out["for"] = format_duration(rule.for_)
    if rule.labels:
        out["labels"] = dict(rule.labels)
    if rule.annotations:
        out["annotations"] = dict(rule.annotations)
    return out


def group_dict(group: RuleGroup) -> dict:
    """One rule group as a dict (``interval`` only when the group sets one)."""
    out: dict = {"name": group.name}
    if group.interval:
        out["interval"] = format_duration(group.interval)
    out["rules"] = [rule_dict(r) for r in group.rules]
    return out
