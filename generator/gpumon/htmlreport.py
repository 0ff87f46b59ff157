"""``--format html``: a validate report people can look at, in one self-contained file.

No CDN, no external font, no script: inline CSS and SVG written here, so the file opens offline,
attaches to a ticket and passes a strict Content-Security-Policy. Sections: the summary and tally,
the coverage matrix (rows: GPUs grouped by cluster and node; columns: spec'd fields; cells:
:mod:`gpumon.validate.coverage` states, each failing cell linking to its finding), the
findings, and the panel verdicts per dashboard (``validate --dashboards``).

Every cell carries ``data-state`` (and ``data-finding`` when a finding reports it), every finding
row ``id="f<N>"`` and ``data-check``, every panel row ``data-verdict``: tests (and scripts) read
the DOM instead of scraping text.
"""

from __future__ import annotations

from html import escape

from .findings import Report

#: cell state -> (colour, symbol, legend text)
STATES = {
    "present": ("#2e7d32", "", "present"),
    "missing": ("#c62828", "✕", "missing (required)"),
    "intermittent": ("#ef6c00", "~", "intermittent (share of scrapes)"),
    "implausible": ("#6a1b9a", "!", "implausible value"),
    "fallback": ("#1565c0", "↺", "served by a fallback (1.x name)"),
    "absent": ("#cfd8dc", "", "absent (optional/sparse)"),
    "n/a": ("#eceff1", "–", "not reported on MIG"),
    "down": ("#455a64", "↓", "target down"),
    "lost": ("#000000", "?", "GPU lost"),
}
VERDICT_COLOURS = {"panel-ok": "#2e7d32", "panel-no-data": "#c62828", "panel-query-error": "#b71c1c",
                   "panel-variable-empty": "#d84315", "panel-partial": "#ef6c00", "panel-masked": "#f9a825",
                   "panel-expected-empty": "#90a4ae", "panel-unsupported": "#607d8b",
                   "panel-not-evaluated": "#455a64", "panel-too-little-history": "#78909c"}
SEVERITY_COLOURS = {"error": "#c62828", "warning": "#ef6c00", "info": "#1565c0", "inconclusive": "#607d8b"}

_CSS = """
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px;color:#212121;background:#fafafa}
h1{font-size:22px;margin:0 0 8px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ddd}
h3{font-size:15px;margin:18px 0 6px}
dl.summary{display:grid;grid-template-columns:max-content auto;gap:2px 12px;margin:8px 0}
dl.summary dt{color:#616161}dl.summary dd{margin:0;font-family:ui-monospace,monospace}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;color:#fff;font-size:12px;margin-right:4px}
.verdict{font-weight:600;font-size:16px}
table{border-collapse:collapse;background:#fff}
table.list td,table.list th{border:1px solid #e0e0e0;padding:4px 6px;vertical-align:top;text-align:left}
table.list th{background:#f5f5f5}
table.matrix{font-size:12px}
table.matrix th.field{writing-mode:vertical-rl;transform:rotate(180deg);white-space:nowrap;padding:4px 2px;
 font-weight:normal;font-family:ui-monospace,monospace}
table.matrix th.node{background:#eceff1;text-align:left;padding:3px 6px}
table.matrix td.gpu{font-family:ui-monospace,monospace;padding:0 8px 0 16px;white-space:nowrap}
table.matrix td.cell{width:18px;height:18px;min-width:18px;text-align:center;color:#fff;border:1px solid #fff;
 font-weight:700}
table.matrix td.cell a{color:#fff;text-decoration:none;display:block}
.legend span{display:inline-flex;align-items:center;margin-right:14px;font-size:12px}
.legend svg{margin-right:4px}
.msg{max-width:900px}.hint{color:#616161;font-size:12px}
code{font-family:ui-monospace,monospace;font-size:12px}
"""


def _short(field: str) -> str:
    for prefix in ("DCGM_FI_DEV_", "DCGM_FI_PROF_", "DCGM_FI_"):
        if field.startswith(prefix):
            return field[len(prefix):]
    return field


def _swatch(colour: str) -> str:
    return (f'<svg width="14" height="14" viewBox="0 0 14 14" aria-hidden="true">'
            f'<rect width="14" height="14" rx="2" fill="{colour}"/></svg>')


def html(report: Report) -> str:
    """The whole report as one HTML document."""
    ids = {f"{f.check}: {f.subject}": f"f{i}" for i, f in enumerate(report.sorted_findings())}
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             f"<title>{escape(report.tool)} report</title><style>{_CSS}{_preview_css(report)}</style></head><body>"]
    parts += _summary(report)
    if report.coverage:
        parts += _matrix(report.coverage, ids)
    parts += _findings(report)
    if report.panels:
        parts += _panels(report.panels, ids)
    if report.previews:
        parts += _previews(report.previews)
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _summary(report: Report) -> list[str]:
    errors, inconclusive = report.count("error"), report.count("inconclusive")
    verdict, colour = (("FAILED", "#c62828") if errors else ("INCONCLUSIVE", "#607d8b") if inconclusive
                       else ("PASSED", "#2e7d32"))
    out = [f"<h1>{escape(report.tool)}</h1>",
           f'<p class="verdict" id="verdict" data-verdict="{verdict.lower()}" style="color:{colour}">{verdict}</p>',
           '<dl class="summary">']
    for key, value in report.summary.items():
        out.append(f"<dt>{escape(str(key))}</dt><dd>{escape(str(value))}</dd>")
    out.append("</dl><p id=\"tally\">")
    for sev, colour in SEVERITY_COLOURS.items():
        out.append(f'<span class="badge" data-severity="{sev}" data-count="{report.count(sev)}" '
                   f'style="background:{colour}">{report.count(sev)} {sev}</span>')
    out.append(f" {len(report.checks)} checks run</p>")
    if report.panels:
        counts: dict[str, int] = {}
        for p in report.panels:
            counts[p["verdict"]] = counts.get(p["verdict"], 0) + 1
        tally = ", ".join(f"{n} {v.removeprefix('panel-')}" for v, n in counts.items())
        out.append(f'<p id="panel-tally">Dashboard panels: {_bar(counts)}<br>{escape(tally)} '
                   '(<a href="#panels">verdicts</a>)</p>')
    return out


def _matrix(cov: dict, ids: dict[str, str]) -> list[str]:
    fields = cov["fields"]
    out = ['<h2 id="coverage">Coverage: GPUs × spec\'d fields</h2>', '<p class="legend">']
    for state, (colour, _, text) in STATES.items():
        n = cov["counts"].get(state, 0)
        out.append(f'<span>{_swatch(colour)}{escape(text)} ({n})</span>')
    out.append("</p>")
    clusters: dict[str, list[dict]] = {}
    for row in cov["rows"]:
        clusters.setdefault(row["cluster"], []).append(row)
    required = set(cov.get("required") or [])
    for cluster, rows in clusters.items():
        if cluster:
            out.append(f"<h3>Cluster {escape(cluster)}</h3>")
        out.append('<table class="matrix" data-cluster="' + escape(cluster) + '"><thead><tr><th></th>')
        for f in fields:
            mark = " *" if f in required else ""
            out.append(f'<th class="field" title="{escape(f)}">{escape(_short(f))}{mark}</th>')
        out.append("</tr></thead><tbody>")
        node = None
        for row in rows:
            if row["node"] != node:
                node = row["node"]
                out.append(f'<tr><th class="node" colspan="{len(fields) + 1}" data-node="{escape(node)}">'
                           f"node {escape(node or '?')}</th></tr>")
            mig = f" MIG {row['mig']}" if row["mig"] else ""
            out.append(f'<tr data-gpu="{escape(row["uuid"])}"><td class="gpu" title="{escape(row["uuid"])}">'
                       f"gpu {escape(row['gpu'] or '?')}{escape(mig)}</td>")
            for f in fields:
                out.append(_cell(row, f, ids))
            out.append("</tr>")
        out.append("</tbody></table>")
    for target in cov.get("dark_targets") or []:
        out.append(f'<p class="dark" data-target="{escape(target)}">{_swatch(STATES["down"][0])} target '
                   f"<code>{escape(target)}</code> is down and showed no GPU in the lookback: its GPUs are not in "
                   "the matrix (see target-down).</p>")
    out.append('<p class="hint">* required field. Hover a cell for details; coloured cells link to their finding.</p>')
    return out


def _cell(row: dict, field: str, ids: dict[str, str]) -> str:
    cell = row["cells"].get(field, {"state": "absent"})
    state = cell["state"]
    colour, symbol, text = STATES.get(state, ("#ffffff", "?", state))
    title = f"{field} on {row['node']} gpu {row['gpu']}: {text}"
    if "ratio" in cell:
        title += f" ({cell['ratio']:.0%} of scrapes)"
    attrs = f'class="cell" data-state="{escape(state)}" data-field="{escape(field)}" style="background:{colour}"'
    fid = ids.get(cell.get("finding", ""))
    if fid:
        attrs += f' data-finding="{fid}"'
        title += f" — {cell['finding']}"
        body = f'<a href="#{fid}">{symbol}</a>'
    else:
        body = symbol
    return f'<td {attrs} title="{escape(title)}">{body}</td>'


def _findings(report: Report) -> list[str]:
    out = ['<h2 id="findings">Findings</h2>']
    items = report.sorted_findings()
    if not items:
        return out + ["<p>No findings.</p>"]
    out.append('<table class="list"><thead><tr><th>severity</th><th>check</th><th>subject</th><th>finding</th>'
               "</tr></thead><tbody>")
    for i, f in enumerate(items):
        colour = SEVERITY_COLOURS[f.severity]
        where = f"<br><code>{escape(str(f.location))}</code>" if f.location else ""
        hint = f'<div class="hint">hint: {escape(f.hint)}</div>' if f.hint else ""
        out.append(f'<tr id="f{i}" data-check="{escape(f.check)}" data-severity="{f.severity}">'
                   f'<td><span class="badge" style="background:{colour}">{f.severity}</span></td>'
                   f"<td><code>{escape(f.check)}</code></td><td>{escape(f.subject)}{where}</td>"
                   f'<td class="msg">{escape(f.message)}{hint}</td></tr>')
    out.append("</tbody></table>")
    return out


def _bar(counts: dict[str, int], width: int = 600) -> str:
    """A stacked bar of verdict counts (inline SVG)."""
    total = sum(counts.values()) or 1
    x, rects = 0.0, []
    for verdict, n in counts.items():
        w = width * n / total
        rects.append(f'<rect x="{x:.1f}" y="0" width="{w:.1f}" height="16" fill="{VERDICT_COLOURS.get(verdict, "#999")}">'
                     f"<title>{escape(verdict)}: {n}</title></rect>")
        x += w
    return f'<svg width="{width}" height="16" role="img" aria-label="panel verdicts">{"".join(rects)}</svg>'


def _panels(panels: list[dict], ids: dict[str, str]) -> list[str]:
    out = ['<h2 id="panels">Dashboard panels on live data</h2>']
    dashboards: dict[tuple, list[dict]] = {}
    for p in panels:
        dashboards.setdefault((p["dashboard"], p["file"]), []).append(p)
    for (title, file), items in dashboards.items():
        counts: dict[str, int] = {}
        for p in items:
            counts[p["verdict"]] = counts.get(p["verdict"], 0) + 1
        tally = ", ".join(f"{n} {v.removeprefix('panel-')}" for v, n in counts.items())
        out.append(f'<h3>{escape(title)} <code>{escape(file)}</code></h3><p>{_bar(counts)}<br>{escape(tally)}</p>')
        out.append('<table class="list"><thead><tr><th>panel</th><th>row</th><th>verdict</th><th>why</th></tr>'
                   "</thead><tbody>")
        for p in items:
            colour = VERDICT_COLOURS.get(p["verdict"], "#999")
            causes = "".join(f'<div class="hint">explained by <a href="#{ids[c]}">{escape(c)}</a></div>' if c in ids
                             else f'<div class="hint">explained by {escape(c)}</div>' for c in p["causes"])
            out.append(f'<tr data-verdict="{escape(p["verdict"])}"><td>{escape(str(p["title"]))} '
                       f'<span class="hint">#{escape(str(p["panel_id"]))}</span></td><td>{escape(p["row"])}</td>'
                       f'<td><span class="badge" style="background:{colour}">{escape(p["verdict"].removeprefix("panel-"))}'
                       f'</span></td><td class="msg">{escape(p["message"])}{causes}</td></tr>')
        out.append("</tbody></table>")
    return out


def _preview_css(report: Report) -> str:
    if not report.previews:
        return ""
    from .preview.layout import CSS

    return CSS


def _previews(previews: list) -> list[str]:
    """Every dashboard drawn from the live data, on its own grid (:mod:`gpumon.preview`)."""
    from .preview.layout import section

    return ['<h2 id="preview">Dashboards on live data</h2>',
            '<p class="hint">Drawn by gpumon from the server\'s answers, as Grafana would show them; an empty '
            "panel says why (its verdict above).</p>"] + [section(p) for p in previews]
