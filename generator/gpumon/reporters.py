"""Render a :class:`~gpumon.findings.Report` as text, JSON, SARIF 2.1.0, JUnit XML or GitHub
workflow annotations. One function per format; ``render(report, fmt)`` picks one.

SARIF follows the OASIS SARIF 2.1.0 schema (the format GitHub code scanning uploads); GitHub
annotations follow the workflow-command syntax ``::error file=F,line=L,col=C,title=T::message``.
"""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import replace

from . import redact
from .findings import Finding, Location, Report
from .oneline import one_line, path_start

FORMATS = ("text", "json", "sarif", "junit", "github", "html")
_SARIF_LEVEL = {"error": "error", "warning": "warning", "info": "note", "inconclusive": "note"}
_GH_LEVEL = {"error": "error", "warning": "warning", "info": "notice", "inconclusive": "warning"}


def render(report: Report, fmt: str, *, color: bool = False, width: int = 120) -> str:
    """Render ``report`` in ``fmt`` (one of :data:`FORMATS`).

    Raises:
        ValueError: unknown format.
    """
    try:
        fn = {"text": text, "json": as_json, "sarif": sarif, "junit": junit, "github": github, "html": html}[fmt]
    except KeyError:
        raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}") from None
    # the one redaction step (gpumon.redact): on every field, then on the finished text, in
    # every format (a finding quoting a server reply may hold a secret the server echoed)
    report = _redacted(report) if redact.known() else report
    out = fn(report, color=color, width=width) if fmt == "text" else fn(report)
    return redact.redact(out)


def _redacted(report: Report) -> Report:
    r = redact.redact

    def one(f: Finding) -> Finding:
        return replace(f, subject=r(f.subject), message=r(f.message), hint=r(f.hint),
                       labels=tuple((k, r(v)) for k, v in f.labels), case=r(f.case) if f.case else f.case)

    return replace(report, findings=[one(f) for f in report.findings], checks=[r(c) for c in report.checks],
                   summary={k: r(v) if isinstance(v, str) else v for k, v in report.summary.items()})


def text(report: Report, *, color: bool = False, width: int = 120) -> str:
    """Human-readable report. Findings with a file position (lint) come first as compiler-style
    lines ``FILE:LINE:COL: severity check: subject: message`` (editors and terminals link them),
    sorted by file and line; the others (validate) as a table per check, failures first, each with
    its hint, in sections by what they ask of the reader: errors, warnings, could-not-tell, notes.
    Ends with a one-line tally. Every value from the input (file names, rule names, panel titles,
    label values) is one line (:func:`gpumon.oneline.one_line`): no line starts with its text."""
    from rich.console import Console  # only the text report draws tables: the others skip ~5 MB of imports

    buf = io.StringIO()
    console = Console(file=buf, force_terminal=color, no_color=not color, width=width, highlight=False,
                      soft_wrap=True)
    for key, value in report.summary.items():
        console.print(f"{key}: {one_line(value)}", markup=False)
    located = sorted((f for f in report.findings if f.location),
                     key=lambda f: (f.location.file, f.location.line, f.location.column, f.check))
    for f in located:
        where = f"{path_start(f.location.file)}:{f.location.line}:{f.location.column}"
        console.print(f"{where}: {f.severity} {f.check}: {one_line(f.subject)}: {one_line(f.message)}", markup=False)
        if f.hint:
            console.print(f"    hint: {one_line(f.hint)}", markup=False)
    unlocated = [f for f in report.sorted_findings() if not f.location]
    for severity, heading in _SECTIONS:
        by_check: dict[str, list[Finding]] = defaultdict(list)
        for f in unlocated:
            if f.severity == severity:
                by_check[f.check].append(f)
        if by_check:
            console.print(f"\n{heading} ({sum(map(len, by_check.values()))})", markup=False)
        for check, items in by_check.items():
            _check_table(console, check, items)
    tally = ", ".join(f"{report.count(s)} {s}" for s in ("error", "warning", "info", "inconclusive"))
    console.print(f"{report.tool}: {len(report.checks) or 'no'} checks run; {tally}", markup=False)
    return buf.getvalue()


#: the text report's sections, by what a finding asks of the reader
_SECTIONS = (("error", "== errors: fix these"), ("warning", "== warnings: look into these"),
             ("inconclusive", "== could not tell: fix access or rerun"), ("info", "== notes: nothing to do"))


def _check_table(console, check: str, items: list[Finding]) -> None:
    """One table of one check's findings, each with its hint (``console``: a rich Console)."""
    from rich.table import Table
    from rich.text import Text

    table = Table(title=Text(f"{check} ({len(items)})"), title_justify="left", show_lines=False, expand=False)
    table.add_column("severity", no_wrap=True)
    table.add_column("subject", overflow="fold")
    table.add_column("finding", overflow="fold")
    for f in items:
        body = one_line(f.message) + (f"\nhint: {one_line(f.hint)}" if f.hint else "")
        # Text, not str: a cell string is read as rich markup, and subjects and messages carry
        # panel titles and queries from the input ("[/bold]" ended in an error, "[link=...]" linked)
        table.add_row(Text(f.severity), Text(one_line(f.subject)), Text(body))
    console.print(table)


def as_json(report: Report) -> str:
    """``{"tool", "summary", "checks", "findings": [...]}`` with sorted keys."""
    doc = {"tool": report.tool, "summary": report.summary, "checks": report.checks,
           "findings": [f.as_dict() for f in report.sorted_findings()]}
    if report.panels:  # validate --dashboards: one verdict per panel
        doc["panels"] = report.panels
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def sarif(report: Report) -> str:
    """A SARIF 2.1.0 log with one run; rules are the check ids, results carry physical locations
    (file, line, column) when the finding has one."""
    rule_ids = sorted({f.check for f in report.findings})
    results = []
    for f in report.sorted_findings():
        result = {"ruleId": f.check, "ruleIndex": rule_ids.index(f.check), "level": _SARIF_LEVEL[f.severity],
                  "message": {"text": f"{f.subject}: {f.message}" + (f" Hint: {f.hint}" if f.hint else "")}}
        where = f.location or (Location(str(report.summary["spec"])) if report.summary.get("spec") else None)
        if where:
            # code scanning needs a location on every result; validate findings point at the spec
            result["locations"] = [{"physicalLocation": {
                "artifactLocation": {"uri": where.file},
                "region": {"startLine": max(1, where.line), "startColumn": max(1, where.column)}}}]
            if f.location and f.location.pointer:
                result["properties"] = {"jsonPointer": f.location.pointer}
        results.append(result)
    log = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{"tool": {"driver": {"name": "gpumon",
                                      "rules": [_sarif_rule(r, report) for r in rule_ids]}},
                  "results": results}],
    }
    return json.dumps(log, indent=2) + "\n"


def _sarif_rule(check: str, report: Report) -> dict:
    """A SARIF reportingDescriptor; with the check's docs, its help text and page (``helpUri``)."""
    rule: dict = {"id": check, "name": check, "shortDescription": {"text": check}}
    if check in report.docs:
        text, uri = report.docs[check]
        rule["help"] = {"text": text}
        rule["helpUri"] = uri
    return rule


def junit(report: Report) -> str:
    """JUnit XML: one test case per ran check id (``check/subject``); findings of severity error
    become failures, inconclusive ones are skipped, warnings/info go into system-out."""
    cases: dict[str, list[Finding]] = {name: [] for name in report.checks}
    for f in report.sorted_findings():
        cases.setdefault(f.case or f"{f.check}/{f.subject}", []).append(f)
    suite = ET.Element("testsuite", name=report.tool, tests=str(len(cases)))
    failures = skipped = 0
    for name in sorted(cases):
        check, _, subject = name.partition("/")
        case = ET.SubElement(suite, "testcase", classname=f"gpumon.{check}", name=subject or check)
        items = cases[name]
        errors = [f for f in items if f.severity == "error"]
        if errors:
            failures += 1
            node = ET.SubElement(case, "failure", message=errors[0].message[:200], type=check)
            node.text = "\n".join(f"{f.message}\nhint: {f.hint}" for f in errors)
        elif any(f.severity == "inconclusive" for f in items):
            skipped += 1
            ET.SubElement(case, "skipped", message=next(f.message for f in items if f.severity == "inconclusive"))
        others = [f for f in items if f.severity in ("warning", "info")]
        if others:
            ET.SubElement(case, "system-out").text = "\n".join(f"{f.severity}: {f.message}" for f in others)
    suite.set("failures", str(failures))
    suite.set("skipped", str(skipped))
    suites = ET.Element("testsuites")
    suites.append(suite)
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def _gh_escape(value: str, prop: bool = False) -> str:
    value = value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return value.replace(":", "%3A").replace(",", "%2C") if prop else value


def github(report: Report) -> str:
    """GitHub Actions workflow commands, one line per finding."""
    lines = []
    for f in report.sorted_findings():
        props = []
        if f.location:
            props += [f"file={_gh_escape(f.location.file, True)}", f"line={f.location.line}", f"col={f.location.column}"]
        props.append(f"title={_gh_escape(f'{f.check}: {f.subject}', True)}")
        msg = f.message + (f" Hint: {f.hint}" if f.hint else "")
        lines.append(f"::{_GH_LEVEL[f.severity]} {','.join(props)}::{_gh_escape(msg)}")
    return "\n".join(lines) + ("\n" if lines else "")


def html(report: Report) -> str:
    """One self-contained HTML file (:mod:`gpumon.htmlreport`)."""
    from .htmlreport import html as render_html

    return render_html(report)
