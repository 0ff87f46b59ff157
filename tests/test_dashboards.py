"""Grafana dashboards rendered from the spec: schema, queries, layout, conventions, golden files,
ConfigMaps, spec settings, coverage against the official dcgm-exporter dashboard, and one panel
query run against a real Prometheus."""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

import jsonschema
import promql_parser as pp
import pytest
import yaml

from gpumon import dashboards
from gpumon.dashboards import base, queries, units
from gpumon.render import render
from gpumon.rules import all_rules, build_groups, names
from gpumon.rules.promql import gpu_ids
from gpumon.spec import SpecError, default_spec_path, load_spec, parse_spec

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
SCHEMA = json.loads((DATA / "grafana-dashboard.jsonschema.json").read_text("utf-8"))
OFFICIAL = json.loads((DATA / "dcgm-exporter-dashboard.json").read_text("utf-8"))
#: a duration no gpumon rule uses, so a substituted ``$__rate_interval`` can be recognised
RATE_PROBE = "17m"
ALLOWED_PANEL_TYPES = {"row", "timeseries", "stat", "table", "state-timeline"}


# --------------------------------------------------------------------------- specs and helpers


def _dash_files(spec) -> dict[str, str]:
    return dashboards.files(spec, build_groups(spec))


def _spec_text() -> str:
    return default_spec_path().read_text("utf-8")


@pytest.fixture(scope="module")
def spec():
    return load_spec(default_spec_path())


@pytest.fixture(scope="module")
def cluster_spec():
    """The default spec with a cluster label and an absolute runbook URL."""
    text = _spec_text().replace("    cluster: null ", "    cluster: cluster ")
    text = text.replace("  runbook_url: ../runbooks ", "  runbook_url: https://runbooks.example.com/gpu ")
    return parse_spec(text, "cluster.yaml")


def _with_dashboards(section: str, name: str = "custom.yaml"):
    """The default spec with its ``dashboards`` section replaced by ``section`` (indented body)."""
    text = re.sub(r"^dashboards:.*?(?=^\S)", "", _spec_text(), flags=re.M | re.S)
    assert "\ndashboards:" not in text
    return parse_spec(text + "\ndashboards:\n" + section, name)


@lru_cache(maxsize=8)
def _models(spec) -> dict[str, dict]:
    """{name: dashboard dict} as written to disk (through JSON, like Grafana reads it); cached
    per spec, read-only."""
    return {name: json.loads(dashboards.output.to_json(model))
            for name, model in dashboards.build_all(spec, build_groups(spec)).items()}


def _panels(dash: dict) -> list[dict]:
    """Every panel, including those nested in collapsed rows."""
    out = []
    for p in dash["panels"]:
        out.append(p)
        out.extend(p.get("panels", []))
    return out


def _targets(dash: dict, annotations: bool = False):
    """(panel, query) pairs; with ``annotations``, annotation queries too (panel = annotation)."""
    for p in _panels(dash):
        for t in p.get("targets", []):
            yield p, t
    if annotations:
        for a in dash["annotations"].get("list", []):
            yield {"title": f"annotation {a['name']}"}, a


def _grafana_to_promql(expr: str, rate: str = "5m") -> str:
    """Substitute Grafana macros by durations and template variables by a regex, as Grafana
    would before sending the query."""
    expr = expr.replace("$__rate_interval", rate)
    expr = re.sub(r"\$__(interval|range)\b", "5m", expr)
    expr = re.sub(r"\$\{\w+(:\w+)?\}", ".*", expr)
    return re.sub(r"\$[A-Za-z_]\w*", ".*", expr)  # $1 (label_replace references) is not a variable


def _metric_names(node) -> set[str]:
    """Metric names read by a parsed PromQL expression; ``{__name__=~"a|b"}`` yields a and b."""
    found: set[str] = set()

    def visit(n):
        if isinstance(n, pp.VectorSelector):
            if n.name:
                found.add(n.name)
            for m in n.matchers.matchers:
                if m.name == "__name__":
                    assert str(m.op) in ("MatchOp.Equal", "MatchOp.Re", "=", "=~"), m
                    found.update(m.value.split("|"))

    pp.walk(node, visit)
    return found


@lru_cache(maxsize=8)
def _allowed(spec) -> set[str]:
    return set(spec.metric_names) | queries.recorded(build_groups(spec)) | {"up", "ALERTS"}


def _ok_name(spec, name: str) -> bool:
    return name in _allowed(spec) or name.startswith("scrape_")


# --------------------------------------------------------------------------- Grafana schema and types


@pytest.mark.parametrize("which", ["spec", "cluster_spec"])
def test_every_dashboard_validates_against_grafana_schema(which, request):
    validator = jsonschema.Draft7Validator(SCHEMA)
    models = _models(request.getfixturevalue(which))
    assert len(models) == 3
    for name, dash in models.items():
        errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(dash)]
        assert errors == [], name


def test_only_current_panel_types(spec):
    for name, dash in _models(spec).items():
        types = {p["type"] for p in _panels(dash)}
        assert types <= ALLOWED_PANEL_TYPES, (name, types - ALLOWED_PANEL_TYPES)


# --------------------------------------------------------------------------- queries


@pytest.mark.parametrize("which", ["spec", "cluster_spec"])
def test_every_query_parses_and_reads_only_known_series(which, request):
    spec = request.getfixturevalue(which)
    count = 0
    for name, dash in _models(spec).items():
        for panel, target in _targets(dash, annotations=True):
            expr = _grafana_to_promql(target["expr"])
            try:
                parsed = pp.parse(expr)
            except Exception as exc:  # promql-parser raises a plain ValueError-like error
                pytest.fail(f"{name}: {panel['title']}: {exc}\n{expr}")
            unknown = {n for n in _metric_names(parsed) if not _ok_name(spec, n)}
            assert not unknown, (name, panel["title"], unknown)
            count += 1
    assert count > 50


def test_variable_queries_parse_and_use_the_inventory(cluster_spec):
    dash = _models(cluster_spec)[f"{cluster_spec.name}-gpu"]
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    assert list(variables) == ["datasource", "cluster", "node", "gpu"]
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    for key in ("cluster", "node", "gpu"):
        match = re.fullmatch(r"label_values\((.+), (\w+)\)", variables[key]["query"])
        assert match, variables[key]["query"]
        assert _metric_names(pp.parse(_grafana_to_promql(match.group(1)))) == {names.INVENTORY}
    lab = cluster_spec.exporter.labels
    assert variables["node"]["query"].endswith(f", {lab.node})")
    assert variables["gpu"]["query"].endswith(f", {lab.gpu})")


def test_no_cluster_variable_without_cluster_label(spec):
    for dash in _models(spec).values():
        assert "cluster" not in {v["name"] for v in dash["templating"]["list"]}
        assert "$cluster" not in json.dumps(dash)


def test_rates_use_rate_interval_and_a_floor_of_two_samples(spec):
    """Every rate()/increase() window is ``$__rate_interval``, and panels with rates floor
    ``$__interval`` at 2 x max(scrape, collect interval) (prometheus/prometheus#1428)."""
    from gpumon.durations import format_duration
    seen = 0
    for dash in _models(spec).values():
        for panel, target in _targets(dash):
            parsed = pp.parse(_grafana_to_promql(target["expr"], RATE_PROBE))
            windows = []

            def visit(n):
                if isinstance(n, pp.Call) and n.func.name in ("rate", "irate", "increase"):
                    windows.append(str(n.args[0]).rsplit("[", 1)[1])

            pp.walk(parsed, visit)
            for w in windows:
                assert w == f"{RATE_PROBE}]", (panel["title"], target["expr"])
            if windows:
                seen += 1
                assert panel["interval"] == format_duration(spec.exporter.min_rate_window), panel["title"]
    assert seen > 0


def test_datasource_is_always_the_variable(spec):
    ref = {"type": "prometheus", "uid": "${datasource}"}
    for name, dash in _models(spec).items():
        text = json.dumps(dash)
        assert "__inputs" not in dash and "DS_PROMETHEUS" not in text
        assert all(a["datasource"] == ref for a in dash["annotations"]["list"]), name
        for p in _panels(dash):
            if p["type"] != "row":
                assert p["datasource"] == ref, (name, p["title"])
                assert all(t["datasource"] == ref for t in p["targets"]), (name, p["title"])


# --------------------------------------------------------------------------- layout


def assert_layout(models: dict) -> None:
    """Unique positive panel ids, panels inside the 24-column grid, no overlapping gridPos."""
    for name, dash in models.items():
        panels = _panels(dash)
        ids = [p["id"] for p in panels]
        assert len(ids) == len(set(ids)) and all(isinstance(i, int) and i > 0 for i in ids), name
        cells: dict[tuple[int, int], int] = {}
        for p in panels:
            g = p["gridPos"]
            assert 0 <= g["x"] and g["x"] + g["w"] <= 24 and g["h"] > 0, (name, p["title"])
            for x in range(g["x"], g["x"] + g["w"]):
                for y in range(g["y"], g["y"] + g["h"]):
                    assert (x, y) not in cells, (name, p["title"], "overlaps panel", cells[(x, y)])
                    cells[(x, y)] = p["id"]


@pytest.mark.parametrize("which", ["spec", "cluster_spec"])
def test_panel_ids_unique_and_grid_positions_do_not_overlap(which, request):
    assert_layout(_models(request.getfixturevalue(which)))


def test_every_panel_has_a_unit_and_a_visible_legend(spec):
    for name, dash in _models(spec).items():
        for p in _panels(dash):
            if p["type"] == "row":
                continue
            assert p["fieldConfig"]["defaults"].get("unit"), (name, p["title"])
            if "legend" in p.get("options", {}):
                assert p["options"]["legend"]["showLegend"] is True, (name, p["title"])


def test_every_required_metric_has_a_panel_on_fleet_and_detail(spec):
    models = _models(spec)
    for key in ("fleet", "gpu"):
        exprs = [t["expr"] for _, t in _targets(models[f"{spec.name}-{key}"])]
        for m in spec.required_metrics:
            assert any(re.search(rf"\b{m.name}\{{", e) for e in exprs), (key, m.name)


# --------------------------------------------------------------------------- conventions from the spec


def _panel(dash: dict, title: str) -> dict:
    return next(p for p in _panels(dash) if p["title"] == title)


def test_units_and_thresholds_come_from_the_spec(spec):
    fleet = _models(spec)[f"{spec.name}-fleet"]
    for m in spec.metrics:
        if m.presence == "sparse":
            continue
        p = _panel(fleet, units.title(m))
        plot = units.plot(m)
        assert p["fieldConfig"]["defaults"]["unit"] == plot.unit
        steps = p["fieldConfig"]["defaults"]["thresholds"]["steps"] if m.thresholds else []
        # one step per distinct threshold value (plus the base), at the spec's values
        assert [s["value"] for s in steps[1:]] == sorted({t.value / plot.divisor for t in m.thresholds})
        for t in m.thresholds:
            step = next(s for s in steps if s["value"] == t.value / plot.divisor)
            worst = max((x for x in m.thresholds if x.value <= t.value),
                        key=lambda x: ["info", "warning", "critical"].index(x.severity))
            assert step["color"] == {"info": "blue", "warning": "orange", "critical": "red"}[worst.severity]


def test_unit_mapping_uses_grafana_ids():
    # Grafana unit ids: mbytes is MiB (IEC); decmbytes would be SI megabytes
    assert units.GAUGE_UNITS["MiB"][0] == "mbytes"
    assert units.GAUGE_UNITS["MHz"][0] == "rotmhz"
    assert units.GAUGE_UNITS["watts"][0] == "watt"
    assert units.GAUGE_UNITS["ratio"][0] == "percentunit"
    schema_units = set(json.loads((ROOT / "generator/gpumon/schema/gpumon.schema.json").read_text())
                       ["definitions"]["metric"]["properties"]["unit"]["enum"])
    assert schema_units == set(units.GAUGE_UNITS)


def test_energy_counter_is_plotted_as_watts(spec):
    m = next(m for m in spec.metrics if m.kind == "counter" and m.unit == "millijoules")
    panel = _panel(_models(spec)[f"{spec.name}-fleet"], f"{m.title}: power drawn")  # the title says what it shows
    assert panel["fieldConfig"]["defaults"]["unit"] == "watt"
    assert all("rate(" in t["expr"] and "/ 1000" in t["expr"] for t in panel["targets"])


def test_low_thresholds_colour_the_region_below():
    text = _spec_text().replace(
        "      - {alert: GpuPowerHigh, severity: warning, op: \">\", value: 700, for: 10m}",
        "      - {alert: GpuPowerHigh, severity: warning, op: \">\", value: 700, for: 10m}\n"
        "      - {alert: GpuPowerLow, severity: critical, op: \"<\", value: 50, for: 10m}")
    spec = parse_spec(text, "low.yaml")
    m = spec.metric("DCGM_FI_DEV_POWER_USAGE")
    steps = _panel(_models(spec)[f"{spec.name}-fleet"], m.title)["fieldConfig"]["defaults"]["thresholds"]["steps"]
    assert [(s["value"], s["color"]) for s in steps] == [(None, "red"), (50, "green"), (700, "orange")]


def test_mig_device_fields_are_deduplicated_by_uuid(spec):
    lab = spec.exporter.labels
    detail = _models(spec)[f"{spec.name}-gpu"]
    for m in spec.required_metrics:
        expr = _panel(detail, units.title(m))["targets"][0]["expr"]
        assert f"max by ({', '.join(gpu_ids(spec, m))})" in expr
        assert (lab.mig_instance in expr.split("(", 2)[1]) == (m.mig != "device"), (m.name, expr)


def test_gpu_legends_use_identity_labels_not_instance(spec):
    lab = spec.exporter.labels
    for name, dash in _models(spec).items():
        for p, t in _targets(dash):
            legend = t.get("legendFormat", "")
            if "{{instance}}" in legend:
                # per-target panels: the node label first, the address only as a fallback
                assert legend.startswith(f"{{{{{lab.node}}}}}"), (name, p["title"], legend)
            if lab.gpu_index in legend:
                assert f"{{{{{lab.node}}}}}" in legend, (name, p["title"], legend)


def test_empty_panels_say_why_and_link_runbooks(spec, cluster_spec):
    health = _models(spec)[f"{spec.name}-health"]
    missing = _panel(health, "GPUs missing a required field now")
    # relative runbook_url: no link (it would resolve against Grafana), and the text names the rendered
    # file rather than a path relative to the rules file, which the dashboard's reader cannot see
    assert not spec.alerts.runbook_url.startswith("http")
    assert missing["fieldConfig"]["defaults"]["noValue"].endswith(
        "Runbook: runbooks/GpuMetricMissing.md in gpumon's rendered output")
    assert "links" not in missing
    gaps = next(p for p in _panels(health) if p["type"] == "state-timeline" and "Gaps" in p["title"])
    assert "GpuMetricIntermittent.md" in gaps["fieldConfig"]["defaults"]["noValue"]
    absolute = _models(cluster_spec)[f"{cluster_spec.name}-health"]
    absolute_missing = _panel(absolute, "GPUs missing a required field now")
    assert absolute_missing["links"][0]["url"] == "https://runbooks.example.com/gpu/GpuMetricMissing.md"
    assert absolute_missing["fieldConfig"]["defaults"]["noValue"].endswith(
        "Runbook: https://runbooks.example.com/gpu/GpuMetricMissing.md")
    # every health panel that can be empty says so (counts with "or vector(0)" cannot)
    for p in _panels(health):
        if p["type"] != "row" and not any("or vector(0)" in t["expr"] for t in p["targets"]):
            assert p["fieldConfig"]["defaults"].get("noValue"), p["title"]


def test_tables_link_rows_to_the_detail_dashboard(spec, cluster_spec):
    lab = cluster_spec.exporter.labels
    health = _models(cluster_spec)[f"{cluster_spec.name}-health"]
    links = _panel(health, "GPUs missing a required field now")["fieldConfig"]["defaults"]["links"]
    url = links[0]["url"]
    assert url.startswith(f"/d/{base.uid(cluster_spec, 'gpu')}?")
    for var, field in (("node", lab.node), ("gpu", lab.gpu), ("cluster", lab.cluster)):
        assert f"var-{var}=${{__data.fields.{field}}}" in url
    lost = next(p for p in _panels(_models(spec)[f"{spec.name}-health"]) if p["title"].startswith("GPUs lost"))
    assert "var-gpu" not in lost["fieldConfig"]["defaults"]["links"][0]["url"]  # a lost GPU is not in the picker


def test_firing_alerts_are_gpumon_alerts(spec):
    expr = queries.firing_alerts(spec, build_groups(spec))
    matcher = re.search(r'alertname=~"([^"]+)"', expr).group(1)
    assert set(matcher.split("|")) == {r.alert for r in all_rules(spec) if r.alert}
    assert {"GpuMetricMissing", "GpuExporterDown", "GpuXidCritical"} <= set(matcher.split("|"))


# --------------------------------------------------------------------------- uids, files, golden


def test_uids_are_stable_and_derived_from_the_spec_name(spec):
    models = _models(spec)
    assert {d["uid"] for d in models.values()} == {f"{spec.name}-fleet", f"{spec.name}-gpu", f"{spec.name}-health"}
    long = parse_spec(_spec_text().replace("name: gpumon", "name: " + "a" * 50, 1), "long.yaml")
    uid = base.uid(long, "health")
    assert len(uid) <= 40 and uid == base.uid(long, "health") and uid != base.uid(long, "fleet")


def test_render_matches_committed_output(spec):
    """Golden files: the committed output/ is what the default spec renders (run `make render`)."""
    rendered = {p: t for p, t in render(spec).items() if p.startswith("dashboards/") or "grafana-dashboard" in p}
    assert len(rendered) == 6
    for path, text in rendered.items():
        assert (ROOT / "output" / path).read_text("utf-8") == text, f"{path} is stale: run make render"


def test_json_is_deterministic_and_sorted(spec):
    first, second = dashboards.files(spec, build_groups(spec)), dashboards.files(spec, build_groups(spec))
    assert first == second
    for path, text in first.items():
        if path.endswith(".json"):
            assert text == json.dumps(json.loads(text), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def test_configmaps_for_the_grafana_sidecar(spec):
    files = dashboards.files(spec, build_groups(spec))
    for name in dashboards.build_all(spec, build_groups(spec)):
        doc = yaml.safe_load(files[f"kubernetes/grafana-dashboard-{name}.yaml"])
        assert doc["kind"] == "ConfigMap" and doc["metadata"]["labels"]["grafana_dashboard"] == "1"
        assert "annotations" not in doc["metadata"]
        assert doc["data"] == {f"{name}.json": files[f"dashboards/{name}.json"]}
        # kubectl apply (client side) stores the object in a 256 KiB annotation
        assert len(files[f"kubernetes/grafana-dashboard-{name}.yaml"].encode()) < 262144


def test_dashboards_section_configures_labels_folder_and_files():
    spec = _with_dashboards("  title_prefix: 'prod: '\n  tags: [team-ml]\n  configmap:\n"
                            "    namespace: grafana\n    label: example.com/dashboard\n    label_value: gpu\n"
                            "    folder_annotation: k8s-sidecar-target-directory\n    folder: GPU\n")
    files = dashboards.files(spec, build_groups(spec))
    doc = yaml.safe_load(files["kubernetes/grafana-dashboard-gpumon-fleet.yaml"])
    assert doc["metadata"]["namespace"] == "grafana"
    assert doc["metadata"]["labels"]["example.com/dashboard"] == "gpu"
    assert doc["metadata"]["annotations"] == {"k8s-sidecar-target-directory": "GPU"}
    fleet = json.loads(files["dashboards/gpumon-fleet.json"])
    assert fleet["title"].startswith("prod: ") and fleet["tags"] == ["gpumon", "team-ml"]
    only_json = _dash_files(_with_dashboards("  configmap: {enabled: false}\n"))
    assert sorted(only_json) == ["dashboards/gpumon-fleet.json", "dashboards/gpumon-gpu.json",
                                 "dashboards/gpumon-health.json"]
    assert _dash_files(_with_dashboards("  enabled: false\n")) == {}
    # the folder annotation defaults to k8s-sidecar's own FOLDER_ANNOTATION default
    default_key = yaml.safe_load(_dash_files(_with_dashboards("  configmap: {folder: GPU}\n"))
                                 ["kubernetes/grafana-dashboard-gpumon-health.yaml"])
    assert default_key["metadata"]["annotations"] == {"k8s-sidecar-target-directory": "GPU"}


def test_dashboards_section_rejects_unknown_keys():
    with pytest.raises(SpecError) as err:
        _with_dashboards("  configmap:\n    lable: grafana_dashboard\n", "bad.yaml")
    assert "dashboards.configmap.lable: unknown key 'lable'; did you mean 'label'?" in str(err.value)
    assert str(err.value).startswith("bad.yaml:")


# --------------------------------------------------------------------------- against the official dashboard


def test_covers_everything_the_official_dashboard_shows_and_more(spec):
    """Side by side with NVIDIA's dashboard (gnetId 12239): every field it plots is plotted here;
    it lacks what gpumon adds (XID, coverage, gaps, MIG instance, inventory-based node picker)."""
    official_exprs = [t["expr"] for p in OFFICIAL["panels"] for t in p.get("targets", [])]
    official_metrics = set().union(*(_metric_names(pp.parse(_grafana_to_promql(e))) for e in official_exprs))
    ours = _models(spec)
    our_metrics = set().union(*(_metric_names(pp.parse(_grafana_to_promql(t["expr"])))
                                for d in ours.values() for _, t in _targets(d)))
    assert official_metrics & spec.metric_names <= our_metrics
    official_text = json.dumps(OFFICIAL)
    ours_text = json.dumps(ours)
    # what gpumon adds
    for needle in ("DCGM_FI_DEV_XID_ERRORS", names.COVERAGE, queries.gap_ratio(spec),
                   spec.exporter.labels.mig_instance):
        assert needle not in official_text and needle in ours_text, needle
    official_vars = {v["name"]: v.get("query", "") for v in OFFICIAL["templating"]["list"]}
    assert "DCGM_FI_DEV_GPU_TEMP" in str(official_vars)  # the anchor NVIDIA/dcgm-exporter#236 is about
    assert "node" not in official_vars and "instance" in official_vars
    assert {p["type"] for p in OFFICIAL["panels"]} & {"graph"}  # deprecated Angular panel (grafana/grafana#100589)


# --------------------------------------------------------------------------- against a real Prometheus


MIG_POWER = 100
POWER = "DCGM_FI_DEV_POWER_USAGE"


def _exposition(spec, missing: str) -> str:
    """Node ``node-a``: GPUs 0 and 1 (GPU 1 lacks ``missing``), and GPU 2 split into two MIG
    instances that repeat the device-wide fields and lack the fields DCGM does not report per
    instance."""
    lab = spec.exporter.labels
    lines = []
    for m in spec.required_metrics:
        lines.append(f"# TYPE {m.name} gauge")
        for i in (0, 1):
            if i == 1 and m.name == missing:
                continue
            labels = f'{lab.gpu_index}="{i}",{lab.gpu}="GPU-{i:08d}",{lab.node}="node-a",{lab.model}="H100"'
            lines.append(f"{m.name}{{{labels}}} {50 + i}")
        if m.mig != "unsupported":
            for inst in ("1", "2"):
                labels = (f'{lab.gpu_index}="2",{lab.gpu}="GPU-00000002",{lab.node}="node-a",'
                          f'{lab.model}="H100",{lab.mig_instance}="{inst}"')
                lines.append(f"{m.name}{{{labels}}} {MIG_POWER if m.name == POWER else 50}")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def prom(spec, tmp_path_factory, engine):
    """A real Prometheus scraping the exposition above every second, with gpumon's rules loaded;
    yields once the inventory recording rule has all four GPU entities."""
    from gpumon.localprom import LocalPrometheus
    from gpumon.loopback import ExpositionServer

    rules = tmp_path_factory.mktemp("rules") / "gpumon.rules.yaml"
    # the slow groups evaluate every minute, the gaps group every 3; every second here, so the test is quick
    text = re.sub(r"(?m)^  interval: (1m|3m)$", "  interval: 1s", render(spec)[f"rules/{spec.name}.rules.yaml"])
    rules.write_text(text, "utf-8")
    # the field the official dashboard anchors its pickers on (NVIDIA/dcgm-exporter#236)
    missing = "DCGM_FI_DEV_GPU_TEMP" if spec.metric("DCGM_FI_DEV_GPU_TEMP") else spec.required_metrics[0].name
    with ExpositionServer(lambda: _exposition(spec, missing)) as exporter, \
            LocalPrometheus({spec.exporter.job: [exporter.address]}, rule_files=[rules],
                            binary=engine.prometheus) as server:
        # (with the job, as every reader of gpumon's records: the inventory rule's mark has none)
        ready = server.wait_for(lambda: len(server.query(f'{names.INVENTORY}{{job="{spec.exporter.job}"}}')) == 4,
                                timeout=60)
        assert ready, server.logs()
        # the energy-derived and node rules need a few evaluations after the inventory
        assert server.wait_for(lambda: server.query(f"{names.node_sum(POWER)}"), timeout=30), server.logs()
        assert server.wait_for(lambda: server.query(names.COVERAGE), timeout=30), server.logs()
        yield server, missing


def test_every_panel_query_runs_on_a_real_prometheus(spec, prom):
    """Every panel query of every dashboard executes (no parse or matching error, e.g. a
    many-to-many join); Prometheus answers HTTP 400/422 on those and query() raises."""
    server, _ = prom
    shown: dict[str, bool] = {}
    for name, dash in _models(spec).items():
        for panel, target in _targets(dash, annotations=True):
            result = server.query(_grafana_to_promql(target["expr"], "1m"))
            shown[panel["title"]] = shown.get(panel["title"], False) or bool(result)
        for var in dash["templating"]["list"]:
            if var["type"] == "query":
                selector = re.fullmatch(r"label_values\((.+), \w+\)", var["query"]).group(1)
                assert server.query(_grafana_to_promql(selector)), var["name"]
    # panels that must show data for this fleet
    titles = {title for title, data in shown.items() if not data}
    for must in ("GPUs reporting", "Exporter targets up", "Target health", "GPUs missing a required field now",
                 "Required fields: share of GPUs reporting", "Fleet power draw", "GPUs"):
        assert must not in titles, must


def test_health_panel_lists_the_gpu_missing_a_field(spec, prom):
    """The "GPUs missing a required field now" panel names exactly the GPU and field missing;
    MIG instances are not reported for fields DCGM does not collect per instance."""
    server, missing = prom
    health = _models(spec)[f"{spec.name}-health"]
    expr = _grafana_to_promql(_panel(health, "GPUs missing a required field now")["targets"][0]["expr"])
    lab = spec.exporter.labels
    result = server.query(expr)
    assert [(r["metric"][lab.gpu], r["metric"][names.FIELD_LABEL]) for r in result] == [("GPU-00000001", missing)]


def test_fleet_power_counts_each_mig_gpu_once(spec, prom):
    server, _ = prom
    fleet = _models(spec)[f"{spec.name}-fleet"]
    panel = _panel(fleet, "Fleet power draw")
    value = float(server.query(_grafana_to_promql(panel["targets"][0]["expr"]))[0]["value"][1])
    assert value == 50 + 51 + MIG_POWER  # two plain GPUs, and the MIG GPU once, not once per instance


def test_gpu_picker_lists_a_gpu_without_the_temperature_field(spec, prom):
    """NVIDIA/dcgm-exporter#236, the ``gpu`` variable comes from the inventory, so GPU 1, which lacks the field the
    official dashboard builds its picker from, is still listed."""
    server, missing = prom
    variables = {v["name"]: v for v in _models(spec)[f"{spec.name}-gpu"]["templating"]["list"]}
    selector = re.fullmatch(r"label_values\((.+), \w+\)", variables["gpu"]["query"]).group(1)
    uuids = {r["metric"][spec.exporter.labels.gpu] for r in server.query(_grafana_to_promql(selector))}
    assert uuids == {"GPU-00000000", "GPU-00000001", "GPU-00000002"}
    assert not any(r["metric"][spec.exporter.labels.gpu] == "GPU-00000001"
                   for r in server.query(f'{missing}{{job="{spec.exporter.job}"}}'))
