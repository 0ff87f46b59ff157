"""What the linter reads, after loading: rules, PrometheusRule objects, dashboards and the PromQL
queries found in them, each with its position in the file it came from."""

from __future__ import annotations

import json

from dataclasses import dataclass, field
from typing import Callable

from ..findings import Finding, Location
from . import promql

#: Window (seconds) that Grafana's interval macros ($__rate_interval, $__interval, interval-type
#: template variables) are replaced with before parsing. Grafana picks the real window at query
#: time, so window checks skip ranges of exactly this length.
MACRO_WINDOW = 7777
#: check id of a file that could not be read (the CLI exits 2 for it)
UNREADABLE = "input-unreadable"


@dataclass
class Query:
    """One PromQL expression: a rule's ``expr``, a panel target's ``expr`` or a template
    variable's query.

    Attributes:
        text: the PromQL that is parsed (Grafana macros and variables substituted).
        source: the text as written in the file.
        position: where the expression starts (rules) or its key (JSON), or a function giving it.
        subject: what it belongs to, e.g. ``alert GpuXidError`` or ``panel 12 "GPU Temperature"``.
        origin: ``rule``, ``panel`` or ``variable``.
        locate: maps a piece of ``text`` (a metric name, ``rate(``) to its exact position, when known.
    """

    text: str
    source: str
    position: "Location | Callable[[], Location]"
    subject: str
    origin: str
    rule: "Rule | None" = None
    dashboard: "Dashboard | None" = None
    locate: Callable[[str], Location] | None = None

    @property
    def location(self) -> Location:
        """Where the expression is; JSON positions are worked out only when a finding needs one."""
        if callable(self.position):
            self.position = self.position()
        return self.position

    @property
    def ast(self):
        """The promql-parser AST, or None on a syntax error."""
        return promql.parse(self.text)[0]

    @property
    def error(self) -> str | None:
        return promql.parse(self.text)[1]

    def where(self, snippet: str | None = None) -> Location:
        """Position of ``snippet`` inside the expression if it can be found, else of the expression."""
        if snippet and self.locate:
            return self.locate(snippet)
        return self.location


@dataclass
class RuleObject:
    """A PrometheusRule object's metadata: ``labels`` are ``metadata.labels``."""

    file: str
    name: str
    namespace: str
    labels: dict
    location: Location
    labels_location: Location | None


@dataclass
class AppliedObject:
    """A PrometheusRule, ConfigMap or GrafanaDashboard object as ``kubectl apply`` stores it:
    ``size`` is its last-applied annotation in bytes (:func:`gpumon.applysize.applied_size`)."""

    file: str
    kind: str
    name: str
    namespace: str
    size: int
    location: Location


@dataclass
class Rule:
    """One alerting or recording rule.

    Attributes:
        kind: ``alert`` or ``record``.
        name: the alert or record name.
        for_: the ``for`` text as written, None when absent.
        keys: position of each key of the rule (``expr``, ``for``, ``labels`` ...).
        annotation_locations: position of each annotation value.
    """

    file: str
    group: str
    kind: str
    name: str
    expr: Query | None
    for_: str | None
    labels: dict
    annotations: dict
    location: Location
    keys: dict = field(default_factory=dict)
    annotation_locations: dict = field(default_factory=dict)
    obj: RuleObject | None = None
    raw: dict = field(default_factory=dict)
    #: annotation key -> function mapping a piece of its text to a position
    annotation_locators: dict = field(default_factory=dict)
    #: the rule group's ``interval`` as written (None: the global evaluation interval)
    group_interval: str | None = None

    def annotation_position(self, key: str, snippet: str) -> Location:
        """Position of ``snippet`` inside annotation ``key`` (its value start if not found)."""
        locate = self.annotation_locators.get(key)
        return locate(snippet) if locate else self.annotation_locations.get(key, self.location)

    @property
    def subject(self) -> str:
        return f"{'alert' if self.kind == 'alert' else 'record'} {self.name}"


@dataclass
class Panel:
    """A dashboard panel; ``pointer`` is its JSON pointer, ``row`` the pointer of the collapsed row
    holding it (None for top-level panels)."""

    doc: dict
    pointer: str
    row: str | None

    @property
    def id(self):
        """The panel's ``id``: a number or string as written; anything else (a list or object in a
        hand-edited file) as its JSON text, so it can be compared and used as a key."""
        value = self.doc.get("id")
        if value is None or isinstance(value, (str, int, float, bool)):
            return value
        return json.dumps(value, sort_keys=True, default=str)

    @property
    def type(self) -> str:
        return str(self.doc.get("type", ""))

    @property
    def title(self) -> str:
        return str(self.doc.get("title", ""))

    @property
    def subject(self) -> str:
        return f"panel {self.id} \"{self.title}\""

    @property
    def targets(self) -> list[tuple[int, dict]]:
        """``(index, target)`` for every query target that is a JSON object."""
        targets = self.doc.get("targets")
        return [(i, t) for i, t in enumerate(targets) if isinstance(t, dict)] if isinstance(targets, list) else []


@dataclass
class Variable:
    """A template variable; ``query`` is its PromQL (inside ``label_values()``/``query_result()``)
    and ``label`` the label ``label_values`` lists, when it has them."""

    doc: dict
    pointer: str
    name: str
    type: str
    definition: str
    query: Query | None = None
    label: str | None = None

    @property
    def subject(self) -> str:
        return f"variable ${self.name}"


@dataclass
class Dashboard:
    """A Grafana dashboard (plain JSON file, or embedded in a ConfigMap / GrafanaDashboard).

    ``locate(pointer)`` gives the position of the key a JSON pointer ends at (the object's first
    key for ``""``), already shifted to the embedding file's lines.
    """

    file: str
    doc: dict
    base: str
    locate: Callable[[str], Location]
    panels: list = field(default_factory=list)
    variables: list = field(default_factory=list)
    queries: list = field(default_factory=list)

    @property
    def title(self) -> str:
        return str(self.doc.get("title", ""))

    @property
    def subject(self) -> str:
        return f"dashboard \"{self.title}\""

    def at(self, pointer: str) -> Location:
        """Location of a pointer relative to the dashboard object."""
        return self.locate(self.base + pointer)


@dataclass
class Inputs:
    """Everything loaded from the linted paths."""

    files: list = field(default_factory=list)
    rules: list = field(default_factory=list)
    objects: list = field(default_factory=list)
    #: every PrometheusRule, ConfigMap and GrafanaDashboard object, with its applied size
    applied: list = field(default_factory=list)
    dashboards: list = field(default_factory=list)
    queries: list = field(default_factory=list)
    problems: list = field(default_factory=list)
    #: files skipped as Helm/Go templates (YAML only after rendering)
    templates: list = field(default_factory=list)
    #: named files holding nothing lintable, skipped on request (``skip_other``: pre-commit names every file)
    others: list = field(default_factory=list)
    #: files holding a plain rule file's ``groups`` key (a lintable input even when the groups are empty)
    rule_files: set = field(default_factory=set)
    #: {file: [(first line, last line, {check ids})]} from ``# gpumon-lint: ignore`` comments
    ignores: dict = field(default_factory=dict)

    def ignored(self, check: str, location: Location | None) -> bool:
        """True when an ignore comment covers ``check`` at ``location``."""
        if location is None:
            return False
        for first, last, ids in self.ignores.get(location.file, ()):
            if first <= location.line <= last and (check in ids or "all" in ids):
                return True
        return False


def unreadable(file: str, line: int, col: int, message: str) -> Finding:
    """An ``input-unreadable`` error finding at ``file:line:col``: nothing in the file was checked."""
    return Finding(check=UNREADABLE, severity="error", subject=file, message=message,
                   hint="fix the file; nothing in it was checked", location=Location(file, line, col))

