"""The nvidia-smi textfile sidecar: the POSIX sh script run for real with dash against a
fake nvidia-smi replaying recorded outputs (tests/data/nvidia-smi, each file naming its source),
the spec section (schema, model, errors with FILE:LINE:COL) and the rendered Kubernetes manifest."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from gpumon import sidecar
from gpumon.spec import presets as sourcepresets
from gpumon.spec import sidecar as sidecarspec
from gpumon.render import render
from gpumon.spec import SpecError, load_spec, parse_spec

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "nvidia-smi"
FAKE = DATA / "fake-nvidia-smi"
SCRIPT = ROOT / "templates" / sidecar.SCRIPT
SH = shutil.which("dash") or "/bin/sh"
#: a sample line: label values are quoted and escaped (\\, \", \n), so they may hold `}` or `,`
SAMPLE = re.compile(r'^(?P<name>[a-z_]+)\{(?P<labels>(?:[A-Za-z_][A-Za-z0-9_]*="(?:[^"\\\n]|\\.)*",?)*)\} '
                    r'(?P<value>\S+)$')
CASES = sorted(p.stem for p in DATA.glob("*.csv"))
PROMTOOLS = [p for p in (shutil.which("promtool"),
                         str(Path.home() / ".cache/gpumon-tools/prometheus-3.16.0/bin/promtool")) if p and os.path.exists(p)]


def _busybox_path(folder: Path) -> str:
    """A PATH holding only busybox applets (sh, timeout, sed, ...): the script must not need GNU tools."""
    folder.mkdir(parents=True, exist_ok=True)
    for applet in ("sh", "timeout", "setsid", "sed", "date", "mv", "rm", "cat", "head", "tail", "wc", "tr", "uname",
                   "sleep", "awk", "printf"):
        link = folder / applet
        if not link.exists():
            link.symlink_to(shutil.which("busybox"))
    return str(folder)


#: shells the script is run under: dash (Debian's /bin/sh) always; bash in POSIX mode and busybox
#: (with only its own applets on PATH, as in a busybox image) where installed
SHELLS = ["dash"] + [s for s in ("bash", "busybox") if shutil.which(s)]


def run_once(tmp_path: Path, case: str | Path, timeout: int = 5, node: str = "gpu-node-1",
             shell: str = "dash") -> subprocess.CompletedProcess:
    """One ``--once`` run of the script under ``shell`` (a :data:`SHELLS` name) in ``tmp_path/textfile``."""
    out = tmp_path / "textfile"
    out.mkdir(exist_ok=True)
    path = os.environ["PATH"]
    argv = [SH]
    if shell == "bash":
        argv = [shutil.which("bash"), "--posix"]
    elif shell == "busybox":
        path = _busybox_path(tmp_path / "busybox-bin")
        argv = [str(Path(path) / "sh")]
    env = {"PATH": path, "FAKE_NVIDIA_SMI_CASE": str(case if isinstance(case, Path) else DATA / f"{case}.csv"),
           "FAKE_NVIDIA_SMI_LOG": str(tmp_path / "calls.log"), "GPUMON_NVIDIA_SMI": str(FAKE),
           "GPUMON_TEXTFILE_DIR": str(out), "GPUMON_TIMEOUT": str(timeout), "NODE_NAME": node}
    return subprocess.run(argv + [str(SCRIPT), "--once"], env=env, capture_output=True, text=True, timeout=60)


@pytest.fixture(params=SHELLS)
def shell(request) -> str:
    return request.param


def samples(tmp_path: Path) -> dict[tuple[str, frozenset], str]:
    """{(series name, frozenset of label pairs): value} of the written file; asserts the text
    parses line by line (HELP/TYPE or a sample, the end marker last) and that nothing else is left in
    the folder."""
    folder = tmp_path / "textfile"
    assert sorted(p.name for p in folder.iterdir()) == ["gpumon-nvidia-smi.prom"], "temporary files left behind"
    out = {}
    lines = (folder / "gpumon-nvidia-smi.prom").read_text().splitlines()
    assert lines[-1] == f"# gpumon-textfile-end lines={len(lines) - 1}", lines[-1]
    for line in lines[:-1]:
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            continue
        m = SAMPLE.match(line)
        assert m, f"not a sample line: {line!r}"
        float(m["value"])
        labels = frozenset(re.findall(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"', m["labels"]))
        out[(m["name"], labels)] = m["value"]
    return out


def gpu(uuid: str, index: str, node: str = "gpu-node-1") -> frozenset:
    return frozenset({("UUID", uuid), ("gpu", index), ("Hostname", node)})


def status(s: dict, name: str, node: str = "gpu-node-1") -> str:
    return s[(f"gpumon_nvidia_smi_{name}", frozenset({("Hostname", node)}))]


H100 = "GPU-00000000-0000-0000-0000-000000000000"


def test_h100_reading_in_base_units(tmp_path, shell):
    proc = run_once(tmp_path, "h100-load", shell=shell)
    assert proc.returncode == 0, proc.stderr
    s = samples(tmp_path)
    g = gpu(H100, "0")
    assert s[("gpumon_nvidia_smi_temperature_gpu_celsius", g)] == "59"
    assert s[("gpumon_nvidia_smi_power_draw_watts", g)] == "631.95"
    assert s[("gpumon_nvidia_smi_utilization_gpu_ratio", g)] == "1"            # 100 %
    assert s[("gpumon_nvidia_smi_utilization_memory_ratio", g)] == "0.11"      # 11 %
    assert s[("gpumon_nvidia_smi_memory_used_bytes", g)] == str(19818 * 1048576)
    assert s[("gpumon_nvidia_smi_clocks_current_sm_hertz", g)] == str(1980 * 10**6)
    assert status(s, "up") == "1" and status(s, "exit_code") == "0" and status(s, "gpus") == "1"
    assert int(status(s, "last_success_timestamp_seconds")) >= int(time.time()) - 60
    calls = (tmp_path / "calls.log").read_text().splitlines()
    assert calls == ["uuid,index,temperature.gpu,temperature.memory,power.draw,utilization.gpu,utilization.memory,"
                     "memory.used,memory.free,clocks.current.sm,clocks.current.memory"]


def test_placeholders_are_left_out_and_counted(tmp_path, shell):
    assert run_once(tmp_path, "unavailable", shell=shell).returncode == 0
    s = samples(tmp_path)
    g0 = gpu("GPU-6304bf68-46a6-459f-2dc0-682f676a8d85", "0")
    g1 = gpu("GPU-1177f867-a501-9c09-29b9-30540e93cc9a", "1")
    assert ("gpumon_nvidia_smi_temperature_gpu_celsius", g0) not in s      # [N/A]
    assert s[("gpumon_nvidia_smi_temperature_gpu_celsius", g1)] == "56"
    assert not [k for k in s if k[0] == "gpumon_nvidia_smi_temperature_memory_celsius"]   # [Not Supported] x2
    assert not [k for k in s if k[0] == "gpumon_nvidia_smi_power_draw_watts"]             # ERR!, [Unknown Error]
    assert s[("gpumon_nvidia_smi_utilization_gpu_ratio", g0)] == "0.37"
    assert s[("gpumon_nvidia_smi_utilization_memory_ratio", g0)] == "0.05"

    def unavailable(field, reason):
        return s.get(("gpumon_nvidia_smi_unavailable_samples",
                      frozenset({("Hostname", "gpu-node-1"), ("field", field), ("reason", reason)})))
    assert unavailable("temperature.gpu", "not_available") == "1"
    assert unavailable("temperature.memory", "not_supported") == "2"
    assert unavailable("power.draw", "err") == "1"
    assert unavailable("power.draw", "unknown_error") == "1"
    assert status(s, "up") == "1" and status(s, "gpus") == "2"


def test_unknown_field_is_dropped_and_reported(tmp_path, shell):
    proc = run_once(tmp_path, "old-driver", shell=shell)
    assert proc.returncode == 0, proc.stderr
    assert "does not know field temperature.memory" in proc.stderr
    calls = (tmp_path / "calls.log").read_text().splitlines()
    assert len(calls) == 2 and "temperature.memory" in calls[0] and "temperature.memory" not in calls[1]
    s = samples(tmp_path)
    assert s[("gpumon_nvidia_smi_temperature_gpu_celsius", gpu(H100, "0"))] == "59"
    assert s[("gpumon_nvidia_smi_field_unknown",
              frozenset({("Hostname", "gpu-node-1"), ("field", "temperature.memory")}))] == "1"
    assert status(s, "up") == "1"


def test_hang_times_out_without_readings(tmp_path, shell):
    start = time.monotonic()
    proc = run_once(tmp_path, "hang", timeout=1, shell=shell)
    took = time.monotonic() - start
    assert proc.returncode == 1 and took < 10, (proc.returncode, took)
    assert "did not answer within 1s" in proc.stderr
    s = samples(tmp_path)
    assert not [k for k in s if "celsius" in k[0]]
    # GNU timeout exits 124, busybox's 143 (128 + SIGTERM)
    assert status(s, "up") == "0" and status(s, "exit_code") == ("143" if shell == "busybox" else "124")
    assert status(s, "last_success_timestamp_seconds") == "0"


def test_driver_failure_says_so(tmp_path, shell):
    proc = run_once(tmp_path, "driver-gone", shell=shell)
    assert proc.returncode == 1
    assert "couldn't communicate with the NVIDIA driver" in proc.stderr
    s = samples(tmp_path)
    assert status(s, "up") == "0" and status(s, "exit_code") == "9"
    assert status(s, "gpus") == "0" and status(s, "skipped_rows") == "1"


def test_loop_replaces_readings_each_run(tmp_path):
    """The long-running loop: a GPU missing from one run loses its series; a hang after a good
    run leaves no stale readings but the last success time."""
    current = tmp_path / "current.csv"
    shutil.copy(DATA / "two-gpus.csv", current)
    folder = tmp_path / "textfile"
    folder.mkdir()
    env = {"PATH": os.environ["PATH"], "FAKE_NVIDIA_SMI_CASE": str(current), "GPUMON_NVIDIA_SMI": str(FAKE),
           "GPUMON_TEXTFILE_DIR": str(folder), "GPUMON_TIMEOUT": "1", "GPUMON_INTERVAL": "1", "NODE_NAME": "gpu-node-1"}
    proc = subprocess.Popen([SH, str(SCRIPT)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    prom = folder / "gpumon-nvidia-smi.prom"

    def wait_for(pred, what):
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            text = prom.read_text() if prom.exists() else ""
            if pred(text):
                return text
            time.sleep(0.1)
        raise AssertionError(f"timed out waiting for {what}: {text!r}")
    try:
        wait_for(lambda t: 'gpumon_nvidia_smi_gpus{Hostname="gpu-node-1"} 2' in t, "two GPUs")
        shutil.copy(DATA / "gpu-missing.csv", current)
        text = wait_for(lambda t: 'gpumon_nvidia_smi_gpus{Hostname="gpu-node-1"} 1' in t, "one GPU")
        assert "GPU-00000000-0000-0000-0000-000000000001" not in text
        assert 'temperature_gpu_celsius{UUID="GPU-00000000-0000-0000-0000-000000000000",gpu="0",Hostname="gpu-node-1"} 60' in text
        shutil.copy(DATA / "hang.csv", current)
        text = wait_for(lambda t: 'gpumon_nvidia_smi_up{Hostname="gpu-node-1"} 0' in t, "up 0")
        assert "celsius{" not in text
        last = re.search(r'last_success_timestamp_seconds\{Hostname="gpu-node-1"\} (\d+)', text)
        assert last and int(last[1]) > 0      # remembered from the good runs
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert proc.returncode == 0             # TERM: clean exit
    assert sorted(p.name for p in folder.iterdir()) == ["gpumon-nvidia-smi.prom"]


def test_node_name_is_escaped(tmp_path, shell):
    assert run_once(tmp_path, "h100-load", node='odd"node\\x', shell=shell).returncode == 0
    text = (tmp_path / "textfile" / "gpumon-nvidia-smi.prom").read_text()
    assert 'Hostname="odd\\"node\\\\x"' in text


@pytest.mark.slow
@pytest.mark.skipif(not PROMTOOLS, reason="promtool not installed (apt-get install prometheus)")
@pytest.mark.parametrize("case", CASES)
def test_promtool_accepts_every_written_file(tmp_path, case):
    run_once(tmp_path, case, timeout=1)
    text = (tmp_path / "textfile" / "gpumon-nvidia-smi.prom").read_text()
    for promtool in PROMTOOLS:
        proc = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
        assert proc.returncode == 0, f"{promtool}: {proc.stdout}{proc.stderr}"


def test_every_case_names_its_source():
    for case in CASES:
        assert (DATA / f"{case}.csv").read_text().startswith("# source: "), case


def test_preset_series_are_what_the_script_writes():
    """sourcepresets.TEXTFILE_SERIES and the script's describe() table name the same series for
    the same nvidia-smi field, in the unit the preset declares."""
    text = SCRIPT.read_text()
    table = dict(re.findall(r"^\s+([a-z.]+)\) echo \"(gpumon_nvidia_smi_[a-z_]+) ", text, re.M))
    preset = sourcepresets.PRESETS["nvidia-smi-textfile"]
    assert {field: series for series, _unit, field in sourcepresets.TEXTFILE_SERIES.values()} == table
    suffix = {"celsius": "_celsius", "watts": "_watts", "ratio": "_ratio", "bytes": "_bytes", "hertz": "_hertz"}
    for metric, (series, unit) in preset.series.items():
        assert series.endswith(suffix[unit]), (metric, series, unit)
    assert (preset.job, preset.gpu, preset.node, preset.gpu_index) == ("node-exporter", "UUID", "Hostname", "gpu")


def test_script_is_posix_sh():
    """dash -n parses it; no bash-isms that dash would accept by accident (outside its awk programs)."""
    assert subprocess.run([SH, "-n", str(SCRIPT)], capture_output=True).returncode == 0
    shell = re.sub(r"^[A-Z]+='\n.*?\n\}'\n", "", SCRIPT.read_text(), flags=re.M | re.S)   # the awk programs
    assert "function trim" not in shell
    body = "\n".join(line for line in shell.splitlines() if not line.lstrip().startswith("#"))
    for bashism in ("[[", "function ", "local ", "$'", "<(", "${!", "declare ", "pipefail"):
        assert bashism not in body, bashism


# -- spec section and manifest ------------------------------------------------------------------

def _spec_text(section: str) -> str:
    base = (ROOT / "examples" / "textfile-sidecar.yaml").read_text()
    start = base.index("textfile_sidecar:")
    end = base.index("\nmetrics:")
    return base[:start] + section + base[end:]


def test_example_manifest_is_valid_deterministic_yaml():
    spec = load_spec(ROOT / "examples" / "textfile-sidecar.yaml")
    a = render(spec)[sidecar.PATH.format(name="gpumon")]
    b = render(load_spec(ROOT / "examples" / "textfile-sidecar.yaml"))[sidecar.PATH.format(name="gpumon")]
    assert a == b
    cm, ds = list(yaml.safe_load_all(a))
    assert cm["kind"] == "ConfigMap" and ds["kind"] == "DaemonSet"
    assert cm["data"][sidecar.SCRIPT_KEY] == SCRIPT.read_text()
    pod = ds["spec"]["template"]["spec"]
    assert ds["spec"]["selector"]["matchLabels"].items() <= ds["spec"]["template"]["metadata"]["labels"].items()
    assert pod["runtimeClassName"] == "nvidia" and ds["metadata"]["namespace"] == "gpu-operator"
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert pod["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    env = {e["name"]: e for e in pod["containers"][0]["env"]}
    assert env["NODE_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    assert env["GPUMON_INTERVAL"]["value"] == "15" and env["GPUMON_TIMEOUT"]["value"] == "10"
    host = [v for v in pod["volumes"] if "hostPath" in v][0]
    assert host["hostPath"]["path"] == "/var/lib/node_exporter/textfile_collector"
    mounts = {m["name"]: m["mountPath"] for m in pod["containers"][0]["volumeMounts"]}
    assert env["GPUMON_TEXTFILE_DIR"]["value"] == mounts[host["name"]]
    assert pod["containers"][0]["command"] == ["sh", f"{mounts['script']}/{sidecar.SCRIPT_KEY}"]


def test_rendered_only_when_asked(default_render):
    plain = default_render
    assert not [p for p in plain if "nvidia-smi-textfile" in p]
    assert load_spec(ROOT / "gpumon.yaml").textfile_sidecar is None


def test_defaults_live_in_the_dataclass():
    spec = parse_spec(_spec_text("textfile_sidecar: {}\n"), "t.yaml")
    assert spec.textfile_sidecar == sidecarspec.TextfileSidecar()
    custom = parse_spec(_spec_text("textfile_sidecar:\n  interval: 30s\n  timeout: 20s\n  node_selector: {}\n"
                                   "  tolerations: []\n  image: registry.example/tools:1\n"), "t.yaml")
    sc = custom.textfile_sidecar
    assert (sc.interval, sc.timeout, sc.node_selector, sc.tolerations, sc.image) == (30, 20, (), (), "registry.example/tools:1")
    doc = list(yaml.safe_load_all(sidecar.manifest(custom)))[1]
    assert "nodeSelector" not in doc["spec"]["template"]["spec"] and "tolerations" not in doc["spec"]["template"]["spec"]


@pytest.mark.parametrize("section, where, message", [
    ("textfile_sidecar:\n  interval: 10s\n  timeout: 10s\n", "textfile_sidecar.timeout", "must be below interval"),
    ("textfile_sidecar:\n  interval: 1500ms\n", "textfile_sidecar.interval", "whole seconds"),
    ("textfile_sidecar:\n  tolerations:\n    - {key: gpu, value: x}\n", "textfile_sidecar.tolerations[0].value", "operator: Equal"),
    ("textfile_sidecar:\n  textfile_directory: relative/dir\n", "textfile_sidecar.textfile_directory", ""),
    ("textfile_sidecar:\n  intervall: 10s\n", "textfile_sidecar", ""),
])
def test_spec_errors_point_at_the_line(section, where, message):
    text = _spec_text(section)
    with pytest.raises(SpecError) as err:
        parse_spec(text, "t.yaml")
    rendered = [str(p) for p in err.value.problems]
    line = text[:text.index("textfile_sidecar:")].count("\n") + 1
    hit = [r for r in rendered if where in r and message in r]
    assert hit, rendered
    m = re.match(r"t\.yaml:(\d+):(\d+)", hit[0])
    assert m and line <= int(m[1]) <= line + 3, hit[0]


@pytest.mark.slow
@pytest.mark.skipif(not PROMTOOLS, reason="promtool not installed (apt-get install prometheus)")
def test_a_dead_sidecars_last_file_stops_serving(tmp_path):
    """node_exporter keeps serving the last file of a sidecar that died: the rendered rules use a
    textfile reading only while the sidecar's last run is recent (sidecar.stale_after, 120 s for
    the example), then the GPU is unserved (and the presence tiers page as for any unserved GPU)."""
    spec = load_spec(ROOT / "examples" / "textfile-sidecar.yaml")
    assert sidecar.stale_after(spec) == 120
    (tmp_path / "rules.yaml").write_text(render(spec)["rules/gpumon.rules.yaml"])
    uuid = "GPU-6304bf68-46a6-459f-2dc0-682f676a8d85"
    temp = (f'gpumon_nvidia_smi_temperature_gpu_celsius{{job="node-exporter",instance="10.0.0.7:9100",'
            f'UUID="{uuid}",gpu="0",Hostname="gpu-node-7"}}')
    want = (f'job_gpu:dcgm_field_value:normalized{{Hostname="gpu-node-7",UUID="{uuid}",'
            f'dcgm_field="DCGM_FI_DEV_GPU_TEMP",gpu="0",job="dcgm-exporter",source="nvidia-smi-textfile"}}')
    query = 'job_gpu:dcgm_field_value:normalized{dcgm_field="DCGM_FI_DEV_GPU_TEMP"}'
    test = {"rule_files": ["rules.yaml"], "evaluation_interval": "30s", "tests": [
        {"interval": "30s", "input_series": [
            {"series": temp, "values": "71x12"},
            # the sidecar ran at t=0 and died: node_exporter keeps serving that file
            {"series": 'gpumon_nvidia_smi_last_run_timestamp_seconds{job="node-exporter",instance="10.0.0.7:9100",'
                       'Hostname="gpu-node-7"}', "values": "0x12"}],
         "promql_expr_test": [
             {"expr": query, "eval_time": "1m", "exp_samples": [{"labels": want, "value": 71}]},
             {"expr": query, "eval_time": "3m", "exp_samples": []}]},
        {"interval": "30s", "input_series": [
            {"series": temp, "values": "71x12"},
            {"series": 'gpumon_nvidia_smi_last_run_timestamp_seconds{job="node-exporter",instance="10.0.0.7:9100",'
                       'Hostname="gpu-node-7"}', "values": "0+30x12"}],      # alive: a run every 30 s
         "promql_expr_test": [{"expr": query, "eval_time": "5m", "exp_samples": [{"labels": want, "value": 71}]}]},
    ]}
    (tmp_path / "stale.test.yaml").write_text(yaml.safe_dump(test, sort_keys=False))
    for promtool in PROMTOOLS:
        proc = subprocess.run([promtool, "test", "rules", "stale.test.yaml"], cwd=tmp_path, capture_output=True, text=True)
        assert proc.returncode == 0, f"{promtool}: {proc.stdout}{proc.stderr}"
