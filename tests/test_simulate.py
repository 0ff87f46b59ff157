"""The dcgm-exporter simulator: exposition format, faults, fault file, HTTP behaviour, CLI."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from gpumon.cli import cli
from gpumon.simfaults import FAULT_KINDS, Fault, FaultError, load_faults
from gpumon.simpages import SENTINEL_INT, counters, gpu_uuid
from gpumon.simserve import Simulator
from gpumon.simulate import Fleet

DATA = Path(__file__).parent / "data"
SERIES = re.compile(r'^(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)(?:\{(?P<labels>.*)\})? (?P<value>\S+)$')
LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="([^"]*)"')


def series(text: str) -> list[tuple[str, list[tuple[str, str]], str]]:
    """(name, [(label, value) in order], value) of every sample line."""
    out = []
    for line in text.splitlines():
        if line and not line.startswith("#"):
            m = SERIES.match(line)
            assert m, f"not a sample line: {line!r}"
            out.append((m["name"], LABEL.findall(m["labels"] or ""), m["value"]))
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


# -- sources (issue 13): every kind gpumon's presets read ---------------------------------------

ALL = ("dcgm-exporter", "nvidia_gpu_exporter", "nvidia-smi-textfile")


def values(text: str) -> dict[tuple[str, str], float]:
    """{(series name, GPU UUID with GPU- prefix): value} of a page (any of the source kinds)."""
    out = {}
    for name, labels, value in series(text):
        d = dict(labels)
        uuid = d.get("UUID") or ("GPU-" + d["uuid"] if "uuid" in d and not d["uuid"].startswith("GPU-") else d.get("uuid"))
        if uuid:
            out[(name, uuid)] = float(value)
    return out


def test_every_source_serves_the_same_readings_in_its_units():
    fleet = Fleet(1, 2, sources={"gpu-node-1": ALL}, clock=lambda: 1_700_000_000.0)
    dcgm, smi, tf = (values(page_of(fleet, k)) for k in ALL)
    for gpu in range(2):
        u = gpu_uuid("gpu-node-1", gpu)
        temp = dcgm[("DCGM_FI_DEV_GPU_TEMP", u)]
        assert smi[("nvidia_smi_temperature_gpu", u)] == tf[("gpumon_nvidia_smi_temperature_gpu_celsius", u)] == temp
        assert smi[("nvidia_smi_utilization_gpu_ratio", u)] == pytest.approx(dcgm[("DCGM_FI_DEV_GPU_UTIL", u)] / 100)
        assert tf[("gpumon_nvidia_smi_utilization_gpu_ratio", u)] == pytest.approx(dcgm[("DCGM_FI_DEV_GPU_UTIL", u)] / 100)
        assert tf[("gpumon_nvidia_smi_memory_used_bytes", u)] == dcgm[("DCGM_FI_DEV_FB_USED", u)] * 1048576
        assert smi[("nvidia_smi_clocks_current_sm_clock_hz", u)] == dcgm[("DCGM_FI_DEV_SM_CLOCK", u)] * 1e6
        assert smi[("nvidia_smi_power_draw_watts", u)] == pytest.approx(dcgm[("DCGM_FI_DEV_POWER_USAGE", u)])


def page_of(fleet: Fleet, source: str, node: str = "gpu-node-1") -> str:
    status, body = fleet.page(node, source)
    assert status == 200
    return body


def test_fallback_pages_have_their_exporters_labels():
    fleet = Fleet(1, 1, sources={"gpu-node-1": ALL})
    smi = series(page_of(fleet, "nvidia_gpu_exporter"))
    temp = next(labels for name, labels, _ in smi if name == "nvidia_smi_temperature_gpu")
    assert temp == [("uuid", gpu_uuid("gpu-node-1", 0)[4:])]            # no GPU- prefix, no node label
    tf = series(page_of(fleet, "nvidia-smi-textfile"))
    temp = next(labels for name, labels, _ in tf if name == "gpumon_nvidia_smi_temperature_gpu_celsius")
    assert [k for k, _ in temp] == ["Hostname", "UUID", "gpu"]          # node_exporter sorts label names
    assert ("gpumon_nvidia_smi_up", [("Hostname", "gpu-node-1")], "1") in tf
    assert any(name == "node_textfile_scrape_error" for name, _, _ in tf)


def test_textfile_page_matches_what_the_sidecar_script_writes(tmp_path):
    """The simulated node_exporter page carries the series and label names the real script (run
    under dash against the fake nvidia-smi) writes."""
    from tests.test_textfile_sidecar import run_once
    assert run_once(tmp_path, "h100-load").returncode == 0
    written = {(n, tuple(sorted(k for k, _ in labels)))
               for n, labels, _ in series((tmp_path / "textfile" / "gpumon-nvidia-smi.prom").read_text())}
    served = {(n, tuple(sorted(k for k, _ in labels))) for n, labels, _ in
              series(page_of(Fleet(1, 1, sources={"gpu-node-1": ["nvidia-smi-textfile"]}), "nvidia-smi-textfile"))
              if not n.startswith("node_textfile_")}
    assert served == written


def test_faults_hit_every_source_unless_they_name_one():
    temp = "DCGM_FI_DEV_GPU_TEMP"
    scoped = Fleet(1, 1, [Fault("drop", metric=temp, source="dcgm-exporter")], sources={"gpu-node-1": ALL})
    assert f"{temp}{{" not in page_of(scoped, "dcgm-exporter")
    assert "gpumon_nvidia_smi_temperature_gpu_celsius{" in page_of(scoped, "nvidia-smi-textfile")
    assert "nvidia_smi_temperature_gpu{" in page_of(scoped, "nvidia_gpu_exporter")
    every = Fleet(1, 1, [Fault("drop", metric=temp)], sources={"gpu-node-1": ALL})
    assert not [k for k in ALL if "temperature_gpu" in page_of(every, k) or f"{temp}{{" in page_of(every, k)]
    down = Fleet(1, 1, [Fault("http500", source="nvidia-smi-textfile")], sources={"gpu-node-1": ALL})
    assert down.page("gpu-node-1", "nvidia-smi-textfile")[0] == 500 and down.page("gpu-node-1")[0] == 200
    # DCGM's blank is nvidia-smi's [N/A]: the script leaves the sample out and counts it
    blank = Fleet(1, 2, [Fault("sentinel", metric=temp, gpu=1)], sources={"gpu-node-1": ALL})
    tf = page_of(blank, "nvidia-smi-textfile")
    assert tf.count("gpumon_nvidia_smi_temperature_gpu_celsius{") == 1
    assert 'unavailable_samples{Hostname="gpu-node-1",field="temperature.gpu",reason="not_available"} 1' in tf
    assert page_of(blank, "nvidia_gpu_exporter").count("nvidia_smi_temperature_gpu{") == 1


def test_legacy_source_is_the_legacy_names_page():
    clock = lambda: 1_700_000_000.0  # noqa: E731
    by_source = Fleet(1, 1, sources={"gpu-node-1": ["dcgm-exporter-1.x"]}, clock=clock).page("gpu-node-1")[1]
    by_fault = Fleet(1, 1, [Fault("legacy-names")], clock=clock).page("gpu-node-1")[1]
    assert by_source == by_fault and "dcgm_gpu_temp{" in by_source


def test_source_errors_are_clear():
    from gpumon.simfaults import SourceError, parse_sources
    with pytest.raises(SourceError, match="no node 'gpu-node-9'"):
        Fleet(2, 1, sources={"gpu-node-9": ["dcgm-exporter"]})
    with pytest.raises(SourceError, match="not both"):
        Fleet(1, 1, sources={"gpu-node-1": ["dcgm-exporter", "dcgm-exporter-1.x"]})
    with pytest.raises(SourceError, match="unknown kind 'textfile'"):
        parse_sources(["textfile"], 2)
    with pytest.raises(FaultError, match="unknown source"):
        Fault.parse("kind=drop,source=nvsmi")
    with pytest.raises(SourceError, match="does not serve"):
        Fleet(1, 1).page("gpu-node-1", "nvidia_gpu_exporter")
    got = parse_sources(["nvidia-smi-textfile=gpu-node-2", "dcgm-exporter-1.x=gpu-node-3", "nvidia_gpu_exporter"], 3)
    assert got == {"gpu-node-1": ("dcgm-exporter", "nvidia_gpu_exporter"),
                   "gpu-node-2": ("dcgm-exporter", "nvidia-smi-textfile", "nvidia_gpu_exporter"),
                   "gpu-node-3": ("dcgm-exporter-1.x", "nvidia_gpu_exporter")}


def test_simulator_serves_one_target_per_source_under_the_presets_jobs():
    fleet = Fleet(2, 1, sources={"gpu-node-2": ["dcgm-exporter", "nvidia-smi-textfile", "nvidia_gpu_exporter"]})
    with Simulator(fleet) as sim:
        assert list(sim.targets) == ["gpu-node-1", "gpu-node-2"]
        assert sorted(sim.jobs) == ["dcgm-exporter", "node-exporter", "nvidia-gpu-exporter"]
        assert len(sim.jobs["dcgm-exporter"]) == 2 and len(set(sim.source_targets.values())) == 4
        body = httpx.get(f"http://{sim.source_targets[('gpu-node-2', 'nvidia-smi-textfile')]}/metrics", timeout=5).text
        assert 'Hostname="gpu-node-2"' in body and "gpumon_nvidia_smi_up{" in body


def test_cli_serves_sources_in_dump():
    res = CliRunner().invoke(cli, ["simulate", "--nodes", "2", "--gpus", "1", "--source", "nvidia_gpu_exporter=gpu-node-2",
                                   "--dump", "--dump-source", "nvidia_gpu_exporter"])
    assert res.exit_code == 0, res.output
    assert "nvidia_smi_temperature_gpu{uuid=" in res.output and "DCGM_FI_" not in res.output
    res = CliRunner().invoke(cli, ["simulate", "--dump", "--dump-source", "nvidia-smi-textfile"])
    assert res.exit_code == 2 and "no node serves it" in res.output


def test_go_float_matches_client_golang():
    from gpumon.ruletests.gotemplate import go_float
    # values as nvidia_gpu_exporter's internal/integration/testdata pages print them
    assert [go_float(v) for v in (2619000000, 20780679168, 631.95, 59, 0.11, 1, 100000, 1e6, 1.5e-5, 0)] == \
        ["2.619e+09", "2.0780679168e+10", "631.95", "59", "0.11", "1", "100000", "1e+06", "1.5e-05", "0"]


@pytest.mark.slow
@pytest.mark.skipif(not shutil.which("promtool"), reason="promtool not installed (apt-get install prometheus)")
def test_promtool_parses_every_source_page():
    fleet = Fleet(1, 2, [Fault("sentinel", metric="DCGM_FI_DEV_GPU_TEMP", gpu=1)],
                  sources={"gpu-node-1": ALL})
    for kind in ALL[1:]:
        proc = subprocess.run(["promtool", "check", "metrics"], input=page_of(fleet, kind), capture_output=True, text=True)
        assert proc.returncode == 0, (kind, proc.stdout + proc.stderr)



@pytest.mark.skipif(not shutil.which("promtool"), reason="promtool not installed (apt-get install prometheus)")
def test_printed_scrape_config_is_one_prometheus_accepts_at_the_specs_interval(tmp_path, monkeypatch):
    """The block `gpumon simulate` prints is pasted into prometheus.yml as is: it must parse, and
    carry a scrape interval (without one Prometheus scrapes every minute, and validate reports the
    mismatch with the spec's 15 s)."""
    import io
    import threading
    from types import SimpleNamespace

    import yaml

    from gpumon import simserve

    class Interrupted:                  # serve_forever waits for Ctrl-C on an Event: return at once
        def wait(self):
            pass

    monkeypatch.setattr(simserve, "threading", SimpleNamespace(Event=Interrupted, Thread=threading.Thread))
    out = io.StringIO()
    simserve.serve_forever(Fleet(nodes=2, gpus=1), base_port=0, out=out)
    jobs = yaml.safe_load(out.getvalue().split("# scrape config:\n", 1)[1])
    assert [j["job_name"] for j in jobs] == ["dcgm-exporter"]
    assert jobs[0]["scrape_interval"] == "15s" and len(jobs[0]["static_configs"][0]["targets"]) == 2
    cfg = tmp_path / "prometheus.yml"
    cfg.write_text(yaml.safe_dump({"scrape_configs": jobs}))
    check = subprocess.run(["promtool", "check", "config", str(cfg)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
