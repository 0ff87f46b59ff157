"""Dashboards of a spec with a ``kubernetes`` section: the monitoring-health row "Exporter and
inventory" and the fleet overview's expected-GPU stats. Grafana schema, queries, layout and
conventions on the example spec (with and without a cluster label) and on a static expectation;
then the new panels against a real Prometheus scraping dcgm-exporter stand-ins and the
kube-state-metrics stand-in of tests/test_kubernetes.py."""

from __future__ import annotations

import re


import jsonschema
import promql_parser as pp
import pytest

from gpumon.dashboards import kube as kube_panels
from gpumon.rules import build_groups, names
from gpumon.spec import load_spec, parse_spec

from .ksm_text import Node, Pod
from .test_dashboards import SCHEMA, _allowed, assert_layout, _grafana_to_promql, _metric_names, _models, _panels, _targets
from . import test_kubernetes
from .test_kubernetes import DCGM_METRICS, EXAMPLE, FAST, _section

ROW = kube_panels.ROW
#: tests/test_kubernetes.py's module-scoped cluster fixture, shared by name
cluster = test_kubernetes.cluster
POD_PANELS = {"Exporter pods ready / desired", "Exporter pods not ready", "Exporter restarts in 1h",
              "Exporter OOM kills in 1h", "Exporter restarts per node"}
NODE_PANELS = {"GPUs expected", "GPUs missing", "Physical GPUs reporting", "Nodes without an exporter target",
               "Expected vs reported GPUs per node", "GPU nodes without an exporter target", "Missing GPUs per node"}


@pytest.fixture(scope="module")
def example():
    return load_spec(EXAMPLE)


@pytest.fixture(scope="module")
def example_cluster():
    """The example with a cluster label and an absolute runbook URL."""
    text = EXAMPLE.read_text().replace("    cluster: null ", "    cluster: cluster ")
    text = text.replace("  runbook_url: ../runbooks ", "  runbook_url: https://runbooks.example.com/gpu ")
    return parse_spec(text, "cluster.yaml")


@pytest.fixture(scope="module")
def static():
    """Bare metal: the bundled spec with a static expectation and no kube-state-metrics."""
    return parse_spec(_section("""\
        kubernetes:
          static:
            nodes: [{name: dgx-a1, gpus: 8}]
            patterns: [{match: "l4-.*", gpus: 4}]
            default: 8
        """), "static.yaml")


SPECS = ["example", "example_cluster", "static"]


def _row_panels(dash: dict) -> list[dict]:
    """Panels between the "Exporter and inventory" row and the next row."""
    panels = _panels(dash)
    start = next(i for i, p in enumerate(panels) if p["type"] == "row" and p["title"] == ROW)
    out = []
    for p in panels[start + 1:]:
        if p["type"] == "row":
            break
        out.append(p)
    return out


def _health(spec) -> dict:
    return _models(spec)[f"{spec.name}-health"]


def _by_title(dash: dict) -> dict[str, dict]:
    return {p["title"]: p for p in _panels(dash)}


@pytest.fixture(scope="module")
def kube_series(example) -> set[str]:
    """Series the kubernetes rule group reads (kube-state-metrics names checked in
    generator/gpumon/rules/kubernetes.py against its docs): the only non-gpumon series the row may read."""
    group = next(g for g in build_groups(example) if g.name == f"{example.name}.kubernetes")
    read = set().union(*(_metric_names(pp.parse(r.expr)) for r in group.rules))
    return {n for n in read if n.startswith("kube_")} | {"up"}


# --------------------------------------------------------------------------- schema, queries, layout


@pytest.mark.parametrize("which", SPECS)
def test_dashboards_validate_against_grafana_schema(which, request):
    validator = jsonschema.Draft7Validator(SCHEMA)
    models = _models(request.getfixturevalue(which))
    assert len(models) == 3
    for name, dash in models.items():
        errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(dash)]
        assert errors == [], name


@pytest.mark.parametrize("which", SPECS)
def test_queries_parse_and_read_only_known_series(which, request, kube_series):
    spec = request.getfixturevalue(which)
    allowed = _allowed(spec) | kube_series
    row_reads: set[str] = set()
    for name, dash in _models(spec).items():
        row = {p["id"] for p in _row_panels(dash)} if name.endswith("-health") else set()
        for panel, target in _targets(dash, annotations=True):
            expr = _grafana_to_promql(target["expr"])
            try:
                parsed = pp.parse(expr)
            except Exception as exc:  # promql-parser raises a plain ValueError-like error
                pytest.fail(f"{name}: {panel['title']}: {exc}\n{expr}")
            read = _metric_names(parsed)
            unknown = {n for n in read if n not in allowed and not n.startswith("scrape_")}
            assert not unknown, (name, panel["title"], unknown)
            if panel.get("id") in row:
                row_reads |= read
    assert {names.NODE_GPUS_EXPECTED, names.NODE_GPU_DEVICES_REPORTING, names.NODE_GPUS_MISSING} <= row_reads
    kube_read = {n for n in row_reads if n.startswith("kube_")}
    if spec.kubernetes.ksm_job is None:
        assert kube_read == set() and names.NODE_EXPORTER_UP not in row_reads  # nothing to read bare metal
    else:
        assert {"kube_daemonset_status_number_ready", "kube_daemonset_status_desired_number_scheduled",
                "kube_pod_container_status_restarts_total", "kube_pod_info"} <= kube_read


@pytest.mark.parametrize("which", SPECS)
def test_panel_ids_unique_and_grid_positions_do_not_overlap(which, request):
    assert_layout(_models(request.getfixturevalue(which)))


def test_row_shows_only_panels_that_make_sense(example, static):
    """With kube-state-metrics: pods, restarts, OOM kills and expected vs reported; a static
    expectation has no pods to show. The fleet overview gains GPUs expected / missing."""
    assert {p["title"] for p in _row_panels(_health(example))} == NODE_PANELS | POD_PANELS
    assert {p["title"] for p in _row_panels(_health(static))} == NODE_PANELS
    table = _by_title(_health(static))["Expected vs reported GPUs per node"]
    assert len(table["targets"]) == 3  # expected, reporting, missing: no exporter up / pods columns
    assert "no_gpu_series" in _by_title(_health(static))["GPU nodes without an exporter target"]["description"]
    for spec in (example, static):
        fleet = _panels(_models(spec)[f"{spec.name}-fleet"])
        first = [p["title"] for p in fleet if p["gridPos"]["y"] == 0]
        assert first[:3] == ["GPUs reporting", "GPUs expected", "GPUs missing"] and len(first) == 8
        assert all(p["gridPos"]["w"] == 3 for p in fleet if p["gridPos"]["y"] == 0)


def test_row_follows_the_dashboard_conventions(example, example_cluster):
    """${datasource} everywhere, a unit on every panel, legends by the node label (never pod or
    instance), empty panels say why and name a runbook, rate windows are $__rate_interval (the
    restart stat uses restart_window, like the alert), kube-state-metrics selectors pin its job."""
    ref = {"type": "prometheus", "uid": "${datasource}"}
    lab = example.exporter.labels
    k = example.kubernetes
    for p in _row_panels(_health(example)):
        assert p["datasource"] == ref and all(t["datasource"] == ref for t in p["targets"]), p["title"]
        assert p["fieldConfig"]["defaults"].get("unit"), p["title"]
        for t in p["targets"]:
            legend = t.get("legendFormat", "")
            assert "{{instance}}" not in legend and "{{pod}}" not in legend, (p["title"], legend)
            if "{{" in legend:
                assert legend == f"{{{{{lab.node}}}}}", (p["title"], legend)
            parsed = pp.parse(_grafana_to_promql(t["expr"], "17m"))
            windows: list[str] = []

            def visit(n, windows=windows):
                if isinstance(n, pp.Call) and n.func.name in ("rate", "irate", "increase"):
                    windows.append(str(n.args[0]).rsplit("[", 1)[1].rstrip("]"))
                if isinstance(n, pp.VectorSelector) and n.name and n.name.startswith("kube_"):
                    assert any(m.name == "job" and m.value == k.ksm_job for m in n.matchers.matchers), p["title"]

            pp.walk(parsed, visit)
            assert set(windows) <= {"17m", "1h"}, (p["title"], windows)
            if "17m" in windows:
                assert p["interval"] == "1m", p["title"]  # 2 x max(scrape, collect interval)
        if not any("or vector(0)" in t["expr"] for t in p["targets"]):
            assert "Runbook: runbooks/" in p["fieldConfig"]["defaults"]["noValue"], p["title"]
    # with a cluster label every query is narrowed by $cluster, and legends start with it
    for p in _row_panels(_health(example_cluster)):
        for t in p["targets"]:
            assert '=~"$cluster"' in t["expr"], (p["title"], t["expr"])
            if "{{" in t.get("legendFormat", ""):
                assert t["legendFormat"] == "{{cluster}} {{Hostname}}", p["title"]
        assert all(link["url"].startswith("https://runbooks.example.com/gpu/") for link in p.get("links", []))
    assert _by_title(_health(example_cluster))["GPUs missing"]["links"]


def test_per_node_table_joins_the_recording_rules(example):
    table = _by_title(_health(example))["Expected vs reported GPUs per node"]
    exprs = [t["expr"].split("{")[0] for t in table["targets"]]
    assert exprs == [names.NODE_GPUS_EXPECTED, names.NODE_GPU_DEVICES_REPORTING, names.NODE_GPUS_MISSING,
                     names.NODE_EXPORTER_UP, names.NODE_EXPORTER_PODS]
    assert all(t["instant"] and t["format"] == "table" for t in table["targets"])
    assert [t["id"] for t in table["transformations"]] == ["merge", "organize"]
    rename = table["transformations"][1]["options"]["renameByName"]
    assert list(rename.values()) == ["expected", "reporting", "missing", "exporter up", "exporter pods"]
    assert table["options"]["sortBy"] == [{"displayName": "missing", "desc": True}]
    assert "var-node=${__data.fields.Hostname}" in table["fieldConfig"]["defaults"]["links"][0]["url"]


# --------------------------------------------------------------------------- against a real Prometheus


def _fast_spec():
    """The spec the ``cluster`` fixture of tests/test_kubernetes.py renders its rules from."""
    text = EXAMPLE.read_text()
    for old, new in FAST.items():
        text = text.replace(old, new)
    return parse_spec(text, "fast.yaml")


def _to_promql(expr: str, rate: str = "1m") -> str:
    """:func:`_grafana_to_promql` keeping ``label_replace`` group references (``"$1"``): Grafana
    only replaces variables the dashboard defines, and none is named by a number."""
    return re.sub(r"\x00(\d+)", r"$\1", _grafana_to_promql(re.sub(r"\$(\d+)", "\x00\\1", expr), rate))


def _value(prom, panel: dict, i: int = 0) -> list[tuple[dict, float]]:
    rows = prom.query(_to_promql(panel["targets"][i]["expr"]))
    return [(r["metric"], float(r["value"][1])) for r in rows]


def _scalar(prom, panel: dict, i: int = 0) -> float | None:
    rows = _value(prom, panel, i)
    assert len(rows) <= 1, (panel["title"], rows)
    return rows[0][1] if rows else None


def test_new_panels_on_a_real_prometheus(cluster):
    """Healthy cluster: 16 of 16 GPUs, nothing missing, no restarts. Then the faults of
    tests/test_kubernetes.py: node b reports 6 of 8 GPUs, GPU node c has no exporter pod, node d a
    pod nobody scrapes, pod a restarted three times (OOM-killed); one exporter pod not ready."""
    prom, state = cluster
    spec = _fast_spec()
    health = _by_title(_health(spec))
    fleet = _by_title(_models(spec)[f"{spec.name}-fleet"])
    assert prom.wait_for(lambda: _scalar(prom, health["GPUs missing"]) == 0
                         and _scalar(prom, health["GPUs expected"]) == 16, 60), prom.logs()
    assert _scalar(prom, health["Physical GPUs reporting"]) == 16
    assert _scalar(prom, health["Nodes without an exporter target"]) == 0
    assert _value(prom, health["GPU nodes without an exporter target"]) == []
    assert _value(prom, health["Missing GPUs per node"]) == []
    assert [_scalar(prom, health["Exporter pods ready / desired"], i) for i in (0, 1)] == [2, 2]
    assert _scalar(prom, health["Exporter pods not ready"]) == 0
    assert _scalar(prom, health["Exporter restarts in 1h"]) == 0
    assert _scalar(prom, health["Exporter OOM kills in 1h"]) == 0
    assert _value(prom, health["Exporter restarts per node"]) == []
    assert (_scalar(prom, fleet["GPUs expected"]), _scalar(prom, fleet["GPUs missing"])) == (16, 0)

    ksm = state["ksm"]
    ksm.nodes += [Node("gpu-node-c", 8), Node("gpu-node-d", 4)]
    ksm.pods.append(Pod("nvidia-dcgm-exporter-m3n8v", "gpu-node-d", "6f1c0c2e-0a1b-4c3d-8e9f-000000000004"))
    ksm.desired, ksm.ready = 3, 2
    ksm.pods[0].restarts, ksm.pods[0].oom = 3, True
    state["b_drop"] = {(m, g) for m in DCGM_METRICS for g in (6, 7)}

    per_node = health["Exporter restarts per node"]
    # restarts per $__rate_interval (1m here) right after the restarts, on the pod's node
    assert prom.wait_for(lambda: [(m.get("Hostname"), v) for m, v in _value(prom, per_node)] == [("gpu-node-a", 3)],
                         30), (_value(prom, per_node), prom.logs())
    assert prom.wait_for(lambda: _scalar(prom, health["GPUs missing"]) == 14, 45), prom.logs()
    assert _scalar(prom, health["GPUs expected"]) == 28
    assert _scalar(prom, health["Physical GPUs reporting"]) == 14
    assert _scalar(prom, health["Nodes without an exporter target"]) == 2
    assert sorted((m["Hostname"], m["reason"], v) for m, v in _value(prom, health["GPU nodes without an exporter target"])) \
        == [("gpu-node-c", "no_exporter_pod", 8), ("gpu-node-d", "pod_not_scraped", 4)]
    assert sorted((m["Hostname"], v) for m, v in _value(prom, health["Missing GPUs per node"])) == [
        ("gpu-node-b", 2), ("gpu-node-c", 8), ("gpu-node-d", 4)]
    table = health["Expected vs reported GPUs per node"]
    columns = [{m["Hostname"]: v for m, v in _value(prom, table, i)} for i in range(5)]
    assert columns == [
        {"gpu-node-a": 8, "gpu-node-b": 8, "gpu-node-c": 8, "gpu-node-d": 4},   # expected
        {"gpu-node-a": 8, "gpu-node-b": 6},                                      # reporting
        {"gpu-node-a": 0, "gpu-node-b": 2, "gpu-node-c": 8, "gpu-node-d": 4},   # missing
        {"gpu-node-a": 1, "gpu-node-b": 1},                                      # exporter up
        {"gpu-node-a": 1, "gpu-node-b": 1, "gpu-node-d": 1},                     # exporter pods
    ]
    assert [_scalar(prom, health["Exporter pods ready / desired"], i) for i in (0, 1)] == [2, 3]
    assert _scalar(prom, health["Exporter pods not ready"]) == 1
    # increase() extrapolates to the window edge: on a counter seen for a few seconds round() can read 4
    # at first; it settles at 3 as the series grows (the alert reads the same way, for: 0 > max_restarts)
    assert prom.wait_for(lambda: _scalar(prom, health["Exporter restarts in 1h"]) == 3, 30)
    assert _scalar(prom, health["Exporter OOM kills in 1h"]) == 1
    assert (_scalar(prom, fleet["GPUs expected"]), _scalar(prom, fleet["GPUs missing"])) == (28, 14)
    # every other query of the three dashboards still runs on this Prometheus (HTTP 4xx raises)
    for dash in _models(spec).values():
        for _, target in _targets(dash, annotations=True):
            prom.query(_to_promql(target["expr"]))
