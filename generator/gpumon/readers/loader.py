"""Find and read what ``gpumon lint`` checks, keeping positions.

Inputs (by content, not by file name):
- Prometheus rule files (``groups:``), several YAML documents per file allowed;
- PrometheusRule objects (``kind: PrometheusRule``, rules under ``spec.groups``), also inside
  ``kind: List`` (``kubectl get -o yaml``);
- Grafana dashboard JSON (``panels`` at the top, or under ``dashboard`` as the HTTP API writes it);
- dashboards embedded in ConfigMaps (each ``data`` value that is dashboard JSON, as the Grafana
  sidecar reads them) and in grafana-operator ``GrafanaDashboard`` objects (``spec.json``).
Other YAML/JSON files (specs, promtool tests, Kubernetes objects) are skipped.

Positions: YAML through ruamel.yaml's line/column marks; JSON through the same loader
(:mod:`.positions`). JSON dashboards are read by :mod:`.dashjson`.

Unreadable input (YAML/JSON syntax errors, unreadable files) becomes an ``input-unreadable``
finding; the CLI exits 2 for it. YAML that does not parse and contains ``{{`` is taken for a
Helm/Go template (not YAML until rendered) and skipped; the report summary counts such files.

Ignore comments (``# gpumon-lint: ignore <check-id>``): :mod:`.ignores`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterable

import yaml
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError

from ..applysize import applied_size
from ..findings import Location
from . import files as inputfiles
from .dashjson import embedded_dashboard, load_json_file
from .ignores import collect_ignores
from .model import AppliedObject, Inputs, Query, Rule, RuleObject, unreadable
from .positions import escape_pointer, loc, pos, yaml_loader, yaml_locator

_SKIP_DIRS = {".git", ".venv", "venv", "node_modules", "__pycache__", ".tox", ".mypy_cache", ".pytest_cache"}
_EXTENSIONS = (".yaml", ".yml", ".json")


def collect(paths: Iterable[str | Path]) -> tuple[list[Path], list[str]]:
    """Expand ``paths`` (files and directories, walked recursively, hidden and virtualenv folders
    skipped) into ``.yaml``/``.yml``/``.json`` files, sorted per directory.

    Returns:
        (files, missing): ``missing`` lists paths that do not exist.
    """
    files: list[Path] = []
    missing: list[str] = []
    for raw in paths:
        path = Path(raw)
        if inputfiles.is_dir(path):
            for root, dirs, names in os.walk(path):  # symlinked folders are listed, not entered
                dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
                files.extend(Path(root) / n for n in sorted(names) if n.endswith(_EXTENSIONS))
        elif os.path.lexists(path) or _unreachable(path):
            files.append(path)  # a device, FIFO, dangling link or a path behind a closed folder too: the reader says why
        else:
            missing.append(str(raw))
    return files, missing


def _unreachable(path: Path) -> bool:
    """True when ``path`` cannot even be looked at (a folder on the way may not be entered)."""
    try:
        os.lstat(path)
    except PermissionError:
        return True
    except OSError:
        return False
    return False


def load(paths: Iterable[str | Path], limits: inputfiles.Limits = inputfiles.DEFAULT,
         skip_other: bool = False) -> Inputs:
    """Read every input under ``paths`` into an :class:`Inputs`, each file within ``limits``
    (:mod:`.files`: regular files inside the tree, size and nesting caps). Never raises for bad
    content: a refused or unreadable file is an ``input-unreadable`` finding naming it.
    A file named in ``paths`` that holds nothing lintable is an ``input-unreadable`` problem (a
    wrong path), or with ``skip_other`` (pre-commit passes every changed YAML/JSON file: specs,
    promtool tests, other objects) a skipped file, as it is when found by walking a folder."""
    paths = list(paths)
    limits = limits.for_paths(paths)
    files, missing = collect(paths)
    named = {Path(p) for p in paths if not inputfiles.is_dir(Path(p))}
    inputs = Inputs()
    for name in missing:
        inputs.problems.append(unreadable(name, 1, 1, "no such file or directory"))
    for path in files:
        before = _sizes(inputs)
        load_text_file(path, inputs, limits)
        # a file named on the command line that holds nothing lintable is a mistake (a wrong path, an
        # export in another format), not a clean result; files found by walking a folder may be anything
        if path in named and _sizes(inputs) == before and str(path) not in inputs.rule_files:
            if skip_other:
                inputs.others.append(str(path))
                continue
            inputs.problems.append(unreadable(
                str(path), 1, 1, "no Prometheus rule groups, PrometheusRule, Grafana dashboard (JSON with panels, "
                "ConfigMap or GrafanaDashboard) in this file"))
    return inputs


def _sizes(inputs: Inputs) -> tuple[int, ...]:
    return (len(inputs.rules), len(inputs.objects), len(inputs.dashboards), len(inputs.problems),
            len(inputs.templates))


def load_text_file(path: Path, inputs: Inputs, limits: inputfiles.Limits = inputfiles.DEFAULT) -> None:
    """Read one file into ``inputs`` (rules, objects, dashboards, queries, problems)."""
    name = str(path)
    try:
        text = inputfiles.read_text(path, limits)
    except inputfiles.Refused as exc:
        inputs.problems.append(unreadable(name, 1, 1, f"not read: {exc}"))
        return
    except OSError as exc:
        inputs.problems.append(unreadable(name, 1, 1, f"cannot read: {exc.strerror or exc}"))
        return
    inputs.files.append(name)
    load_text(text, name, inputs)


def load_text(text: str, name: str, inputs: Inputs) -> None:
    """Like :func:`load_text_file` for text already read; ``name`` is used in positions. Text
    out of :mod:`.files`' bounds (nested deeper than :data:`.files.MAX_DEPTH`, YAML aliases that
    expand past :data:`.files.MAX_NODES` values, numbers too long to convert) is an
    ``input-unreadable`` finding naming the file, line and column."""
    try:
        if name.endswith(".json"):
            inputfiles.check_json_depth(text)
            load_json_file(text, name, inputs)
        else:
            inputfiles.check_yaml(text)
            _load_yaml_file(text, name, inputs)
    except inputfiles.Refused as exc:
        inputs.problems.append(unreadable(name, exc.line, exc.column, f"not read: {exc}"))
    except RecursionError:  # a backstop: the depth checks above should keep every parser shallow
        inputs.problems.append(unreadable(name, 1, 1, "not read: nested too deeply to parse"))


# --------------------------------------------------------------------------- YAML


def _relevant(text: str) -> bool:
    """Cheap first look with libyaml (C): does any document hold rules or dashboards? The
    position-keeping ruamel.yaml loader is ~30x slower, so other YAML (promtool tests, values
    files) is not loaded twice. True when unsure (no libyaml, syntax error: ruamel reports it)."""
    loader = getattr(yaml, "CSafeLoader", None)
    if loader is None:
        return True
    try:
        docs = list(yaml.load_all(text, Loader=loader))
    except yaml.YAMLError:
        return True
    stack = list(docs)
    while stack:
        doc = stack.pop()
        if not isinstance(doc, dict):
            continue
        kind = doc.get("kind")
        if kind == "List" and isinstance(doc.get("items"), list):
            stack.extend(doc["items"])
        elif kind in ("PrometheusRule", "ConfigMap", "GrafanaDashboard") or (kind is None and "groups" in doc):
            return True
    return False


def _load_yaml_file(text: str, name: str, inputs: Inputs) -> None:
    if not _relevant(text):
        return
    try:
        docs = list(yaml_loader().load_all(text))
    except YAMLError as exc:
        if "{{" in text:  # a Helm/Go template, not YAML until rendered: nothing to check
            inputs.templates.append(name)
            return
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        inputs.problems.append(unreadable(name, line, col, f"YAML syntax error: {problem}"))
        return
    lines = text.splitlines()
    rule_starts: list[tuple[int, Rule]] = []
    for doc in _flatten_lists(docs):
        kind = doc.get("kind")
        if kind in ("PrometheusRule", "ConfigMap", "GrafanaDashboard"):
            inputs.applied.append(_applied(doc, name))
        if kind == "PrometheusRule":
            obj = _rule_object(doc, name)
            inputs.objects.append(obj)
            spec = doc.get("spec")
            if isinstance(spec, CommentedMap):
                _load_groups(spec, name, lines, inputs, rule_starts, obj)
        elif kind == "ConfigMap":
            data = doc.get("data")
            if isinstance(data, CommentedMap):
                for key in data:
                    embedded_dashboard(data, key, name, lines, inputs, f"/data/{escape_pointer(str(key))}")
        elif kind == "GrafanaDashboard":
            spec = doc.get("spec")
            if isinstance(spec, CommentedMap) and "json" in spec:
                embedded_dashboard(spec, "json", name, lines, inputs, "/spec/json")
        elif "groups" in doc and kind is None:
            inputs.rule_files.add(name)
            _load_groups(doc, name, lines, inputs, rule_starts, None)
    collect_ignores(lines, name, rule_starts, inputs)


def _flatten_lists(docs) -> list:
    """YAML documents, with the items of ``kind: List`` objects (``kubectl get -o yaml``) in place."""
    out = []
    for doc in docs:
        if isinstance(doc, CommentedMap) and doc.get("kind") == "List" and isinstance(doc.get("items"), CommentedSeq):
            out.extend(_flatten_lists(doc["items"]))
        elif isinstance(doc, CommentedMap):
            out.append(doc)
    return out


def _metadata(doc: CommentedMap, name: str) -> tuple[CommentedMap, Location]:
    """An object's ``metadata`` (empty when missing or not a map) and where the object starts."""
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), CommentedMap) else CommentedMap()
    return meta, loc(name, pos(doc, "metadata") if "metadata" in doc else pos(doc, "kind"))


def _applied(doc: CommentedMap, name: str) -> AppliedObject:
    meta, where = _metadata(doc, name)
    # YAML scalars json cannot encode (dates) count as their text
    size = applied_size(json.loads(json.dumps(doc, default=str)))
    return AppliedObject(name, str(doc.get("kind")), str(meta.get("name", "")), str(meta.get("namespace", "")),
                         size, where)


def _rule_object(doc: CommentedMap, name: str) -> RuleObject:
    meta, where = _metadata(doc, name)
    labels = meta.get("labels") if isinstance(meta.get("labels"), dict) else {}
    labels_loc = loc(name, pos(meta, "labels")) if "labels" in meta else None
    return RuleObject(name, str(meta.get("name", "")), str(meta.get("namespace", "")),
                      {str(k): str(v) for k, v in labels.items()}, where, labels_loc)


def _load_groups(doc: CommentedMap, name: str, lines: list[str], inputs: Inputs,
                 rule_starts: list, obj: RuleObject | None) -> None:
    groups = doc.get("groups")
    if not isinstance(groups, CommentedSeq):
        return
    for group in groups:
        if not isinstance(group, CommentedMap):
            continue
        rules = group.get("rules")
        if not isinstance(rules, CommentedSeq):
            continue
        for i, raw in enumerate(rules):
            if not isinstance(raw, CommentedMap):
                continue
            rule = _rule(raw, str(group.get("name", "")), name, lines, obj, pos(rules, i), group.get("interval"))
            inputs.rules.append(rule)
            if rule.expr is not None:
                inputs.queries.append(rule.expr)
            rule_starts.append((pos(rules, i)[0] + 1, rule))


def _rule(raw: CommentedMap, group: str, name: str, lines: list[str], obj, item_pos,
          group_interval=None) -> Rule:
    kind = "alert" if "alert" in raw else "record"
    rname = str(raw.get(kind, "") or "")
    keys = {str(k): loc(name, pos(raw, k)) for k in raw}
    labels = raw.get("labels") if isinstance(raw.get("labels"), dict) else {}
    annotations = raw.get("annotations") if isinstance(raw.get("annotations"), dict) else {}
    ann_locs, ann_locators = {}, {}
    if isinstance(annotations, CommentedMap):
        for k in annotations:
            ann_locs[str(k)] = loc(name, annotations.lc.value(k))
            vline, vcol = annotations.lc.value(k)
            ann_locators[str(k)] = yaml_locator(name, lines, vline, vcol, str(annotations[k]))
    rule = Rule(file=name, group=group, kind=kind, name=rname, expr=None,
                for_=str(raw["for"]) if raw.get("for") is not None else None,
                labels={str(k): str(v) for k, v in labels.items()},
                annotations={str(k): str(v) for k, v in annotations.items()},
                location=keys.get(kind, loc(name, item_pos)), keys=keys,
                annotation_locations=ann_locs, annotation_locators=ann_locators, obj=obj, raw=dict(raw),
                group_interval=str(group_interval) if group_interval is not None else None)
    expr = raw.get("expr")
    if expr is not None:
        vline, vcol = raw.lc.value("expr")
        text = str(expr)
        rule.expr = Query(text=text, source=text, position=Location(name, vline + 1, vcol + 1),
                          subject=rule.subject, origin="rule", rule=rule,
                          locate=yaml_locator(name, lines, vline, vcol, text))
    return rule


