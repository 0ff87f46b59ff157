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
constructors apply them (:func:`gpumon.rules.common.alert`), so the rule files, runbooks and the
generated promtool tests read the same overridden rules; disabled rules are dropped from the
groups and from every test expectation.

Values are literal text: Prometheus expands rule labels and annotations as Go templates, so the
spec refuses ``{{`` and ``}}`` in every string (:mod:`gpumon.spec.bounds`), and the YAML writer
quotes what YAML needs. Mapped by the spec loader (:func:`from_plain`); the schema checks shapes,
patterns and lengths, :func:`label_problems` what the spec alone tells; the names are checked
against the alerts the rule builder generates (:func:`name_problems`, called by
:func:`gpumon.rules.build_groups`, which raises :class:`gpumon.spec.SpecError` for them, and by
the CLI right after loading the spec). This
module does not import the spec or rule modules at import time (the spec imports it).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from typing import Callable, Protocol

from .durations import parse_duration


class IdentityLabels(Protocol):
    """What :func:`label_problems` reads of the spec's ``exporter.labels`` (this module is part of
    the spec model and does not import it)."""

    @property
    def identity(self) -> tuple[str, ...]: ...

    @property
    def node_identity(self) -> tuple[str, ...]: ...


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
    about one field ((field name, settings) pairs in spec order). ``positions``: (line, column) of
    the alert's key and of each field's key in the spec file, for error messages (not compared)."""

    alert: str
    settings: Settings = Settings()
    fields: tuple[tuple[str, Settings], ...] = ()
    positions: tuple[tuple[str | None, tuple[int, int]], ...] = field(default=(), compare=False)

    def position(self, field_name: str | None = None) -> tuple[int, int]:
        """(line, column) of the alert's key, or of ``field_name``'s key under ``fields``."""
        found = dict(self.positions)
        return found.get(field_name) or found.get(None) or (1, 1)


def _settings(raw: dict) -> Settings:
    return Settings(
        disable=raw.get("disable"),
        severity=raw.get("severity"),
        for_=parse_duration(raw["for"]) if "for" in raw else None,
        labels=tuple(sorted((raw.get("labels") or {}).items())),
        annotations=tuple((raw.get("annotations") or {}).items()))


def from_plain(raw: dict | None, where: Callable[[list], tuple[int, int]] | None = None) -> tuple[AlertOverride, ...]:
    """Model an ``overrides`` section (plain dict, already checked by the schema); () when absent.
    ``where(path)`` gives the (line, column) of the key at a document path."""
    where = where or (lambda path: (1, 1))
    out = []
    for name, body in (raw or {}).items():
        fields = body.get("fields") or {}
        positions = [(None, where(["overrides", name]))]
        positions += [(f, where(["overrides", name, "fields", f])) for f in fields]
        out.append(AlertOverride(alert=name, settings=_settings(body), positions=tuple(positions),
                                 fields=tuple((f, _settings(s)) for f, s in fields.items())))
    return tuple(out)


def resolve(items: tuple[AlertOverride, ...], alert: str, field: str | None) -> Settings | None:
    """The settings ``items`` (the spec's ``overrides``) give the rule named ``alert`` about
    ``field`` (None: no field label), or None when no override names it."""
    for item in items:
        if item.alert != alert:
            continue
        out = item.settings
        for name, settings in item.fields:
            if name == field:
                out = out.then(settings)
        return out
    return None


#: a URL's scheme (RFC 3986 section 3.1: a letter, then letters, digits, "+", "-", "."), up to its colon
LINK_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")


def label_problems(items: tuple[AlertOverride, ...], labels: IdentityLabels, add: Callable[[list, str], None]) -> None:
    """Report labels of ``items`` (the spec's ``overrides``) that would replace an identity label of
    the alert (``labels``: the spec's ``exporter.labels``), and link annotations (a key ending in
    ``url``, as ``runbook_url``) with a scheme other than http(s) (``javascript:``, ``data:``,
    ``file:``: a script or a local file one click away in every notification), by calling
    ``add(path, message)``."""
    identity = set(labels.identity) | set(labels.node_identity)
    for item in items:
        for name, settings in ((None, item.settings), *item.fields):
            where = ["overrides", item.alert] + (["fields", name] if name else [])
            for label, _ in settings.labels:
                if label in identity:
                    add(where + ["labels", label], f"{label!r} identifies the node or GPU the alert is about "
                        "(exporter.labels); an override cannot replace it")
            for key, value in settings.annotations:
                scheme = LINK_SCHEME.match(value) if key.lower().endswith("url") else None
                if scheme and scheme.group(1).lower() not in ("http", "https"):
                    add(where + ["annotations", key], f"{key} {value!r} has the scheme {scheme.group(1)!r}; "
                        "notifications and Grafana show it as a link: use http(s) or a relative path")


def name_problems(items: tuple[AlertOverride, ...], known: dict[str, list[str]]) \
        -> list[tuple[AlertOverride, str | None, str]]:
    """Override names that match no generated alert, or no field of it.

    Args:
        items: the spec's ``overrides``.
        known: {alert name: its fields} the rule builder generates for the spec without overrides
            (:func:`gpumon.rules.alert_catalogue`).
    Returns:
        (override, field name or None, message) for each, the message listing the valid names.
    """
    out = []
    for item in items:
        if item.alert not in known:
            near = difflib.get_close_matches(item.alert, list(known), n=1, cutoff=0.8)
            hint = f"did you mean {near[0]!r}? " if near else ""
            out.append((item, None, f"no generated alert is called {item.alert!r}; {hint}the spec generates: "
                        f"{', '.join(known)}"))
            continue
        for name, _ in item.fields:
            if name not in known[item.alert]:
                valid = ", ".join(known[item.alert]) or "none (this alert is not about one field)"
                out.append((item, name, f"{item.alert} has no rule for field {name!r}; its fields: {valid}"))
    return out
