"""Find and read what ``gpumon lint`` checks, keeping positions.

Inputs (by content, not by file name):
- Prometheus rule files (``groups:``), several YAML documents per file allowed;
- PrometheusRule objects (``kind: PrometheusRule``, rules under ``spec.groups``), also inside
  ``kind: List`` (``kubectl get -o yaml``);
- Grafana dashboard JSON (``panels`` at the top, or under ``dashboard`` as the HTTP API writes it);
- dashboards embedded in ConfigMaps (each ``data`` value that is dashboard JSON, as the Grafana
  sidecar reads them) and in grafana-operator ``GrafanaDashboard`` objects (``spec.json``).
Other YAML/JSON files (specs, promtool tests, Kubernetes objects) are skipped.

Positions: YAML through ruamel.yaml's line/column marks; JSON through the same loader (JSON is
YAML 1.2 flow syntax), which gives each key's line without a hand-written JSON parser. A JSON
dashboard inside a YAML block scalar (``|``) is shifted to the lines of the YAML file.

Unreadable input (YAML/JSON syntax errors, unreadable files) becomes an ``input-unreadable``
finding; the CLI exits 2 for it. YAML that does not parse and contains ``{{`` is taken for a
Helm/Go template (not YAML until rendered) and skipped; the report summary counts such files.

Ignore comments: ``# gpumon-lint: ignore <check-id>[,<check-id>...]`` on a rule's lines or on the
comment lines right above it silences those checks for that rule; ``# gpumon-lint: ignore-file
<check-id>...`` anywhere in a YAML file silences them for the whole file (also for dashboards in
ConfigMaps). ``all`` silences every check.
"""

from __future__ import annotations

import json
import os
import re
from functools import partial
from pathlib import Path
from typing import Iterable

import yaml
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError

from ..findings import Finding, Location
from . import files as inputfiles
from . import grafana
from ..applysize import applied_size
from .model import AppliedObject, Dashboard, Inputs, Panel, Query, Rule, RuleObject, Variable

UNREADABLE = "input-unreadable"
_IGNORE = re.compile(r"#\s*gpumon-lint:\s*(ignore-file|ignore)\b\s*([\w\-, ]*)")
_SKIP_DIRS = {".git", ".venv", "venv", "node_modules", "__pycache__", ".tox", ".mypy_cache", ".pytest_cache"}
_EXTENSIONS = (".yaml", ".yml", ".json")
#: JSON dashboards up to this size get line/column positions (gpumon's largest is under 100 KB)
_LOCATOR_MAX_CHARS = 2 << 20


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
        inputs.problems.append(_unreadable(name, 1, 1, "no such file or directory"))
    for path in files:
        before = _sizes(inputs)
        load_text_file(path, inputs, limits)
        # a file named on the command line that holds nothing lintable is a mistake (a wrong path, an
        # export in another format), not a clean result; files found by walking a folder may be anything
        if path in named and _sizes(inputs) == before and str(path) not in inputs.rule_files:
            if skip_other:
                inputs.others.append(str(path))
                continue
            inputs.problems.append(_unreadable(
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
        inputs.problems.append(_unreadable(name, 1, 1, f"not read: {exc}"))
        return
    except OSError as exc:
        inputs.problems.append(_unreadable(name, 1, 1, f"cannot read: {exc.strerror or exc}"))
        return
    inputs.files.append(name)
    load_text(text, name, inputs)


def load_text(text: str, name: str, inputs: Inputs) -> None:
    """Like :func:`load_text_file` for text already read; ``name`` is used in positions. Text
    nested deeper than :data:`.files.MAX_DEPTH` is an ``input-unreadable`` finding."""
    try:
        if name.endswith(".json"):
            inputfiles.check_json_depth(text)
            _load_json_file(text, name, inputs)
        else:
            inputfiles.check_yaml_depth(text)
            _load_yaml_file(text, name, inputs)
    except inputfiles.Refused as exc:
        inputs.problems.append(_unreadable(name, 1, 1, f"not read: {exc}"))
    except RecursionError:  # a backstop: the depth checks above should keep every parser shallow
        inputs.problems.append(_unreadable(name, 1, 1, "not read: nested too deeply to parse"))


# --------------------------------------------------------------------------- YAML


def _yaml() -> YAML:
    yaml = YAML(typ="rt")
    yaml.allow_duplicate_keys = True
    return yaml


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
        docs = list(_yaml().load_all(text))
    except YAMLError as exc:
        if "{{" in text:  # a Helm/Go template, not YAML until rendered: nothing to check
            inputs.templates.append(name)
            return
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        inputs.problems.append(_unreadable(name, line, col, f"YAML syntax error: {problem}"))
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
                    _embedded_dashboard(data, key, name, lines, inputs, f"/data/{_escape(str(key))}")
        elif kind == "GrafanaDashboard":
            spec = doc.get("spec")
            if isinstance(spec, CommentedMap) and "json" in spec:
                _embedded_dashboard(spec, "json", name, lines, inputs, "/spec/json")
        elif "groups" in doc and kind is None:
            inputs.rule_files.add(name)
            _load_groups(doc, name, lines, inputs, rule_starts, None)
    _collect_ignores(lines, name, rule_starts, inputs)


def _flatten_lists(docs) -> list:
    """YAML documents, with the items of ``kind: List`` objects (``kubectl get -o yaml``) in place."""
    out = []
    for doc in docs:
        if isinstance(doc, CommentedMap) and doc.get("kind") == "List" and isinstance(doc.get("items"), CommentedSeq):
            out.extend(_flatten_lists(doc["items"]))
        elif isinstance(doc, CommentedMap):
            out.append(doc)
    return out


def _pos(node, key) -> tuple[int, int]:
    """0-based (line, col) of ``node[key]``'s key (maps) or item (lists)."""
    try:
        if isinstance(node, CommentedMap):
            return node.lc.key(key)
        if isinstance(node, CommentedSeq):
            return node.lc.item(key)
    except (KeyError, TypeError, IndexError, AttributeError):
        pass
    return (node.lc.line, node.lc.col) if hasattr(node, "lc") else (0, 0)


def _loc(name: str, pos: tuple[int, int]) -> Location:
    return Location(name, pos[0] + 1, pos[1] + 1)


def _applied(doc: CommentedMap, name: str) -> AppliedObject:
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), CommentedMap) else CommentedMap()
    loc = _loc(name, _pos(doc, "metadata") if "metadata" in doc else _pos(doc, "kind"))
    # YAML scalars json cannot encode (dates) count as their text
    size = applied_size(json.loads(json.dumps(doc, default=str)))
    return AppliedObject(name, str(doc.get("kind")), str(meta.get("name", "")), str(meta.get("namespace", "")),
                         size, loc)


def _rule_object(doc: CommentedMap, name: str) -> RuleObject:
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), CommentedMap) else CommentedMap()
    labels = meta.get("labels") if isinstance(meta.get("labels"), dict) else {}
    loc = _loc(name, _pos(doc, "metadata") if "metadata" in doc else _pos(doc, "kind"))
    labels_loc = _loc(name, _pos(meta, "labels")) if "labels" in meta else None
    return RuleObject(name, str(meta.get("name", "")), str(meta.get("namespace", "")),
                      {str(k): str(v) for k, v in labels.items()}, loc, labels_loc)


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
            rule = _rule(raw, str(group.get("name", "")), name, lines, obj, _pos(rules, i), group.get("interval"))
            inputs.rules.append(rule)
            if rule.expr is not None:
                inputs.queries.append(rule.expr)
            rule_starts.append((_pos(rules, i)[0] + 1, rule))


def _rule(raw: CommentedMap, group: str, name: str, lines: list[str], obj, item_pos,
          group_interval=None) -> Rule:
    kind = "alert" if "alert" in raw else "record"
    rname = str(raw.get(kind, "") or "")
    keys = {str(k): _loc(name, _pos(raw, k)) for k in raw}
    labels = raw.get("labels") if isinstance(raw.get("labels"), dict) else {}
    annotations = raw.get("annotations") if isinstance(raw.get("annotations"), dict) else {}
    ann_locs, ann_locators = {}, {}
    if isinstance(annotations, CommentedMap):
        for k in annotations:
            ann_locs[str(k)] = _loc(name, annotations.lc.value(k))
            vline, vcol = annotations.lc.value(k)
            ann_locators[str(k)] = _yaml_locator(name, lines, vline, vcol, str(annotations[k]))
    rule = Rule(file=name, group=group, kind=kind, name=rname, expr=None,
                for_=str(raw["for"]) if raw.get("for") is not None else None,
                labels={str(k): str(v) for k, v in labels.items()},
                annotations={str(k): str(v) for k, v in annotations.items()},
                location=keys.get(kind, _loc(name, item_pos)), keys=keys,
                annotation_locations=ann_locs, annotation_locators=ann_locators, obj=obj, raw=dict(raw),
                group_interval=str(group_interval) if group_interval is not None else None)
    expr = raw.get("expr")
    if expr is not None:
        vline, vcol = raw.lc.value("expr")
        text = str(expr)
        rule.expr = Query(text=text, source=text, position=Location(name, vline + 1, vcol + 1),
                          subject=rule.subject, origin="rule", rule=rule,
                          locate=_yaml_locator(name, lines, vline, vcol, text))
    return rule


def _yaml_locator(name: str, lines: list[str], vline: int, vcol: int, text: str):
    """Map a snippet of a YAML scalar to its file position: exact for literal blocks (``|``) and
    single-line scalars, the scalar's start otherwise."""
    start = Location(name, vline + 1, vcol + 1)
    head = lines[vline][vcol:] if vline < len(lines) else ""

    def locate(snippet: str) -> Location:
        idx = text.find(snippet)
        if idx < 0:
            return start
        if head.startswith("|"):
            before = text[:idx]
            row = before.count("\n")
            col = idx - (before.rfind("\n") + 1)
            line_no = vline + 1 + row
            first = next((ln for ln in lines[vline + 1:] if ln.strip()), "")
            indent = len(first) - len(first.lstrip(" "))  # the block's indentation
            if line_no < len(lines):
                content = lines[line_no]
                if content[indent + col:indent + col + len(snippet)] == snippet:
                    return Location(name, line_no + 1, indent + col + 1)
            return start
        if "\n" in text:
            return start
        shift = 1 if head[:1] in ("'", '"') else 0
        if head[shift + idx:shift + idx + len(snippet)] == snippet:
            return Location(name, vline + 1, vcol + shift + idx + 1)
        return start

    return locate


def _collect_ignores(lines: list[str], name: str, rule_starts: list, inputs: Inputs) -> None:
    starts = sorted(line for line, _ in rule_starts)
    spans = []
    for i, first in enumerate(starts):
        last = starts[i + 1] - 1 if i + 1 < len(starts) else len(lines)
        spans.append((first, last))
    out = inputs.ignores.setdefault(name, [])
    for idx, line in enumerate(lines, start=1):
        match = _IGNORE.search(line)
        if not match:
            continue
        ids = {x for x in re.split(r"[\s,]+", match.group(2).strip()) if x} or {"all"}
        if match.group(1) == "ignore-file":
            out.append((1, max(len(lines), 1), ids))
            continue
        target = _ignore_target(lines, idx, spans)
        if target:
            out.append((target[0], target[1], ids))


def _ignore_target(lines: list[str], line_no: int, spans: list) -> tuple[int, int] | None:
    """The rule span an ignore comment on ``line_no`` (1-based) applies to: the next rule when
    only comments/blank lines separate them, else the rule containing the comment."""
    for first, last in spans:
        if first > line_no:
            between = lines[line_no:first - 1]
            if all(not ln.strip() or ln.strip().startswith("#") for ln in between):
                return (first, last)
            break
    for first, last in spans:
        if first <= line_no <= last:
            return (first, last)
    return None


# --------------------------------------------------------------------------- JSON dashboards


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def _load_json_file(text: str, name: str, inputs: Inputs) -> None:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        inputs.problems.append(_unreadable(name, exc.lineno, exc.colno, f"JSON syntax error: {exc.msg}"))
        return
    base = _dashboard_base(doc)
    if base is None:
        return
    _add_dashboard(doc, base, name, _json_locator(text, name, 0, 0), inputs)


def _dashboard_base(doc) -> str | None:
    """JSON pointer of the dashboard object inside ``doc`` ("" or "/dashboard"), None if none."""
    if isinstance(doc, dict):
        if isinstance(doc.get("panels"), list) or isinstance(doc.get("rows"), list):
            return ""
        inner = doc.get("dashboard")
        if isinstance(inner, dict) and isinstance(inner.get("panels"), list):
            return "/dashboard"
    return None


def _embedded_dashboard(parent: CommentedMap, key, name: str, lines: list[str], inputs: Inputs,
                        pointer: str) -> None:
    text = parent.get(key)
    if not isinstance(text, str) or "{" not in text:
        return
    try:
        doc = inputfiles.loads_json(text)
    except json.JSONDecodeError as exc:
        if str(key).endswith(".json"):
            line, col = _pos(parent, key)
            message = f"JSON syntax error in {pointer}: {exc.msg} (line {exc.lineno} of the value)"
            inputs.problems.append(_unreadable(name, line + 1, col + 1, message))
        return
    base = _dashboard_base(doc)
    if base is None:
        return
    vline, vcol = parent.lc.value(key)
    head = lines[vline][vcol:] if vline < len(lines) else ""
    if head.startswith("|"):
        content = lines[vline + 1] if vline + 1 < len(lines) else ""
        indent = len(content) - len(content.lstrip(" "))
        locator = _json_locator(text, name, vline + 1, indent)
    else:
        key_loc = _loc(name, _pos(parent, key))
        locator = lambda pointer_: key_loc  # noqa: E731 - no line mapping for quoted scalars
    _add_dashboard(doc, base, name, locator, inputs)


def _json_locator(text: str, name: str, line_shift: int, col_shift: int):
    """``pointer -> Location`` for JSON ``text``: the line/column of the key (or list item) the
    pointer ends at, shifted by ``line_shift`` lines and ``col_shift`` columns."""
    cache: list = []

    def tree():
        if not cache:  # parsed on the first finding only: most dashboards have none
            try:
                # ruamel.yaml is pure Python: a 10 MB dashboard takes minutes and gigabytes, so
                # past _LOCATOR_MAX_CHARS findings point at the JSON pointer on line 1 instead
                cache.append(_yaml().load(text) if len(text) <= _LOCATOR_MAX_CHARS else None)
            except (YAMLError, RecursionError):
                cache.append(None)
        return cache[0]

    def locate(pointer: str) -> Location:
        node, pos = tree(), (0, 0)
        for token in [t.replace("~1", "/").replace("~0", "~") for t in pointer.split("/")[1:]]:
            if isinstance(node, CommentedMap) and token in node:
                pos = node.lc.key(token)
                node = node[token]
            elif isinstance(node, CommentedSeq) and token.isdigit() and int(token) < len(node):
                pos = node.lc.item(int(token))
                node = node[int(token)]
            else:
                break
        return Location(name, pos[0] + 1 + line_shift, pos[1] + 1 + col_shift, pointer or "/")

    return locate


def _add_dashboard(doc: dict, base: str, name: str, locator, inputs: Inputs) -> None:
    body = doc if base == "" else doc["dashboard"]
    dash = Dashboard(file=name, doc=body, base=base, locate=locator)
    variables = {}
    templating = body.get("templating") if isinstance(body.get("templating"), dict) else {}
    var_list = _list(templating.get("list"))
    for var in var_list:
        if isinstance(var, dict) and var.get("name"):
            variables[str(var["name"])] = var
    for i, var in enumerate(var_list):
        if not isinstance(var, dict):
            continue
        pointer = f"/templating/list/{i}"
        raw_query = var.get("query")
        if isinstance(raw_query, dict):
            if raw_query.get("metric") or raw_query.get("label"):
                metric = raw_query.get("metric") or ""
                definition = f"label_values({metric}, {raw_query.get('label', '')})" if metric else \
                    f"label_values({raw_query.get('label', '')})"
            else:
                definition = str(raw_query.get("query", ""))
            qpointer = pointer + "/query"
        else:
            definition = str(raw_query or var.get("definition") or "")
            qpointer = pointer + ("/query" if raw_query else "/definition")
        v = Variable(doc=var, pointer=pointer, name=str(var.get("name", "")), type=str(var.get("type", "")),
                     definition=definition)
        if v.type == "query" and definition:
            expr, label = grafana.split_variable_query(definition)
            v.label = label
            if expr:
                text = grafana.substitute(expr, variables)
                v.query = Query(text=text, source=expr, position=partial(dash.at, qpointer), subject=v.subject,
                                origin="variable", dashboard=dash)
                dash.queries.append(v.query)
            elif not definition.startswith(("label_values(", "label_names(", "metrics(", "query_result(")):
                text = grafana.substitute(definition, variables)
                v.query = Query(text=text, source=definition, position=partial(dash.at, qpointer),
                                subject=v.subject,
                                origin="variable", dashboard=dash)
                dash.queries.append(v.query)
        dash.variables.append(v)
    for panel in _panels(body):
        dash.panels.append(panel)
        for j, target in panel.targets:
            if not isinstance(target.get("expr"), str) or not target["expr"].strip():
                continue
            if not _prometheus(target.get("datasource"), panel.doc.get("datasource")):
                continue
            expr = target["expr"]
            ref = target.get("refId", j)
            query = Query(text=grafana.substitute(expr, variables), source=expr,
                          position=partial(dash.at, f"{panel.pointer}/targets/{j}/expr"),
                          subject=f"{dash.subject} {panel.subject} query {ref}", origin="panel", dashboard=dash)
            dash.queries.append(query)
    inputs.dashboards.append(dash)
    inputs.queries.extend(dash.queries)


def _panels(body: dict) -> list[Panel]:
    out = []
    for i, panel in enumerate(_list(body.get("panels"))):
        if not isinstance(panel, dict):
            continue
        pointer = f"/panels/{i}"
        out.append(Panel(panel, pointer, None))
        for j, inner in enumerate(_list(panel.get("panels"))):
            if isinstance(inner, dict):
                out.append(Panel(inner, f"{pointer}/panels/{j}", pointer))
    for r, row in enumerate(_list(body.get("rows"))):  # schemaVersion < 16 dashboards
        if isinstance(row, dict):
            for j, inner in enumerate(_list(row.get("panels"))):
                if isinstance(inner, dict):
                    out.append(Panel(inner, f"/rows/{r}/panels/{j}", f"/rows/{r}"))
    return out


def _list(value) -> list:
    """``value`` when it is a list, else [] (dashboards edited by hand can hold anything)."""
    return value if isinstance(value, list) else []


def _prometheus(*datasources) -> bool:
    """False when a target's (or else its panel's) datasource is known not to be Prometheus."""
    for ds in datasources:
        if isinstance(ds, dict) and ds.get("type"):
            return ds["type"] in ("prometheus", "datasource") or str(ds.get("uid", "")).startswith("$")
        if ds is not None:
            return True
    return True


def _unreadable(file: str, line: int, col: int, message: str) -> Finding:
    return Finding(check=UNREADABLE, severity="error", subject=file, message=message,
                   hint="fix the file; nothing in it was checked", location=Location(file, line, col))
