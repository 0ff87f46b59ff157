"""The gpumon spec: YAML on disk -> validated, immutable model every renderer and check uses.

A spec file is checked against the JSON Schema shipped in ``generator/gpumon/schema/gpumon.schema.json``
and then against rules a schema cannot express (duplicate metrics, ranges, intervals). Every
problem is reported at once as ``FILE:LINE:COL: path.to.key: message``; loading never raises
anything but :class:`SpecError`.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
from dataclasses import dataclass, field
from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from . import kube, sidecarspec, sourcepresets, specbounds
from .alertnames import builtin_alerts
from .durations import format_duration, parse_duration
from .fields import known_fields
from .kube import Kubernetes
from . import overrides as alert_overrides
from .sidecarspec import TextfileSidecar

#: Labels that change with restarts or with ``honor_labels`` and must never identify a GPU.
VOLATILE_LABELS = ("instance", "pod", "namespace", "container", "service", "endpoint")

#: DCGM blank-value base for FP64 fields (2^47); INT64 blanks (>= 9223372036854775792) are larger.
#: Source: DCGM ``dcgm_structs.h`` (DCGM_FP64_BLANK, DCGM_INT64_BLANK); a value >= this is a
#: "blank / not found / not supported / no permission" code, not a reading.
DCGM_BLANK_MIN = 140737488355328

#: bounds on the document itself (issue #15, finding 5): a spec is a few hundred lines; these stop
#: a YAML alias bomb (aliases expanding to millions of nodes) or deep nesting before they cost much
MAX_SPEC_BYTES = 1 << 20
MAX_NODES = 50_000
MAX_DEPTH = 32


@dataclass(frozen=True)
class Problem:
    """One spec error: where (file, 1-based line and column, JSON path) and what."""

    file: str
    line: int
    column: int
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}: {self.path or '<root>'}: {self.message}"


class SpecError(Exception):
    """Raised when a spec cannot be loaded; ``problems`` lists every error found, in file order."""

    def __init__(self, problems: list[Problem], warnings: list[Problem] | tuple[Problem, ...] = ()):
        self.problems = sorted(problems, key=lambda p: (p.file, p.line, p.column, p.path))
        #: the warnings the spec has besides (an uncatalogued field name may be the typo behind an
        #: error), so a user sees both in one round
        self.warnings = tuple(warnings)
        super().__init__("\n".join(str(p) for p in self.problems))


@dataclass(frozen=True)
class Threshold:
    """A bad-value threshold: the value is bad when ``value <op> threshold`` for ``for_`` seconds."""

    alert: str
    severity: str
    op: str
    value: float
    for_: float
    summary: str | None = None
    #: counters: compare ``rate(...[rate])`` (seconds), the per-second rate, instead of the value
    rate: float | None = None


#: default XID policy (sources: NVIDIA/DCGM#227, NVIDIA/DCGM#263, NVIDIA/go-dcgm#115): codes that
#: mean the GPU needs attention page critical; 13, 31, 43 are usually the application's fault
XID_CRITICAL = (48, 63, 64, 74, 79, 92, 94, 95, 119, 120)
XID_INFO = (13, 31, 43)


@dataclass(frozen=True)
class XidPolicy:
    """Which XID codes alert at which severity; ``other`` is the severity of unlisted codes
    ("ignore": none). An alert resolves once no new XID was seen for ``window`` seconds."""

    window: float = 900.0
    critical: tuple[int, ...] = XID_CRITICAL
    warning: tuple[int, ...] = ()
    info: tuple[int, ...] = XID_INFO
    ignore: tuple[int, ...] = ()
    other: str = "warning"

    def codes(self, severity: str) -> tuple[int, ...]:
        return getattr(self, severity)


@dataclass(frozen=True)
class Source:
    """One alternative series for a metric's reading, used where the primary series is absent
    (issue 13). Every field is resolved by the loader (presets and defaults applied).

    ``job`` is the source's job label; ``gpu``/``node``/``gpu_index`` name the source's labels
    holding each identity of :class:`Labels` (``node`` = ``instance`` means the target's instance
    without its port; ``gpu_index`` None = the source has none). ``gpu_prefix`` (keep/add/strip)
    turns its GPU id into the exporter's ``GPU-…`` UUID form. ``convert`` is (``*`` or ``/``,
    number) from ``unit`` to the metric's unit (:func:`gpumon.sourcepresets.conversion`).
    ``label`` is the ``source`` label value on the normalized series.
    """

    series: str
    label: str
    job: str
    gpu: str
    node: str
    unit: str
    gpu_index: str | None = None
    gpu_prefix: str = "keep"
    convert: tuple[str, float] = ("*", 1.0)
    preset: str | None = None


@dataclass(frozen=True)
class Metric:
    """One DCGM field the fleet reports, as the spec describes it.

    ``range_min``/``range_max`` bound plausible readings (inclusive, ``None`` = open) in ``unit``.
    ``presence`` is ``required`` (every GPU), ``optional`` (checked when present) or ``sparse``
    (exists only after an event; absence never alerts).
    """

    name: str
    kind: str
    unit: str
    presence: str
    description: str = ""
    title: str = ""
    range_min: float | None = None
    range_max: float | None = None
    thresholds: tuple[Threshold, ...] = ()
    mig: str = "device"
    frozen_check: bool = False
    legacy_names: tuple[str, ...] = ()
    alert_labels: tuple[str, ...] = ()
    xid: XidPolicy | None = None
    #: alternative series in priority order (empty: the primary ``name`` only)
    sources: tuple[Source, ...] = ()

    @property
    def required(self) -> bool:
        return self.presence == "required"

    @property
    def has_range(self) -> bool:
        return self.range_min is not None or self.range_max is not None

    @property
    def camel(self) -> str:
        """``DCGM_FI_DEV_GPU_TEMP`` -> ``GpuTemp`` (for derived alert names)."""
        base = self.name
        for prefix in ("DCGM_FI_DEV_", "DCGM_FI_PROF_", "DCGM_FI_", "DCGM_EXP_"):
            if base.startswith(prefix):
                base = base[len(prefix):]
                break
        return "".join(part.capitalize() for part in base.lower().split("_") if part)


@dataclass(frozen=True)
class Labels:
    """Label names dcgm-exporter puts on every GPU series (source: dcgm-exporter
    ``internal/pkg/rendermetrics``; ``Hostname`` became ``hostname`` in NVIDIA/dcgm-exporter#655)."""

    node: str = "Hostname"
    gpu: str = "UUID"
    gpu_index: str = "gpu"
    mig_instance: str = "GPU_I_ID"
    cluster: str | None = None
    model: str = "modelName"
    driver_version: str = "DCGM_FI_DRIVER_VERSION"

    @property
    def identity(self) -> tuple[str, ...]:
        """Labels that identify one GPU (or MIG instance), in a stable order."""
        base = (self.node, self.gpu, self.gpu_index, self.mig_instance)
        return ((self.cluster,) if self.cluster else ()) + base

    @property
    def node_identity(self) -> tuple[str, ...]:
        """Labels that identify one node."""
        return ((self.cluster,) if self.cluster else ()) + (self.node,)


@dataclass(frozen=True)
class Exporter:
    """The dcgm-exporter scrape job; intervals in seconds."""

    job: str
    scrape_interval: float = 15.0
    scrape_timeout: float = 10.0
    collect_interval: float = 30.0
    labels: Labels = field(default_factory=Labels)
    driver_version: str | None = None

    @property
    def sample_interval(self) -> float:
        """Seconds between distinct readings: max(scrape interval, collect interval)."""
        return max(self.scrape_interval, self.collect_interval)

    @property
    def min_rate_window(self) -> float:
        """Shortest window (seconds) a rate()/increase() may use: 2 x max(scrape, collect)."""
        return 2 * self.sample_interval


@dataclass(frozen=True)
class AlertSettings:
    """Alerting defaults; durations in seconds, ratios in 0..1."""

    for_: float = 300.0
    labels: tuple[tuple[str, str], ...] = ()
    #: base of runbook links; "" = alerts carry no runbook_url (the spec names no base)
    runbook_url: str = ""
    #: the spec says a relative ``runbook_url`` is meant (it resolves only in a forge's file view)
    runbook_url_relative: bool = False
    #: ``namespace`` label on every alert (the loader defaults it to the PrometheusRule's namespace)
    namespace: str | None = None
    inventory_lookback: float = 3600.0
    gap_window: float = 1800.0
    gap_min_ratio: float = 0.8
    flapping_window: float = 600.0
    flapping_min_up_ratio: float = 0.9
    frozen_window: float = 600.0
    implausible_for: float = 0.0
    scrape_slow_ratio: float = 0.8
    slow_group_interval: float = 60.0
    #: nodes (``Hostname``) and GPUs (UUID) gone on purpose (drained, decommissioned, replaced):
    #: the only way a GPU that stopped reporting stops paging without coming back
    retired_nodes: tuple[str, ...] = ()
    retired_gpus: tuple[str, ...] = ()


@dataclass(frozen=True)
class PrometheusRuleMeta:
    """Metadata of the rendered PrometheusRule object."""

    name: str = "gpumon"
    namespace: str = "monitoring"
    labels: tuple[tuple[str, str], ...] = (("release", "kube-prometheus-stack"),)


@dataclass(frozen=True)
class DashboardSettings:
    """The ``dashboards`` section: what the Grafana dashboards and their ConfigMaps look like.

    ``refresh`` and ``time_from`` are Grafana strings (``1m``, ``now-6h``); ``label`` /
    ``label_value`` select ConfigMaps for the sidecar; ``folder`` (with ``folder_annotation``)
    puts the dashboards into a Grafana folder; ``configmaps: false`` writes only the JSON files.
    ``datasource_uid`` is a datasource uid that ``gpumon lint`` accepts written literally in
    dashboards (gpumon's own dashboards always use the ``${datasource}`` variable).

    Defaults follow kube-prometheus-stack's Grafana sidecar (values ``grafana.sidecar.dashboards.label``
    = ``grafana_dashboard``, ``labelValue`` = ``"1"``), so the rendered ConfigMaps are picked up
    without changing the chart. The folder annotation defaults to the one kiwigrid/k8s-sidecar
    reads when the chart's ``folderAnnotation`` is unset (``FOLDER_ANNOTATION`` default
    ``k8s-sidecar-target-directory``).
    """

    enabled: bool = True
    title_prefix: str = ""
    tags: tuple[str, ...] = ("gpu", "dcgm")
    refresh: str = "1m"
    time_from: str = "now-6h"
    configmaps: bool = True
    namespace: str = "monitoring"
    label: str = "grafana_dashboard"
    label_value: str = "1"
    folder_annotation: str = "k8s-sidecar-target-directory"
    folder: str | None = None
    datasource_uid: str | None = None


@dataclass(frozen=True)
class Spec:
    """A loaded, validated spec: every section modelled once by the loader. Two specs are equal
    (and hash alike) exactly when every section is, so results may be cached per spec.
    ``kubernetes`` and ``textfile_sidecar`` are None when the spec has no such section."""

    path: str
    name: str
    exporter: Exporter
    alerts: AlertSettings
    prometheus_rule: PrometheusRuleMeta
    metrics: tuple[Metric, ...]
    dashboards: DashboardSettings = field(default_factory=DashboardSettings)
    kubernetes: Kubernetes | None = None
    textfile_sidecar: TextfileSidecar | None = None
    #: the ``overrides`` section (:mod:`gpumon.overrides`), in spec order
    overrides: tuple[alert_overrides.AlertOverride, ...] = ()
    #: non-fatal findings of the loader (a field outside the catalogue), in file order
    warnings: tuple[Problem, ...] = field(default=(), compare=False)

    @property
    def required_metrics(self) -> tuple[Metric, ...]:
        return tuple(m for m in self.metrics if m.presence == "required")

    @property
    def optional_metrics(self) -> tuple[Metric, ...]:
        """Tracked metrics that are not required (``presence: optional``), in spec order."""
        return tuple(m for m in self.metrics if m.presence == "optional")

    @property
    def tracked_metrics(self) -> tuple[Metric, ...]:
        """Required and optional metrics: those whose presence is recorded per GPU."""
        return tuple(m for m in self.metrics if m.presence != "sparse")

    @cached_property
    def metric_names(self) -> frozenset[str]:
        return frozenset(m.name for m in self.metrics)

    def metric(self, name: str) -> Metric | None:
        """The spec'd metric called ``name``, or None."""
        return next((m for m in self.metrics if m.name == name), None)


# --------------------------------------------------------------------------- loading


def schema() -> dict:
    """The spec's JSON Schema (draft-07) as a dict, read from the installed package."""
    return json.loads(schema_text())


def schema_text() -> str:
    """The spec's JSON Schema as shipped (``generator/gpumon/schema/gpumon.schema.json``)."""
    return resources.files("gpumon").joinpath("schema/gpumon.schema.json").read_text("utf-8")


def default_spec_path() -> Path:
    """Path of the bundled default spec: ``gpumon.yaml`` at the repository root in a checkout,
    ``gpumon/default/gpumon.yaml`` when installed from a wheel (pyproject force-includes it).

    Raises:
        FileNotFoundError: neither exists (a broken installation).
    """
    here = Path(__file__).resolve().parent
    for candidate in (here.parent.parent / "gpumon.yaml", here / "default" / "gpumon.yaml"):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError("gpumon's bundled default spec is missing from the installation")


def load_spec(path: str | Path) -> Spec:
    """Load, validate and model a spec file.

    Args:
        path: the YAML file.
    Returns:
        the :class:`Spec`.
    Raises:
        SpecError: with every problem found (unreadable file, YAML syntax, schema, semantics),
            each with file, line, column and JSON path.
    """
    name = str(path)
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_SPEC_BYTES + 1)
    except OSError as exc:
        raise SpecError([Problem(name, 1, 1, "", f"cannot read spec: {exc.strerror or exc}")]) from None
    if len(raw) > MAX_SPEC_BYTES:
        raise SpecError([Problem(name, 1, 1, "", f"spec larger than {MAX_SPEC_BYTES >> 20} MiB")])
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        col = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise SpecError([Problem(name, line, col, "", f"not UTF-8 text (byte 0x{raw[exc.start]:02x}); save the "
                                 "spec as UTF-8")]) from None
    return parse_spec(text, name)


def parse_spec(text: str, name: str = "<spec>") -> Spec:
    """Like :func:`load_spec` on a string; ``name`` is used in error positions."""
    deep = _flow_too_deep(text) or _block_too_deep(text)
    if deep:
        raise SpecError([Problem(name, deep[0], deep[1], "", f"nested more than {MAX_DEPTH} levels deep")])
    yaml = YAML(typ="rt")
    try:
        doc = yaml.load(text)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        raise SpecError([Problem(name, line, col, "", f"YAML syntax error: {exc.problem or exc}")]) from None
    except YAMLError as exc:  # the reader's errors (control characters) carry a position too
        line, col = _yaml_error_position(exc, text)
        raise SpecError([Problem(name, line, col, "", f"YAML error: {' '.join(str(exc).split())[:200]}")]) from None
    except RecursionError:
        raise SpecError([Problem(name, 1, 1, "", f"nested too deeply (at most {MAX_DEPTH} levels)")]) from None
    if not isinstance(doc, CommentedMap):
        raise SpecError([Problem(name, 1, 1, "", "the spec must be a YAML mapping (see gpumon.yaml)")])
    try:
        plain = _to_plain(doc, _Budget())
    except _TooBig as exc:
        raise SpecError([Problem(name, exc.line, exc.column, _format_path(exc.path), str(exc))]) from None
    # Report schema and semantic problems together, so a user fixes everything in one round.
    problems = _schema_problems(doc, plain, name) + _semantic_problems(doc, plain, name)
    warnings = _field_warnings(doc, plain, name)
    if problems:
        raise SpecError(_dedupe(problems), warnings)
    spec = _build(plain, name, lambda path: _position(doc, path, key_of_last=True))
    late: list[Problem] = []
    alert_overrides.label_problems(spec.overrides, spec.exporter.labels, lambda path, msg: late.append(
        Problem(name, *_position(doc, path, key_of_last=True), _format_path(path), msg)))
    if late:
        raise SpecError(late, warnings)
    # override names are checked when the rules are built (gpumon.rules.build_groups)
    return dataclasses.replace(spec, warnings=tuple(warnings))


def _field_warnings(doc: CommentedMap, plain: dict, name: str) -> list[Problem]:
    """A ``DCGM_*`` metric outside gpumon's field catalogue (:mod:`gpumon.fields`) is rendered
    with the spec's own ``kind:`` and ``unit:`` (both required), but may be a typo: warn, naming
    the closest catalogued field."""
    out = []
    known = known_fields()
    metrics = plain.get("metrics")
    for i, metric in enumerate(metrics if isinstance(metrics, list) else []):
        mname = metric.get("name") if isinstance(metric, dict) else None
        if not isinstance(mname, str) or not mname.startswith("DCGM_") or mname in known:
            continue
        hint = difflib.get_close_matches(mname, list(known), n=1, cutoff=0.8)
        line, col = _position(doc, ["metrics", i, "name"])
        out.append(Problem(name, line, col, f"metrics[{i}].name",
                           f"warning: {mname!r} is not in gpumon's DCGM field catalogue (DCGM 2.4.7 to 4.6.0, "
                           f"dcgm-exporter 2.4.7 to 4.8.2); its kind: {metric.get('kind')} and unit: "
                           f"{metric.get('unit')} are taken as written" + (f"; did you mean {hint[0]!r}?" if hint else "")))
    return out


class _TooBig(Exception):
    def __init__(self, message: str, path: list, line: int, column: int):
        super().__init__(message)
        self.path, self.line, self.column = path, line, column


@dataclass
class _Budget:
    nodes: int = 0


def _flow_too_deep(text: str) -> tuple[int, int] | None:
    """(line, column) where ``[``/``{`` flow collections nest past :data:`MAX_DEPTH`, or None.
    The YAML parser recurses once per level and takes seconds on thousands of them, so this is
    checked on the text first (quoted scalars skipped; a bare scalar with 32 open brackets is not
    a plausible spec value)."""
    depth, quote, line, col = 0, "", 1, 0
    for ch in text:
        col += 1
        if ch == "\n":
            line, col = line + 1, 0
            if quote == "'":
                continue
        if quote:
            if ch == quote:
                quote = ""
            continue
        if ch in "'\"" and depth:
            quote = ch
        elif ch in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return line, col
        elif ch in "]}":
            depth = max(0, depth - 1)
    return None


#: block-style levels the text scan allows (a multi-line string indents freely, so it is looser
#: than MAX_DEPTH, which the loaded document is held to with the key's position)
_BLOCK_SCAN_DEPTH = 4 * MAX_DEPTH


def _block_too_deep(text: str) -> tuple[int, int] | None:
    """(line, column) where block-style YAML (indentation and ``- `` entries) nests past
    :data:`_BLOCK_SCAN_DEPTH` levels, or None: the parser recurses per level and thousands of
    them exhaust Python's stack, an error that carries no position. Each line closes the open
    levels indented at or beyond it and opens one, plus one per leading ``- ``."""
    stack: list[int] = []
    for number, line in enumerate(text.split("\n"), 1):
        body = line.lstrip(" ")
        if not body or body.startswith("#"):
            continue
        col = len(line) - len(body)
        while stack and stack[-1] >= col:
            stack.pop()
        stack.append(col)
        while len(stack) <= _BLOCK_SCAN_DEPTH and (body.startswith("- ") or body == "-"):
            rest = body[2:].lstrip(" ")
            col += len(body) - len(rest)
            body = rest
            stack.append(col)
        if len(stack) > _BLOCK_SCAN_DEPTH:
            return number, col + 1
    return None


def _yaml_error_position(exc: Exception, text: str) -> tuple[int, int]:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    if mark is not None:
        return mark.line + 1, mark.column + 1
    pos = getattr(exc, "position", None)
    if isinstance(pos, int):
        return text.count("\n", 0, pos) + 1, pos - (text.rfind("\n", 0, pos) + 1) + 1
    return 1, 1


def _to_plain(node: Any, budget: _Budget, path: list | None = None, depth: int = 0) -> Any:
    """Plain dicts/lists/scalars; raises :class:`_TooBig` past :data:`MAX_DEPTH` levels or
    :data:`MAX_NODES` nodes (aliases count each time they are expanded)."""
    path = path or []
    budget.nodes += 1
    if budget.nodes > MAX_NODES or depth > MAX_DEPTH:
        too = (f"more than {MAX_NODES} values (YAML aliases expand to copies)" if budget.nodes > MAX_NODES
               else f"nested more than {MAX_DEPTH} levels deep")
        lc = getattr(node, "lc", None)
        line, col = (lc.line + 1, lc.col + 1) if lc is not None and lc.line is not None else (1, 1)
        raise _TooBig(f"the spec is {too}", path, line, col)
    if isinstance(node, dict):
        return {str(k): _to_plain(v, budget, path + [str(k)], depth + 1) for k, v in node.items()}
    if isinstance(node, list):
        return [_to_plain(v, budget, path + [i], depth + 1) for i, v in enumerate(node)]
    if isinstance(node, bool) or node is None or isinstance(node, (int, float, str)):
        return node
    return str(node)


def _position(doc: Any, path: list, key_of_last: bool = False) -> tuple[int, int]:
    """1-based (line, column) of the node at ``path``; of the key itself when ``key_of_last``."""
    node, line, col = doc, 0, 0
    for i, step in enumerate(path):
        last = i == len(path) - 1
        try:
            if isinstance(node, CommentedMap) and step in node:
                line, col = node.lc.key(step) if (last and key_of_last) else node.lc.value(step)
                node = node[step]
            elif isinstance(node, CommentedSeq) and isinstance(step, int) and step < len(node):
                line, col = node.lc.item(step)
                node = node[step]
            else:
                break
        except (KeyError, TypeError, AttributeError):
            break
    else:
        if isinstance(node, (CommentedMap, CommentedSeq)) and not path:
            line, col = 0, 0
    return line + 1, col + 1


def _format_path(path: list) -> str:
    out = ""
    for step in path:
        out += f"[{step}]" if isinstance(step, int) else (f".{step}" if out else str(step))
    return out


def _schema_problems(doc: CommentedMap, plain: dict, name: str) -> list[Problem]:
    validator = jsonschema.Draft7Validator(schema())
    problems = []
    for err in validator.iter_errors(plain):
        problems.extend(_explain(err, doc, name))
    return problems


def _explain(err: jsonschema.ValidationError, doc: CommentedMap, name: str) -> list[Problem]:
    path = list(err.absolute_path)
    if err.validator == "additionalProperties":
        allowed = sorted(err.schema.get("properties", {}))
        extra = sorted(set(err.instance) - set(allowed)) if isinstance(err.instance, dict) else []
        out = []
        for key in extra:
            hint = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
            msg = f"unknown key {key!r}"
            msg += f"; did you mean {hint[0]!r}?" if hint else f"; allowed keys: {', '.join(allowed)}"
            line, col = _position(doc, path + [key], key_of_last=True)
            out.append(Problem(name, line, col, _format_path(path + [key]), msg))
        return out
    if err.validator == "required":
        line, col = _position(doc, path)
        return [Problem(name, line, col, _format_path(path), err.message.replace("'", "", 0))]
    if err.validator == "enum":
        allowed = err.validator_value
        hint = difflib.get_close_matches(str(err.instance), [str(a) for a in allowed], n=1, cutoff=0.5)
        msg = f"{err.instance!r} is not one of {', '.join(map(str, allowed))}"
        if hint:
            msg += f"; did you mean {hint[0]!r}?"
        line, col = _position(doc, path)
        return [Problem(name, line, col, _format_path(path), msg)]
    if err.validator == "pattern" and "duration" in json.dumps(err.schema.get("description", "")).lower():
        msg = f"{err.instance!r} is not a Prometheus duration (use e.g. 30s, 5m, 1h)"
    else:
        msg = err.message
    line, col = _position(doc, path)
    return [Problem(name, line, col, _format_path(path), msg)]


def _dedupe(problems: list[Problem]) -> list[Problem]:
    seen, out = set(), []
    for p in problems:
        if (p.line, p.column, p.path, p.message) not in seen:
            seen.add((p.line, p.column, p.path, p.message))
            out.append(p)
    return out


def _duration_or_none(value: Any) -> float | None:
    try:
        return parse_duration(value) if isinstance(value, str) else None
    except ValueError:
        return None


def _semantic_problems(doc: CommentedMap, plain: dict, name: str) -> list[Problem]:
    """Checks a schema cannot express. Runs on documents that may also have schema errors, so
    every access is type-guarded."""
    out: list[Problem] = []

    def add(path: list, msg: str) -> None:
        line, col = _position(doc, path)
        out.append(Problem(name, line, col, _format_path(path), msg))

    exp = plain.get("exporter") if isinstance(plain.get("exporter"), dict) else {}
    interval_text = exp.get("scrape_interval", format_duration(Exporter.scrape_interval))
    interval = _duration_or_none(interval_text)
    timeout = _duration_or_none(exp.get("scrape_timeout", format_duration(Exporter.scrape_timeout)))
    if interval is not None and timeout is not None and timeout > interval:
        add(["exporter", "scrape_timeout"], f"scrape_timeout ({format_duration(timeout)}) must not exceed "
            f"scrape_interval ({interval_text}); Prometheus rejects such a scrape config")
    labels = exp.get("labels") if isinstance(exp.get("labels"), dict) else {}
    for key, value in labels.items():
        if value in VOLATILE_LABELS or (isinstance(value, str) and value.startswith("exported_")):
            add(["exporter", "labels", key], f"{value!r} changes on restarts and with honor_labels; "
                "it must not identify a node or GPU (use Hostname/hostname, UUID, gpu, GPU_I_ID)")
    seen: dict[str, int] = {}
    metrics = plain.get("metrics") if isinstance(plain.get("metrics"), list) else []
    for i, metric in enumerate(metrics):
        if not isinstance(metric, dict):
            continue
        mname = metric.get("name")
        if mname in seen:
            add(["metrics", i, "name"], f"duplicate metric {mname!r} (first at metrics[{seen[mname]}])")
        seen.setdefault(mname, i)
        rng = metric.get("range")
        if (isinstance(rng, list) and len(rng) == 2 and all(isinstance(v, (int, float)) for v in rng)
                and rng[0] > rng[1]):
            add(["metrics", i, "range"], f"range minimum {rng[0]} is above its maximum {rng[1]}")
        elif (metric.get("kind") == "counter" and isinstance(rng, list) and len(rng) == 2
              and isinstance(rng[0], (int, float)) and not isinstance(rng[0], bool) and rng[0] > 0):
            # a counter starts again at 0 whenever the exporter or DCGM restarts: every restart
            # would read as implausible, on every GPU of the node at once (found by the fuzzer)
            add(["metrics", i, "range", 0], f"a counter's range cannot start above 0 ({rng[0]}): counters restart "
                "from 0 with the exporter, and every restart would read as implausible")
        if (metric.get("kind") == "counter" and isinstance(rng, list) and len(rng) == 2
                and isinstance(rng[1], (int, float)) and not isinstance(rng[1], bool)):
            # a counter's total only grows while the GPU works (energy: 18,000,000 mJ a minute at
            # 300 W): any maximum is crossed by a healthy GPU in time, and the whole fleet then
            # reads as implausible (found by the spec fuzzer: [0, 5] on the energy counter)
            add(["metrics", i, "range", 1], f"a counter's range has no maximum ({rng[1]}): its total grows for as "
                "long as the exporter runs, so every healthy GPU would cross it; use null, and bound its "
                "per-second rate with a threshold (`rate: 5m`)")
        if metric.get("frozen_check") and metric.get("kind") != "counter":
            add(["metrics", i, "frozen_check"], "frozen_check needs kind: counter (it checks that the counter increases)")
        elif metric.get("frozen_check") and any(
                isinstance(t, dict) and "rate" in t and t.get("op") == ">" and t.get("value") == 0
                for t in (metric.get("thresholds") if isinstance(metric.get("thresholds"), list) else [])):
            # frozen_check says a healthy counter rises; `> 0` on its rate pages whenever it does
            add(["metrics", i, "frozen_check"], "frozen_check expects this counter to rise on a healthy GPU, but a "
                "rate threshold > 0 pages whenever it rises; raise the threshold or drop frozen_check")
        _rate_problems(metric, i, add, interval, _duration_or_none(exp.get("collect_interval", format_duration(Exporter.collect_interval))))
        _threshold_problems(metric, i, add)
        _xid_problems(metric, i, add)
        _source_problems(metric, i, add, exp)
    _alert_name_problems(metrics, add)
    _legacy_name_problems(metrics, add)
    _shared_source_problems(metrics, add, exp)
    _flapping_problems(plain, add)
    _runbook_problems(plain.get("alerts") if isinstance(plain.get("alerts"), dict) else {}, add)
    if metrics and all(isinstance(m, dict) and m.get("presence") in ("optional", "sparse") for m in metrics):
        add(["metrics"], "no metric has presence: required; the GPU inventory, coverage and presence alerts are "
            "built from the required fields (issue #15: such a spec rendered empty PromQL)")
    kube.problems(plain, add)
    sidecarspec.problems(plain, add)
    specbounds.problems(plain, add, {f.name: f.default for f in dataclasses.fields(Labels)})
    return out


def _rate_problems(metric: dict, i: int, add, scrape: float | None, collect: float | None) -> None:
    """Thresholds on a counter compare its per-second rate (``rate:``), never the ever-growing
    total; the window must hold at least two distinct readings (2 x max(scrape, collect))."""
    thresholds = metric.get("thresholds") if isinstance(metric.get("thresholds"), list) else []
    floor = 2 * max(scrape or 0, collect or 0)
    for j, t in enumerate(thresholds):
        if not isinstance(t, dict):
            continue
        if metric.get("kind") == "counter" and "rate" not in t:
            add(["metrics", i, "thresholds", j], "a threshold on a counter compares an ever-growing total; add "
                "`rate: 5m` to compare its per-second rate (reset safe)")
        elif "rate" in t and metric.get("kind") != "counter":
            add(["metrics", i, "thresholds", j, "rate"], "rate needs kind: counter (a gauge is compared as it is)")
        elif "rate" in t and t.get("op") in ("<", "<=", "==", "!="):
            # a healthy error counter stays flat (rate 0): `< x` would page every GPU, and the
            # generated tests model a rate rising past the threshold (found by the spec fuzzer)
            add(["metrics", i, "thresholds", j, "op"], f"a rate threshold compares with > or >= (a counter rising "
                f"too fast), not {t.get('op')}; a counter that stops rising is what frozen_check catches")
        elif "rate" in t and isinstance(t.get("value"), (int, float)) and not isinstance(t["value"], bool) and (
                t["value"] < 0 or (t["value"] == 0 and t.get("op") == ">=")):
            add(["metrics", i, "thresholds", j, "value"], f"threshold {t.get('op')} {t['value']} on a rate always "
                "fires: a counter's rate is never negative; use > 0 to page on any increase")
        elif "rate" in t:
            window = _duration_or_none(t["rate"])
            if window is not None and floor and window < floor:
                add(["metrics", i, "thresholds", j, "rate"], f"rate window {t['rate']} is shorter than 2 x max(scrape, "
                    f"collect interval) = {format_duration(floor)}: rate() would often see one sample and return nothing")


def _threshold_problems(metric: dict, i: int, add) -> None:
    """A threshold no plausible reading can cross renders an alert that can never fire: thresholds
    only look at readings inside the range (and below the DCGM blank codes), so ``> 183`` on a
    range of [5, 110] is dead (issue 11, item 10)."""
    rng = metric.get("range") if isinstance(metric.get("range"), list) and len(metric["range"]) == 2 else [None, None]
    lo, hi = (v if isinstance(v, (int, float)) and not isinstance(v, bool) else None for v in rng)
    if lo is not None and hi is not None and lo > hi:
        return  # an inverted range is its own error
    thresholds = metric.get("thresholds") if isinstance(metric.get("thresholds"), list) else []
    for j, t in enumerate(thresholds):
        if not isinstance(t, dict) or not isinstance(t.get("value"), (int, float)) or t.get("op") not in (">", ">=", "<", "<=") \
                or "rate" in t:       # the range bounds readings, not rates
            continue
        op, v = t["op"], t["value"]
        # without a maximum, readings below the DCGM blank codes (< 2^47) are plausible
        dead = {">": not (hi if hi is not None else DCGM_BLANK_MIN - 1) > v,
                ">=": not (hi if hi is not None else DCGM_BLANK_MIN - 1) >= v,
                "<": lo is not None and not lo < v, "<=": lo is not None and not lo <= v}[op]
        # the other way round: every plausible reading crosses it, so the alert always fires and a
        # healthy GPU pages (found by the spec fuzzer: `> -49` on a range of [-44, 224])
        always = {">": lo is not None and lo > v, ">=": lo is not None and lo >= v,
                  "<": hi is not None and hi < v, "<=": hi is not None and hi <= v}[op]
        if dead:
            side = (f"the plausible maximum {hi}" if hi is not None else "the DCGM blank codes (2^47)") \
                if op in (">", ">=") else f"the plausible minimum {lo}"
            add(["metrics", i, "thresholds", j, "value"],
                f"threshold {op} {v} can never fire: thresholds only see plausible readings and {side} "
                f"does not pass it; {'lower' if op in ('>', '>=') else 'raise'} the threshold or widen `range`")
        elif always:
            side = f"the plausible minimum {lo}" if op in (">", ">=") else f"the plausible maximum {hi}"
            add(["metrics", i, "thresholds", j, "value"],
                f"threshold {op} {v} always fires: {side} already crosses it, so every plausible reading "
                f"pages; {'raise' if op in ('>', '>=') else 'lower'} the threshold or narrow `range`")


def _xid_problems(metric: dict, i: int, add) -> None:
    """An XID policy belongs on a code field, names each code once, and replaces thresholds there."""
    xid = metric.get("xid")
    if not isinstance(xid, dict):
        return
    if metric.get("unit") != "code":
        add(["metrics", i, "xid"], "an XID policy needs unit: code (the value is the code of the last XID)")
    if metric.get("thresholds"):
        add(["metrics", i, "thresholds"], "thresholds on an XID code compare codes as numbers and stay firing until "
            "the exporter restarts; the xid policy already alerts per code")
    seen: dict[int, str] = {}
    for level in ("critical", "warning", "info", "ignore"):
        codes = xid.get(level) if isinstance(xid.get(level), list) else []
        for j, code in enumerate(codes):
            if isinstance(code, int) and code in seen:
                add(["metrics", i, "xid", level, j], f"XID {code} is already listed under {seen[code]}")
            seen.setdefault(code, level)


def _alert_names(metrics: list) -> list[tuple[str, str, list]]:
    """(alert name, severity, path of its threshold) for every threshold, with the default name
    the loader derives when ``alert`` is not given."""
    out = []
    for i, metric in enumerate(metrics):
        if not isinstance(metric, dict) or not isinstance(metric.get("name"), str):
            continue
        camel = Metric(name=metric["name"], kind="gauge", unit="none", presence="optional").camel
        for j, t in enumerate(metric.get("thresholds") if isinstance(metric.get("thresholds"), list) else []):
            if isinstance(t, dict) and isinstance(t.get("severity"), str):
                name = t.get("alert") or f"Gpu{camel}{'High' if t.get('op') in ('>', '>=') else 'Low'}"
                path = ["metrics", i, "thresholds", j] + (["alert"] if "alert" in t else ["severity"])
                out.append((str(name), t["severity"], path))
    return out


def _alert_name_problems(metrics: list, add) -> None:
    """One alert name must mean one severity: with kube-prometheus-stack's default inhibit rule
    (``equal: [namespace, alertname]``) one GPU's critical alert would mute every GPU's warning of
    the same name (issue 11, item 11). gpumon's own alert names are taken."""
    first: dict[str, tuple[str, list]] = {}
    for name, severity, path in _alert_names(metrics):
        if name in builtin_alerts():
            add(path, f"alert name {name!r} is one of gpumon's own alerts; name the threshold differently")
        elif name in first and first[name][0] != severity:
            add(path, f"alert {name!r} is already used at severity {first[name][0]} ({_format_path(first[name][1])}); "
                f"give the {severity} level its own name (e.g. {name}{severity.capitalize()}): an inhibit rule "
                "equal on alertname would let one GPU's critical mute every GPU's warning")
        first.setdefault(name, (severity, path))


def _flapping_problems(plain: dict, add) -> None:
    """GpuExporterFlapping needs a success share below ``flapping_min_up_ratio`` *and* more than two
    up/down changes in ``flapping_window``: at least two successful scrapes, one success in
    ``int(1/ratio) + 1``. A ratio so low that the window cannot hold that is an alert that can never
    fire (found by the spec fuzzer: 0.014 over 10m of 15s scrapes)."""
    alerts = plain.get("alerts") if isinstance(plain.get("alerts"), dict) else {}
    exporter = plain.get("exporter") if isinstance(plain.get("exporter"), dict) else {}
    ratio = alerts.get("flapping_min_up_ratio")
    window = _duration_or_none(alerts.get("flapping_window", format_duration(AlertSettings.flapping_window)))
    interval = _duration_or_none(exporter.get("scrape_interval", format_duration(Exporter.scrape_interval)))
    if not isinstance(ratio, (int, float)) or isinstance(ratio, bool) or not 0 < ratio <= 1 or not window or not interval:
        return
    period = int(1 / ratio) + 1
    if period + 1 > window / interval:
        add(["alerts", "flapping_min_up_ratio"], f"flapping_min_up_ratio {ratio:g} means one success in {period} "
            f"scrapes, but flapping_window ({format_duration(window)}) holds only {int(window // interval)} scrapes: "
            "GpuExporterFlapping could never fire; raise the ratio or lengthen the window")


def _legacy_name_problems(metrics: list, add) -> None:
    """A 1.x name stands for one field: listed under two metrics (or as another metric's own
    name) it would be counted, and alerted on, twice (found by the spec fuzzer, issue #15)."""
    owner: dict[str, int] = {m["name"]: i for i, m in enumerate(metrics)
                             if isinstance(m, dict) and isinstance(m.get("name"), str)}
    for i, metric in enumerate(metrics):
        names = metric.get("legacy_names") if isinstance(metric, dict) else None
        for j, legacy in enumerate(names if isinstance(names, list) else []):
            if not isinstance(legacy, str):
                continue
            if legacy in owner and owner[legacy] != i:
                add(["metrics", i, "legacy_names", j], f"{legacy!r} is already "
                    f"{'the name' if legacy == metrics[owner[legacy]].get('name') else 'a legacy name'} of "
                    f"metrics[{owner[legacy]}]; a 1.x name belongs to one field")
            owner.setdefault(legacy, i)


def _shared_source_problems(metrics: list, add, exp: dict) -> None:
    """A source series carries one field: listed under two metrics it would be read as both, and
    the rule tests rendered for them built the same input series twice (found by the spec fuzzer)."""
    owner: dict[tuple, tuple[int, int]] = {}
    for i, metric in enumerate(metrics):
        entries = metric.get("sources") if isinstance(metric, dict) else None
        for j, raw in enumerate(entries if isinstance(entries, list) else []):
            preset = raw if isinstance(raw, str) else (raw.get("preset") if isinstance(raw, dict) else None)
            if isinstance(preset, str) and preset not in sourcepresets.PRESETS:
                continue  # reported by _source_problems
            src = _source_fields(raw, metric, exp)
            if src is None or not isinstance(src["name"], str):
                continue
            key = (src["name"], src["job"])
            if key in owner and owner[key][0] != i:
                add(["metrics", i, "sources", j], f"{src['name']!r} (job {src['job']!r}) is already "
                    f"metrics[{owner[key][0]}].sources[{owner[key][1]}]: a source series carries one field")
            owner.setdefault(key, (i, j))


def _source_fields(raw: Any, metric: dict, exp: dict) -> dict | None:
    """A source entry (preset name or mapping) with its preset applied: keys ``name``, ``job``,
    ``unit``, ``label``, ``gpu_prefix``, ``gpu``, ``node``, ``gpu_index``, ``preset`` (None where
    neither the entry nor its preset says); None when the entry is not a string or mapping."""
    if isinstance(raw, str):
        raw = {"preset": raw}
    if not isinstance(raw, dict):
        return None
    preset = sourcepresets.PRESETS.get(raw.get("preset")) if isinstance(raw.get("preset"), str) else None
    labels = raw.get("labels") if isinstance(raw.get("labels"), dict) else {}
    out = {"preset": raw.get("preset") if preset else None, "name": raw.get("name"), "job": raw.get("job"),
           "unit": raw.get("unit"), "label": raw.get("label"), "gpu_prefix": raw.get("gpu_prefix"),
           "gpu": labels.get("gpu"), "node": labels.get("node"), "gpu_index": labels.get("gpu_index")}
    if preset is not None:
        series = preset.series.get(metric.get("name"))
        legacy = metric.get("legacy_names") if isinstance(metric.get("legacy_names"), list) else []
        if raw.get("preset") == "dcgm-exporter-1.x" and legacy and isinstance(legacy[0], str):
            series = (legacy[0], None)  # the spec's own 1.x name wins over the table
        if series is not None:
            out["name"] = out["name"] or series[0]
            out["unit"] = out["unit"] or series[1]
        for key in ("job", "gpu", "node", "gpu_index"):
            out[key] = out[key] or getattr(preset, key)
        out["gpu_prefix"] = out["gpu_prefix"] or preset.gpu_prefix
        out["label"] = out["label"] or raw["preset"]
    job = exp.get("job") if isinstance(exp.get("job"), str) else None
    same_job = out["job"] is None or out["job"] == job
    lab = exp.get("labels") if isinstance(exp.get("labels"), dict) else {}
    if same_job:   # the exporter's own job: its labels, unless the entry (or preset) says otherwise
        out["gpu"] = out["gpu"] or lab.get("gpu", Labels.gpu)
        out["node"] = out["node"] or lab.get("node", Labels.node)
        out["gpu_index"] = out["gpu_index"] or (lab.get("gpu_index", Labels.gpu_index) if preset is None or
                                                preset.gpu_index is None else None)
    out["job"] = out["job"] or job
    out["unit"] = out["unit"] or metric.get("unit")
    out["label"] = out["label"] or out["name"]
    out["gpu_prefix"] = out["gpu_prefix"] or "keep"
    return out


def _source_problems(metric: dict, i: int, add, exp: dict) -> None:
    """Sources must name a known preset the metric is in, convert to the metric's unit, say which
    labels hold the GPU and node (a foreign job has no exporter labels), differ from the primary
    and from each other (issue 13)."""
    sources = metric.get("sources")
    if not isinstance(sources, list):
        return
    labels_seen: dict[str, int] = {}
    series_seen: dict[tuple, int] = {}
    for j, raw in enumerate(sources):
        path = ["metrics", i, "sources", j]
        preset = raw if isinstance(raw, str) else (raw.get("preset") if isinstance(raw, dict) else None)
        if isinstance(preset, str) and preset not in sourcepresets.PRESETS:
            hint = difflib.get_close_matches(preset, list(sourcepresets.PRESETS), n=1, cutoff=0.5)
            add(path + ([] if isinstance(raw, str) else ["preset"]), f"unknown source preset {preset!r}"
                + (f"; did you mean {hint[0]!r}?" if hint else f"; presets: {', '.join(sorted(sourcepresets.PRESETS))}"))
            continue
        src = _source_fields(raw, metric, exp)
        if src is None:
            continue
        if src["name"] is None:
            if src["preset"]:
                covered = sorted(sourcepresets.PRESETS[src["preset"]].series)
                add(path, f"preset {src['preset']!r} has no series for {metric.get('name')!r}; it covers "
                    f"{', '.join(covered)} (or give `name:`)")
            else:
                add(path, "a source needs a preset or a series `name`")
            continue
        unit = metric.get("unit")
        if isinstance(unit, str) and isinstance(src["unit"], str) and sourcepresets.conversion(src["unit"], unit) is None:
            add(path + (["unit"] if isinstance(raw, dict) and "unit" in raw else []),
                f"source unit {src['unit']!r} cannot convert to the metric's unit {unit!r}")
        if src["gpu"] is None:
            add(path, f"source {src['name']!r} (job {src['job']!r}) does not say which label holds the GPU UUID: "
                "add labels: {gpu: <label>} (e.g. uuid); without it no reading can be matched to a GPU")
        specbounds.source_labels(src, raw, path, add, VOLATILE_LABELS)
        if src["node"] is None:
            add(path, f"source {src['name']!r} (job {src['job']!r}) does not say which label holds the node: add "
                "labels: {node: <label>}, or node: instance for the target's address without the port")
        if src["name"] == metric.get("name") and src["job"] == exp.get("job"):
            add(path, f"{src['name']!r} under the exporter's job is the metric itself, not another source")
        key = (src["name"], src["job"])
        if key in series_seen:
            add(path, f"{src['name']!r} (job {src['job']!r}) is already sources[{series_seen[key]}]")
            continue
        series_seen[key] = j
        if src["label"] == sourcepresets.PRIMARY:
            add(path, f"source label {sourcepresets.PRIMARY!r} is the primary's; give `label:` another value")
        elif src["label"] in labels_seen:
            add(path, f"source label {src['label']!r} is already sources[{labels_seen[src['label']]}]'s; "
                "give `label:` another value")
        labels_seen.setdefault(src["label"], j)


def _runbook_problems(alerts: dict, add) -> None:
    """A relative runbook base is a broken link in every notification; it is accepted only when
    the spec says so (``runbook_url_relative: true``)."""
    url = alerts.get("runbook_url")
    if not isinstance(url, str) or not url:
        return
    if "://" not in url and not alerts.get("runbook_url_relative"):
        add(["alerts", "runbook_url"], f"runbook_url {url!r} is relative: Alertmanager notifications and Grafana carry "
            "it verbatim, so every link is broken; use an absolute base (https://…/output/runbooks), or set "
            "runbook_url_relative: true if the links are only read in a git forge's view of output/rules/")


def _build(plain: dict, path: str, where=None) -> Spec:
    """Model a checked document. Defaults are the dataclass defaults (one place); a key absent
    from the document takes them. ``where(path)``: (line, column) of a key, kept for errors found
    later (override names)."""
    exp = plain["exporter"]
    lab = exp.get("labels", {})
    labels = Labels(**{k: v for k, v in lab.items()})
    exporter = Exporter(
        job=exp["job"],
        scrape_interval=_dur(exp, "scrape_interval", Exporter.scrape_interval),
        scrape_timeout=_dur(exp, "scrape_timeout", Exporter.scrape_timeout),
        collect_interval=_dur(exp, "collect_interval", Exporter.collect_interval),
        labels=labels,
        driver_version=exp.get("driver_version"),
    )
    al = plain.get("alerts", {})
    defaults = AlertSettings()
    alerts = AlertSettings(
        for_=parse_duration(al["for"]) if "for" in al else defaults.for_,
        labels=tuple(sorted((al.get("labels") or {}).items())),
        runbook_url=al.get("runbook_url", defaults.runbook_url).rstrip("/"),
        runbook_url_relative=bool(al.get("runbook_url_relative", defaults.runbook_url_relative)),
        namespace=(al["namespace"] if "namespace" in al
                   else (plain.get("prometheus_rule") or {}).get("namespace", PrometheusRuleMeta.namespace)),
        inventory_lookback=_dur(al, "inventory_lookback", defaults.inventory_lookback),
        gap_window=_dur(al, "gap_window", defaults.gap_window),
        gap_min_ratio=float(al.get("gap_min_ratio", defaults.gap_min_ratio)),
        flapping_window=_dur(al, "flapping_window", defaults.flapping_window),
        flapping_min_up_ratio=float(al.get("flapping_min_up_ratio", defaults.flapping_min_up_ratio)),
        frozen_window=_dur(al, "frozen_window", defaults.frozen_window),
        implausible_for=_dur(al, "implausible_for", defaults.implausible_for),
        scrape_slow_ratio=float(al.get("scrape_slow_ratio", defaults.scrape_slow_ratio)),
        slow_group_interval=_dur(al, "slow_group_interval", defaults.slow_group_interval),
        retired_nodes=tuple(sorted(set((al.get("retired") or {}).get("nodes") or ()))),
        retired_gpus=tuple(sorted(set((al.get("retired") or {}).get("gpus") or ()))),
    )
    pr = plain.get("prometheus_rule", {})
    prdef = PrometheusRuleMeta()
    prule = PrometheusRuleMeta(
        name=pr.get("name", plain.get("name", prdef.name)),
        namespace=pr.get("namespace", prdef.namespace),
        labels=tuple(sorted(pr["labels"].items())) if "labels" in pr else prdef.labels,
    )
    metrics = tuple(_metric(m, alerts, exp) for m in plain["metrics"])
    return Spec(path=path, name=plain.get("name", "gpumon"), exporter=exporter, alerts=alerts,
                prometheus_rule=prule, metrics=metrics, dashboards=_dashboards(plain.get("dashboards") or {}),
                kubernetes=kube.from_plain(plain.get("kubernetes"), labels.node),
                textfile_sidecar=sidecarspec.from_plain(plain.get("textfile_sidecar")),
                overrides=alert_overrides.from_plain(plain.get("overrides"), where))


def _dashboards(raw: dict) -> DashboardSettings:
    cm = raw.get("configmap") or {}
    d = DashboardSettings()
    return DashboardSettings(
        enabled=bool(raw.get("enabled", d.enabled)),
        title_prefix=raw.get("title_prefix", d.title_prefix),
        tags=tuple(raw.get("tags", d.tags)),
        refresh=raw.get("refresh", d.refresh),
        time_from=raw.get("time_from", d.time_from),
        configmaps=bool(cm.get("enabled", d.configmaps)),
        namespace=cm.get("namespace", d.namespace),
        label=cm.get("label", d.label),
        label_value=str(cm.get("label_value", d.label_value)),
        folder_annotation=cm.get("folder_annotation", d.folder_annotation),
        folder=cm.get("folder", d.folder),
        datasource_uid=raw.get("datasource_uid", d.datasource_uid),
    )


def _xid(raw: dict) -> XidPolicy:
    d = XidPolicy()
    return XidPolicy(window=_dur(raw, "window", d.window),
                     **{k: tuple(raw.get(k, getattr(d, k))) for k in ("critical", "warning", "info", "ignore")},
                     other=raw.get("other", d.other))


def _dur(section: dict, key: str, default: float) -> float:
    return parse_duration(section[key]) if key in section else default


def _sources(m: dict, exp: dict) -> tuple[Source, ...]:
    out = []
    for raw in m.get("sources", []):
        f = _source_fields(raw, m, exp)
        out.append(Source(series=f["name"], label=f["label"], job=f["job"], gpu=f["gpu"], node=f["node"],
                          unit=f["unit"], gpu_index=f["gpu_index"], gpu_prefix=f["gpu_prefix"],
                          convert=sourcepresets.conversion(f["unit"], m["unit"]), preset=f["preset"]))
    return tuple(out)


def _metric(m: dict, alerts: AlertSettings, exp: dict) -> Metric:
    rng = m.get("range") or [None, None]
    camel = Metric(name=m["name"], kind=m["kind"], unit=m["unit"], presence=m["presence"]).camel
    thresholds = []
    for t in m.get("thresholds", []):
        direction = "High" if t["op"] in (">", ">=") else "Low"
        thresholds.append(Threshold(
            alert=t.get("alert", f"Gpu{camel}{direction}"),
            severity=t["severity"], op=t["op"], value=float(t["value"]),
            for_=parse_duration(t["for"]) if "for" in t else alerts.for_,
            summary=t.get("summary"), rate=parse_duration(t["rate"]) if "rate" in t else None,
        ))
    return Metric(
        name=m["name"], kind=m["kind"], unit=m["unit"], presence=m["presence"],
        description=m.get("description", ""), title=m.get("title", camel),
        range_min=rng[0], range_max=rng[1], thresholds=tuple(thresholds),
        mig=m.get("mig", "device"), frozen_check=bool(m.get("frozen_check", False)),
        legacy_names=tuple(m.get("legacy_names", [])), alert_labels=tuple(m.get("alert_labels", [])),
        xid=_xid(m["xid"]) if isinstance(m.get("xid"), dict) else None,
        sources=_sources(m, exp),
    )
