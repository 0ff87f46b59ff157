"""The spec's optional ``overrides`` section: change or switch off one generated alert.

Keyed by the generated alert name, optionally narrowed to one field (the ``dcgm_field`` label the
alert carries for a spec'd metric)::

    overrides:
      GpuUtilizationSaturated: {disable: true}
      GpuMetricMissing:
        severity: critical
        labels: {team: gpu-infra}
        fields:
          DCGM_FI_DEV_SM_CLOCK: {for: 15m, annotations: {playbook: https://wiki.example/sm-clock}}

Settings: ``disable``, ``severity``, ``for``, extra ``labels`` and ``annotations``; a field's
settings win over the alert's (labels and annotations merge, the field's key winning). The rule
constructors apply them (:func:`generator.rules.common.alert`), so the rule files, runbooks and the
generated promtool tests read the same overridden rules; disabled rules are dropped from the
groups and from every test expectation.

Values are literal text: Prometheus expands rule labels and annotations as Go templates, so the
spec refuses ``{{`` and ``}}`` in every string (:mod:`generator.specbounds`), and the YAML writer
quotes what YAML needs. Mapped by the spec loader (:func:`from_plain`); the schema checks shapes,
patterns and lengths, :func:`problems` checks names against the alerts the rule builder generates
for the spec. This
module does not import the spec or rule modules at import time (the spec imports it).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from .durations import parse_duration

if TYPE_CHECKING:  # the spec module imports this one
    from .spec import Spec

#: labels an override cannot set: Prometheus sets ``alertname``; ``severity`` has its own key;
#: ``dcgm_field`` names the field the alert is about (routing and the dashboards read it)
RESERVED_LABELS = frozenset({"alertname", "severity", "dcgm_field"})

@dataclass(frozen=True)
class Settings:
    """What an override changes; None/empty = unchanged. ``for_`` in seconds."""

    disable: bool | None = None
    severity: str | None = None
    for_: float | None = None
    labels: tuple[tuple[str, str], ...] = ()
    annotations: tuple[tuple[str, str], ...] = ()

    def then(self, other: "Settings") -> "Settings":
        """These settings with ``other``'s on top (labels and annotations merged by key)."""
        return Settings(
            disable=other.disable if other.disable is not None else self.disable,
            severity=other.severity or self.severity,
            for_=other.for_ if other.for_ is not None else self.for_,
            labels=tuple(sorted({**dict(self.labels), **dict(other.labels)}.items())),
            annotations=tuple({**dict(self.annotations), **dict(other.annotations)}.items()))


@dataclass(frozen=True)
class AlertOverride:
    """The override of one alert name: ``settings`` for every rule of it, ``fields`` for the rules
    about one field ((field name, settings) pairs in spec order)."""

    alert: str
    settings: Settings = Settings()
    fields: tuple[tuple[str, Settings], ...] = ()


def _settings(raw: dict) -> Settings:
    return Settings(
        disable=raw.get("disable"),
        severity=raw.get("severity"),
        for_=parse_duration(raw["for"]) if "for" in raw else None,
        labels=tuple(sorted((raw.get("labels") or {}).items())),
        annotations=tuple((raw.get("annotations") or {}).items()))


def from_plain(raw: dict | None) -> tuple[AlertOverride, ...]:
    """Model an ``overrides`` section (plain dict, already checked by the schema); () when absent."""
    return tuple(AlertOverride(alert=name, settings=_settings(body),
                               fields=tuple((f, _settings(s)) for f, s in (body.get("fields") or {}).items()))
                 for name, body in (raw or {}).items())


def resolve(spec: "Spec", alert: str, field: str | None) -> Settings | None:
    """The settings for the rule named ``alert`` about ``field`` (None: no field label), or None
    when no override names it."""
    for item in spec.overrides:
        if item.alert != alert:
            continue
        out = item.settings
        for name, settings in item.fields:
            if name == field:
                out = out.then(settings)
        return out
    return None


def catalogue(spec: "Spec") -> dict[str, list[str]]:
    """{alert name: fields its rules carry (``dcgm_field``), sorted} of every alert the rule builder
    generates for ``spec`` before overrides: the names an override may use."""
    from dataclasses import replace

    from .rules import build_groups
    from .rules.names import FIELD_LABEL

    out: dict[str, set[str]] = {}
    for group in build_groups(replace(spec, overrides=())):
        for rule in group.rules:
            if rule.alert:
                fields = out.setdefault(rule.alert, set())
                if rule.label_map.get(FIELD_LABEL):
                    fields.add(rule.label_map[FIELD_LABEL])
    return {name: sorted(fields) for name, fields in sorted(out.items())}


def problems(spec: "Spec", add: Callable[[list, str], None]) -> None:
    """Report override names that match no generated alert (or no field of it), and labels that
    would replace an identity label of the alert, by calling ``add(path, message)``; the message
    lists the valid names."""
    if not spec.overrides:
        return
    known = catalogue(spec)
    identity = set(spec.exporter.labels.identity) | set(spec.exporter.labels.node_identity)
    for item in spec.overrides:
        path = ["overrides", item.alert]
        if item.alert not in known:
            near = difflib.get_close_matches(item.alert, list(known), n=1, cutoff=0.8)
            hint = f"did you mean {near[0]!r}? " if near else ""
            add(path, f"no generated alert is called {item.alert!r}; {hint}the spec generates: {', '.join(known)}")
            continue
        for name, settings in ((None, item.settings), *item.fields):
            where = path + (["fields", name] if name else [])
            if name is not None and name not in known[item.alert]:
                valid = ", ".join(known[item.alert]) or "none (this alert is not about one field)"
                add(where, f"{item.alert} has no rule for field {name!r}; its fields: {valid}")
            for label, _ in settings.labels:
                if label in identity:
                    add(where + ["labels", label], f"{label!r} identifies the node or GPU the alert is about "
                        "(exporter.labels); an override cannot replace it")
