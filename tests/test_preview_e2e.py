"""``gpumon preview`` and the HTML report's preview against a REAL Prometheus scraping the
simulator (one field dropped on one node), with gpumon's rendered dashboards and a dashboard
whose title, legend and a recorded label value are hostile; then the page in headless Chromium:
its SVGs are laid out and the screenshot shows the series' and thresholds' colours."""

from __future__ import annotations

import json
import re
import struct
import zlib
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpumon import render
from gpumon.cli import cli
from gpumon.localprom import LocalPrometheus
from gpumon.preview import colours
from gpumon.simfaults import Fault
from gpumon.simserve import Simulator
from gpumon.simulate import Fleet
from gpumon.spec import parse_spec

from . import browser

DATA = Path(__file__).parent / "data"
SPEC_TEXT = (DATA / "validate-spec.yaml").read_text().replace("  for: 5m\n", "  for: 5m\n  slow_group_interval: 1s\n  gaps_group_interval: 1s\n", 1)
EVIL = "<script>alert('x')</script>\""
HOSTILE_RULES = {"groups": [{"name": "hostile", "interval": "1s", "rules": [
    {"record": "gpumon_test:hostile", "expr": f"label_replace(vector(1), \"evil\", {json.dumps(EVIL)}, \"\", \"\")"}]}]}
HOSTILE_DASHBOARD = {"title": EVIL, "uid": "evil", "time": {"from": "now-5m", "to": "now"}, "panels": [
    {"type": "timeseries", "title": EVIL, "id": 1, "gridPos": {"x": 0, "y": 0, "w": 12, "h": 8},
     "targets": [{"expr": "gpumon_test:hostile", "legendFormat": "{{evil}} '\"", "refId": "A"}]},
    {"type": "table", "title": "labels", "id": 2, "gridPos": {"x": 12, "y": 0, "w": 12, "h": 8},
     "targets": [{"expr": "gpumon_test:hostile", "instant": True, "format": "table", "refId": "A"}]},
    {"type": "heatmap", "title": "scrape durations", "id": 3, "gridPos": {"x": 0, "y": 8, "w": 24, "h": 8},
     "targets": [{"expr": "scrape_duration_seconds", "legendFormat": "{{instance}}", "refId": "A"}]}]}


@pytest.fixture(scope="module")
def env(tmp_path_factory, engine):
    tmp = tmp_path_factory.mktemp("preview")
    spec_path = tmp / "gpumon.yaml"
    spec_path.write_text(SPEC_TEXT)
    files = render.render(parse_spec(SPEC_TEXT, str(spec_path)))
    (tmp / "rules.yaml").write_text(files["rules/gpumon.rules.yaml"])
    (tmp / "hostile.rules.yaml").write_text(json.dumps(HOSTILE_RULES))
    dashboards = tmp / "dashboards"
    dashboards.mkdir()
    for name, text in files.items():
        if name.startswith("dashboards/"):
            (dashboards / name.split("/")[1]).write_text(text)
    (dashboards / "hostile.json").write_text(json.dumps(HOSTILE_DASHBOARD))
    with Simulator(Fleet(2, 2, [Fault("drop", metric="DCGM_FI_DEV_FB_USED", node="gpu-node-2")])) as sim:
        with LocalPrometheus({"dcgm-exporter": list(sim.targets.values())},
                             rule_files=[tmp / "rules.yaml", tmp / "hostile.rules.yaml"],
                             scrape_interval="1s", scrape_timeout="1s", evaluation_interval="1s",
                             binary=engine.prometheus) as prom:
            ready = prom.wait_for(lambda: len(prom.query('count_over_time(up{job="dcgm-exporter"}[1m]) >= 15')) == 2
                                  and prom.query("job_dcgm_field:gpumon_coverage:ratio")
                                  and prom.query("gpumon_test:hostile"), 120)
            assert ready and prom.settle(), prom.logs()
            yield {"prom": prom, "spec": spec_path, "dir": dashboards, "tmp": tmp}


class _Panels(HTMLParser):
    """The preview's panels (their data-* attributes) and, per panel, the SVG elements inside."""

    def __init__(self):
        super().__init__()
        self.panels: list[dict] = []
        self.stack: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "div" and "gp-panel" in (attrs.get("class") or ""):
            self.panels.append({**attrs, "svg": 0, "shapes": 0, "text": ""})
        elif self.panels and tag == "svg":
            self.panels[-1]["svg"] += 1
        elif self.panels and tag in ("polyline", "rect", "path", "circle"):
            self.panels[-1]["shapes"] += 1

    def handle_data(self, data):
        if self.panels:
            self.panels[-1]["text"] += data


def _preview(env, *args) -> tuple[int, str, str]:
    out = env["tmp"] / "preview.html"
    res = CliRunner().invoke(cli, ["preview", *map(str, args), "--prom", env["prom"].url, "--spec", str(env["spec"]),
                                   "--time-range", "2m", "-o", str(out)])
    return res.exit_code, res.output, out.read_text() if out.exists() else ""


@pytest.fixture(scope="module")
def page(env):
    code, output, html = _preview(env, env["dir"])
    assert code in (0, 1), output
    return code, output, html


def test_every_panel_of_every_dashboard_is_drawn_or_says_why(env, page):
    _, output, html = page
    parser = _Panels()
    parser.feed(html)
    docs = [json.loads(p.read_text()) for p in sorted(env["dir"].glob("*.json"))]
    expected = sum(1 for d in docs for p in d["panels"] for q in [p, *p.get("panels", [])] if q["type"] not in ("row", "text"))
    assert len(parser.panels) == expected and html.count('class="gp-dash"') == len(docs)
    states = {}
    for p in parser.panels:
        states[p["data-state"]] = states.get(p["data-state"], 0) + 1
        if p["data-state"] == "data":
            assert p["svg"] or "<table" in html, p
            assert p["shapes"] or p["data-type"] == "table", p
        else:
            assert "No data" in p["text"] or p["text"].strip(), p
    assert states["data"] > 0.7 * expected and not states.get("error"), states
    assert "panels with data" in output


def test_an_empty_panel_carries_validates_reason(page):
    _, _, html = page
    parser = _Panels()
    parser.feed(html)
    vgpu = [p for p in parser.panels if p.get("data-verdict") == "panel-no-data"]
    assert vgpu and all("VGPU_LICENSE_STATUS" in p["text"] for p in vgpu if "vGPU" in p["text"])


def test_the_dropped_field_shows_one_node_fewer(page):
    _, _, html = page
    panels = re.findall(r'title="Framebuffer used">.*?</div></div></div>', html, re.S)
    # the per-GPU panel of the GPU dashboard (the fleet's shows max/mean/min) lists gpu-node-1's GPUs only
    names = {n for p in panels for n in re.findall(r"gpu-node-\d GPU \d", p)}
    assert names and all(n.startswith("gpu-node-1") for n in names), names


def test_hostile_titles_legends_and_label_values_are_escaped(env):
    code, output, html = _preview(env, env["dir"] / "hostile.json")
    assert code in (0, 1), output
    assert "<script" not in html and "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;&quot;" in html
    parser = _Panels()
    parser.feed(html)
    assert [p["data-state"] for p in parser.panels] == ["data", "data", "data"]
    assert parser.panels[2]["shapes"] > 10  # a heatmap row per target, a cell per step


def test_validate_html_report_has_the_preview(env):
    out = env["tmp"] / "report.html"
    res = CliRunner().invoke(cli, ["validate", str(env["spec"]), "--prom", env["prom"].url, "--lookback", "20s",
                                   "--dashboards", str(env["dir"]), "--format", "html", "-o", str(out)])
    assert res.exit_code in (0, 1, 3), res.output
    html = out.read_text()
    assert 'id="preview"' in html and html.count('class="gp-dash"') == 4 and 'data-state="data"' in html


def _pixels(png: Path) -> set[tuple[int, int, int]]:
    """The distinct RGB colours of a PNG (8-bit RGB or RGBA, as Chromium writes them)."""
    data = png.read_bytes()
    pos, chunks, header = 8, [], None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            chunks.append(body)
        pos += 12 + length
    width, height, depth, ctype = header[:4]
    assert depth == 8 and ctype in (2, 6)
    bpp = 3 if ctype == 2 else 4
    raw, stride = zlib.decompress(b"".join(chunks)), width * bpp
    prev, seen = bytearray(stride), set()
    for y in range(height):
        line = raw[y * (stride + 1):(y + 1) * (stride + 1)]
        kind, row = line[0], bytearray(line[1:])
        for i in range(stride):
            a = row[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                row[i] = (row[i] + a) & 255
            elif kind == 2:
                row[i] = (row[i] + b) & 255
            elif kind == 3:
                row[i] = (row[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                row[i] = (row[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        seen.update(tuple(row[i:i + 3]) for i in range(0, stride, bpp * 2))
        prev = row
    return seen


def test_the_page_renders_in_chromium(env, tmp_path):
    code, output, html = _preview(env, env["dir"] / "gpumon-health.json")
    assert code in (0, 1), output
    page = tmp_path / "health.html"
    page.write_text(html)
    dom = browser.dump_dom(page)
    assert dom.count("<svg") >= 10 and dom.count('data-state="data"') >= 10
    shot = browser.screenshot(page, tmp_path / "health.png", width=1250, height=1400)
    seen = _pixels(shot)
    rgb = lambda h: tuple(int(h[i:i + 2], 16) for i in (1, 3, 5))  # noqa: E731
    # the stat tiles' threshold green and the panels' background are painted, and the lines' palette shows
    assert rgb(colours.NAMED["green"]) in seen and rgb("#181B1F") in seen
    assert len(seen) > 200


def test_the_page_can_go_to_stdout(env):
    res = CliRunner().invoke(cli, ["preview", str(env["dir"] / "hostile.json"), "--prom", env["prom"].url,
                                   "--spec", str(env["spec"]), "--time-range", "1m", "-o", "-"])
    assert res.exit_code in (0, 1), res.output
    assert res.output.startswith("<!DOCTYPE html>") and res.output.count('class="gp-panel"') == 3
