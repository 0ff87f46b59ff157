"""``make demo`` end to end (scripts/demo.py, the README's first look at ``gpumon validate``): a real
Prometheus scraping the simulator with four faults, the rendered rules loaded, validate writing its
HTML report. It once waited for a recording rule that became sparse (the 30 m gap ratio, recorded
only below 1) and timed out without a report, and nothing failed."""

from __future__ import annotations

import importlib.util

from .conftest import ROOT


def test_demo_writes_the_report_with_the_faults_found(tmp_path, monkeypatch, capfd):
    loader = importlib.util.spec_from_file_location("gpumon_demo", ROOT / "scripts" / "demo.py")
    demo = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(demo)
    monkeypatch.setattr(demo, "REPORT", tmp_path / "demo-report.html")
    monkeypatch.setattr(demo, "screenshot", lambda page: None)  # the HTML report has its own Chromium test
    assert demo.main() == 0, capfd.readouterr()
    out = capfd.readouterr().out
    html = (tmp_path / "demo-report.html").read_text()
    # the four faults of the demo, each found: a node's field, a GPU's field, a NaN reading, a down target
    for check in ("series-missing", "value-nan", "target-down"):
        assert check in out and check in html, check
    assert "DCGM_FI_DEV_FB_USED on gpu-node-2" in out and "DCGM_FI_DEV_SM_CLOCK on gpu-node-1" in out
