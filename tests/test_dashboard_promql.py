"""Dashboard queries that must agree with the alerts they stand beside, played by promtool on the
rendered rules in virtual time: the lost GPUs (a GPU gone for longer than
``alerts.inventory_lookback`` still pages, so it is still listed and counted) and the slowest
scrape against each target's own timeout (as GpuExporterScrapeSlow compares)."""

from __future__ import annotations

import json
import subprocess

import yaml

from gpumon.render import render
from gpumon.spec import default_spec_path, parse_spec

SPEC = parse_spec(default_spec_path().read_text("utf-8"), "gpumon.yaml")
GONE = "GPU-0000000b-0000-0000-0000-000000000000"
STAYS = "GPU-0000000a-0000-0000-0000-000000000000"


def _series(uuid: str, index: str, minutes: int) -> dict:
    labels = f'job="dcgm-exporter",instance="gpu-node-1:9400",Hostname="gpu-node-1",UUID="{uuid}",gpu="{index}"'
    return {"series": f"DCGM_FI_DEV_GPU_TEMP{{{labels}}}", "values": f"40+0x{minutes}"}


def test_a_gpu_gone_past_the_lookback_is_still_lost_on_the_dashboards(tmp_path, promtool):
    (tmp_path / "rules.yaml").write_text(render(SPEC)["rules/gpumon.rules.yaml"])
    at = "150m"  # gone at 10m: 140 minutes, more than the 1h lookback
    row = f'job_gpu:gpumon_known:group{{Hostname="gpu-node-1",UUID="{GONE}",gpu="1",job="dcgm-exporter"}}'
    test = {"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": [{
        "interval": "1m",
        "input_series": [_series(STAYS, "0", 160), _series(GONE, "1", 10),
                         {"series": 'up{job="dcgm-exporter",instance="gpu-node-1:9400"}', "values": "1+0x160"}],
        "promql_expr_test": [
            {"expr": 'group by (UUID) (ALERTS{alertname="GpuLost",alertstate="firing"})', "eval_time": at,
             "exp_samples": [{"labels": f'{{UUID="{GONE}"}}', "value": 1}]},
            {"expr": _panel_expr("health", "GPUs lost (known, silent now)"), "eval_time": at,
             "exp_samples": [{"labels": row, "value": 1}]},
            {"expr": _panel_expr("fleet", "GPUs lost"), "eval_time": at, "exp_samples": [{"labels": "{}", "value": 1}]},
            # before the loss: none lost, and the stat says 0 rather than nothing
            {"expr": _panel_expr("fleet", "GPUs lost"), "eval_time": "5m", "exp_samples": [{"labels": "{}", "value": 0}]},
        ]}]}
    _passes(promtool, tmp_path, test)


def _passes(promtool: str, folder, test: dict) -> None:
    (folder / "panels.test.yaml").write_text(yaml.safe_dump(test, sort_keys=False))
    proc = subprocess.run([promtool, "test", "rules", "panels.test.yaml"], cwd=folder, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def _panel_expr(dashboard: str, title: str) -> str:
    doc = json.loads(render(SPEC)[f"dashboards/{SPEC.name}-{dashboard}.json"])
    panels = [p for row in doc["panels"] for p in [row, *(row.get("panels") or [])]]
    return next(p for p in panels if p.get("title") == title)["targets"][0]["expr"]


def test_the_slowest_scrape_is_measured_against_each_targets_own_timeout(tmp_path, promtool):
    """Target a is scraped with a 2 s timeout and takes 1.8 s (0.9 of it, GpuExporterScrapeSlow's
    business); b has no ``scrape_timeout_seconds`` (Prometheus without extra-scrape-metrics) and takes
    5 s of the spec's 10 s. The stat shows 0.9, not the longest duration over the spec's timeout."""
    job = 'job="dcgm-exporter"'
    test = {"evaluation_interval": "1m", "tests": [{
        "interval": "1m",
        "input_series": [
            {"series": f'scrape_duration_seconds{{{job},instance="a:9400"}}', "values": "1.8x5"},
            {"series": f'scrape_timeout_seconds{{{job},instance="a:9400"}}', "values": "2x5"},
            {"series": f'scrape_duration_seconds{{{job},instance="b:9400"}}', "values": "5x5"}],
        "promql_expr_test": [{"expr": _panel_expr("health", "Slowest scrape / timeout"), "eval_time": "3m",
                              "exp_samples": [{"labels": "{}", "value": 0.9}]}]}]}
    _passes(promtool, tmp_path, test)
