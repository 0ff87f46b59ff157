"""The dcgm-exporter simulator: exposition format, faults, fault file, HTTP behaviour, CLI."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from generator.cli import cli
from generator.simulate import (FAULT_KINDS, SENTINEL_INT, Fault, FaultError, Fleet, Simulator, counters,
                                gpu_uuid, load_faults)

DATA = Path(__file__).parent / "data"
SERIES = re.compile(r'^(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)\{(?P<labels>.*)\} (?P<value>\S+)$')
LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="([^"]*)"')


def series(text: str) -> list[tuple[str, list[tuple[str, str]], str]]:
    """(name, [(label, value) in order], value) of every sample line."""
    out = []
    for line in text.splitlines():
        if line and not line.startswith("#"):
            m = SERIES.match(line)
            assert m, f"not a sample line: {line!r}"
            out.append((m["name"], LABEL.findall(m["labels"]), m["value"]))
    return out


def page(fleet: Fleet, node: str = "gpu-node-1") -> str:
    status, body = fleet.page(node)
    assert status == 200
    return body


def test_label_order_matches_dcgm_exporter_sample():
    sample = (DATA / "synthetic-k8s-2xH100.v4.5.3-4.8.2.prom").read_text()
    # second GPU line of the sample carries no pod labels: exactly the exporter's own labels
    want = [k for k, _ in series(sample)[1][1]]
    got = [k for k, _ in series(page(Fleet(1, 2)))[0][1]]
    assert got == want == ["gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname", "DCGM_FI_DRIVER_VERSION"]


def test_help_type_from_csv_and_number_formats():
    text = page(Fleet(1, 1))
    for c in counters():
        if c.name == "DCGM_FI_DEV_VGPU_LICENSE_STATUS":
            assert c.name not in text  # blank on bare metal: the exporter skips it
            continue
        assert f"# HELP {c.name} {c.help}\n# TYPE {c.name} {c.type}\n" in text
    values = {name: v for name, _, v in series(text)}
    assert re.fullmatch(r"\d+\.\d{6}", values["DCGM_FI_DEV_POWER_USAGE"])
    assert re.fullmatch(r"0\.\d{6}", values["DCGM_FI_PROF_GR_ENGINE_ACTIVE"])
    assert re.fullmatch(r"\d+", values["DCGM_FI_DEV_GPU_TEMP"])
    assert re.fullmatch(r"\d+", values["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"])


@pytest.mark.skipif(not shutil.which("promtool"), reason="promtool not installed (apt-get install prometheus)")
def test_promtool_parses_every_variant():
    faults = [Fault("mig", gpu=1), Fault("nan", metric="DCGM_FI_DEV_POWER_USAGE"), Fault("sentinel", gpu=0)]
    for fleet in (Fleet(1, 2), Fleet(1, 2, faults), Fleet(1, 2, [Fault("legacy-names")])):
        proc = subprocess.run(["promtool", "check", "metrics"], input=page(fleet), capture_output=True, text=True)
        # exit 3 = style lints only (camelCase labels, counters without _total: true of dcgm-exporter too)
        assert proc.returncode in (0, 3), proc.stdout + proc.stderr
        assert "parsing error" not in proc.stdout + proc.stderr


def test_values_vary_and_energy_counter_increases():
    now = [1_000_000.0]
    fleet = Fleet(1, 2, clock=lambda: now[0])
    first = {(n, dict(l)["gpu"]): v for n, l, v in series(page(fleet))}
    now[0] += 120
    second = {(n, dict(l)["gpu"]): v for n, l, v in series(page(fleet))}
    key = ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "0")
    assert int(second[key]) - int(first[key]) == 345_000 * 120
    assert first[("DCGM_FI_DEV_POWER_USAGE", "0")] != second[("DCGM_FI_DEV_POWER_USAGE", "0")]
    assert first[("DCGM_FI_DEV_GPU_TEMP", "0")] != first[("DCGM_FI_DEV_GPU_TEMP", "1")] or \
        first[("DCGM_FI_DEV_POWER_USAGE", "0")] != first[("DCGM_FI_DEV_POWER_USAGE", "1")]
    assert all(5 <= int(v) <= 110 for (n, _), v in second.items() if n == "DCGM_FI_DEV_GPU_TEMP")


def test_drop_scopes_fleet_node_gpu():
    fleet = Fleet(2, 2, [Fault("drop", metric="DCGM_FI_DEV_GPU_UTIL"),
                         Fault("drop", metric="DCGM_FI_DEV_FB_USED", node="gpu-node-2"),
                         Fault("drop", metric="DCGM_FI_DEV_SM_CLOCK", node="gpu-node-1", gpu=1)])
    one, two = series(page(fleet, "gpu-node-1")), series(page(fleet, "gpu-node-2"))
    assert not [s for s in one + two if s[0] == "DCGM_FI_DEV_GPU_UTIL"]
    assert len([s for s in one if s[0] == "DCGM_FI_DEV_FB_USED"]) == 2
    assert not [s for s in two if s[0] == "DCGM_FI_DEV_FB_USED"]
    assert [dict(l)["gpu"] for n, l, _ in one if n == "DCGM_FI_DEV_SM_CLOCK"] == ["0"]
    assert len([s for s in two if s[0] == "DCGM_FI_DEV_SM_CLOCK"]) == 2


def test_intermittent_drops_every_kth_scrape():
    fleet = Fleet(1, 1, [Fault("intermittent", metric="DCGM_FI_DEV_POWER_USAGE", every=3)])
    seen = ["DCGM_FI_DEV_POWER_USAGE{" in page(fleet) for _ in range(6)]
    assert seen == [True, True, False, True, True, False]


def test_value_faults():
    fleet = Fleet(1, 3, [Fault("nan", metric="DCGM_FI_DEV_POWER_USAGE", gpu=0),
                         Fault("sentinel", metric="DCGM_FI_DEV_GPU_TEMP", gpu=1),
                         Fault("zero", metric="DCGM_FI_DEV_GPU_TEMP", gpu=2)])
    got = {(n, dict(l)["gpu"]): v for n, l, v in series(page(fleet))}
    assert got[("DCGM_FI_DEV_POWER_USAGE", "0")] == "NaN"
    assert got[("DCGM_FI_DEV_GPU_TEMP", "1")] == str(SENTINEL_INT)
    assert got[("DCGM_FI_DEV_GPU_TEMP", "2")] == "0"
    assert got[("DCGM_FI_DEV_GPU_TEMP", "0")] not in ("0", "NaN")


def test_frozen_serves_first_value():
    now = [1_000_000.0]
    fleet = Fleet(1, 1, [Fault("frozen", metric="DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION")], clock=lambda: now[0])
    first = page(fleet)
    now[0] += 300
    second = page(fleet)
    pick = lambda t: [v for n, _, v in series(t) if n == "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"]  # noqa: E731
    assert pick(first) == pick(second)
    assert [v for n, _, v in series(first) if n == "DCGM_FI_DEV_GPU_TEMP"] != \
        [v for n, _, v in series(second) if n == "DCGM_FI_DEV_GPU_TEMP"]


def test_hostname_rename_legacy_names_mig_driver():
    fleet = Fleet(1, 2, [Fault("hostname-rename")])
    labels = dict(series(page(fleet))[0][1])
    assert labels["hostname"] == "gpu-node-1" and "Hostname" not in labels

    legacy_text = page(Fleet(1, 1, [Fault("legacy-names")]))
    # help texts from the 1.x CSV (no final period there), not from default-counters.csv
    assert "# HELP dcgm_nvlink_bandwidth_total Total number of NVLink bandwidth counters for all lanes\n" in legacy_text
    legacy = series(legacy_text)
    names = {n for n, _, _ in legacy}
    assert "dcgm_gpu_temp" in names and not any(n.startswith("DCGM_FI_") for n in names)
    assert dict(legacy[0][1])["uuid"] == gpu_uuid("gpu-node-1", 0)

    mig = series(page(Fleet(1, 2, [Fault("mig", gpu=1, instances=3)])))
    temp = [dict(l) for n, l, _ in mig if n == "DCGM_FI_DEV_GPU_TEMP"]
    assert [(d["gpu"], d.get("GPU_I_ID")) for d in temp] == [("0", None), ("1", "1"), ("1", "2"), ("1", "3")]
    assert [k for k, _ in [l for n, l, _ in mig if n == "DCGM_FI_DEV_GPU_TEMP"][1]][5:8] == \
        ["GPU_I_PROFILE", "GPU_I_ID", "Hostname"]
    util = [dict(l)["gpu"] for n, l, _ in mig if n == "DCGM_FI_DEV_GPU_UTIL"]
    assert util == ["0"]  # not reported per MIG instance

    drv = series(page(Fleet(1, 2, [Fault("driver-version", gpu=0, value="535.54.03")])))
    assert {dict(l)["gpu"]: dict(l)["DCGM_FI_DRIVER_VERSION"] for n, l, _ in drv} == {"0": "535.54.03", "1": "570.148.08"}


def test_node_level_faults():
    fleet = Fleet(3, 1, [Fault("http500", node="gpu-node-1"), Fault("empty", node="gpu-node-2")])
    assert fleet.page("gpu-node-1")[0] == 500
    assert fleet.page("gpu-node-2") == (200, "")
    assert "DCGM_FI_DEV_GPU_TEMP{" in page(fleet, "gpu-node-3")


def test_node_fault_every_kth_scrape_flaps():
    fleet = Fleet(1, 1, [Fault("http500", every=3)])
    assert [fleet.page("gpu-node-1")[0] for _ in range(6)] == [200, 200, 500, 200, 200, 500]


def test_fault_file_reread_every_scrape(tmp_path):
    path = tmp_path / "faults.yaml"
    fleet = Fleet(1, 1, fault_file=path)
    assert "DCGM_FI_DEV_GPU_UTIL{" in page(fleet)
    path.write_text("faults:\n  - {kind: drop, metric: DCGM_FI_DEV_GPU_UTIL}\n")
    assert "DCGM_FI_DEV_GPU_UTIL{" not in page(fleet)
    path.write_text("faults: [ {kind: drop")  # broken: keep the last good faults
    assert "DCGM_FI_DEV_GPU_UTIL{" not in page(fleet)
    path.write_text('[{"kind": "http500"}]')  # JSON list form
    assert fleet.page("gpu-node-1")[0] == 500
    path.unlink()
    assert "DCGM_FI_DEV_GPU_UTIL{" in page(fleet)


def test_bad_faults_are_clear_errors(tmp_path):
    with pytest.raises(FaultError, match="unknown fault kind 'dorp'"):
        Fault.parse("kind=dorp")
    with pytest.raises(FaultError, match="unknown key"):
        Fault.parse("kind=drop,gpuu=1")
    with pytest.raises(FaultError, match="invalid literal"):
        Fault.parse("kind=drop,gpu=one")
    with pytest.raises(FaultError, match="needs value"):
        Fault.parse("kind=value,metric=DCGM_FI_DEV_GPU_TEMP")
    bad = tmp_path / "f.yaml"
    bad.write_text("faults: 3")
    with pytest.raises(FaultError, match="f.yaml"):
        load_faults(bad)
    assert set(FAULT_KINDS) >= {"drop", "intermittent", "empty", "http500", "slow", "sentinel", "nan",
                                "hostname-rename", "legacy-names", "mig", "zero"}


def test_http_content_type_and_status():
    fleet = Fleet(2, 1, [Fault("http500", node="gpu-node-2"), Fault("slow", node="gpu-node-1", seconds=0.3)])
    with Simulator(fleet) as sim:
        one, two = sim.targets["gpu-node-1"], sim.targets["gpu-node-2"]
        assert one.startswith("127.0.0.1:") and one != two
        resp = httpx.get(f"http://{one}/metrics", timeout=5)
        assert resp.status_code == 200
        assert resp.headers["content-type"].startswith("text/plain; version=0.0.4")
        assert resp.elapsed.total_seconds() >= 0.3
        assert httpx.get(f"http://{two}/metrics", timeout=5).status_code == 500


def test_cli_dump_and_usage_errors():
    runner = CliRunner()
    res = runner.invoke(cli, ["simulate", "--nodes", "1", "--gpus", "2", "--dump",
                              "--fault", "kind=drop,metric=DCGM_FI_DEV_GPU_UTIL"])
    assert res.exit_code == 0, res.output
    assert "DCGM_FI_DEV_GPU_TEMP{gpu=\"1\"" in res.output and "DCGM_FI_DEV_GPU_UTIL{" not in res.output
    res = runner.invoke(cli, ["simulate", "--fault", "kind=nope"])
    assert res.exit_code == 2 and "unknown fault kind" in res.output and "Traceback" not in res.output


def test_cli_port_in_use_is_exit_2():
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        res = CliRunner().invoke(cli, ["simulate", "--nodes", "1", "--port", str(port)])
    assert res.exit_code == 2 and f"cannot listen on 127.0.0.1:{port}:" in res.output
