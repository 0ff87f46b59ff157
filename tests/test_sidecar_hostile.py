"""The nvidia-smi textfile sidecar against a hostile host and hostile nvidia-smi output, run for
real under each shell it supports: a full disk (a tiny tmpfs), output lines of a megabyte,
readings out of a float's range, a hung nvidia-smi whose child holds on after `timeout`, and
random CSV whose written file the real `promtool check metrics` must accept."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from .test_textfile_sidecar import DATA, FAKE, H100, PROMTOOLS, SCRIPT, SHELLS, _busybox_path, gpu, samples, status

PROM = "gpumon-nvidia-smi.prom"
G1 = "GPU-00000000-0000-0000-0000-000000000001"
ROW0 = f"{H100}, 0, 59, 54, 631.95, 100, 11, 19818, 61263, 1980, 2619"
ROW1 = f"{G1}, 1, 60, 55, 300.5, 7, 3, 100, 200, 1410, 1593"


def run(tmp_path: Path, shell: str, env: dict, folder: Path | None = None,
        timeout: float = 60, once: bool = True) -> subprocess.CompletedProcess:
    """One ``--once`` run (``once=False``: the loop) under ``shell`` with ``env`` added (GPUMON_TIMEOUT 5, NODE_NAME
    gpu-node-1 unless given); the textfile folder is ``folder`` or ``tmp_path/textfile``.
    ``PATH_PREPEND`` in ``env`` goes in front of the shell's PATH (busybox: its applets only)."""
    folder = folder or tmp_path / "textfile"
    folder.mkdir(exist_ok=True)
    path, argv = os.environ["PATH"], [shutil.which("dash")]
    if shell == "bash":
        argv = [shutil.which("bash"), "--posix"]
    elif shell == "busybox":
        path = _busybox_path(tmp_path / "busybox-bin")
        argv = [str(Path(path) / "sh")]
    env = dict(env)
    if "PATH_PREPEND" in env:
        path = env.pop("PATH_PREPEND") + ":" + path
    full = {"PATH": path, "GPUMON_TEXTFILE_DIR": str(folder), "GPUMON_TIMEOUT": "5", "NODE_NAME": "gpu-node-1", **env}
    return subprocess.run(argv + [str(SCRIPT)] + (["--once"] if once else []), env=full, capture_output=True,
                          timeout=timeout)


def raw(tmp_path: Path, data: bytes) -> dict:
    """Environment for a fake nvidia-smi that prints ``data`` as is and exits 0."""
    fake = tmp_path / "raw-nvidia-smi"
    fake.write_text('#!/bin/sh\ncat "$FAKE_NVIDIA_SMI_RAW"\n')
    fake.chmod(0o755)
    (tmp_path / "raw.csv").write_bytes(data)
    return {"GPUMON_NVIDIA_SMI": str(fake), "FAKE_NVIDIA_SMI_RAW": str(tmp_path / "raw.csv")}


def case(name: str) -> dict:
    return {"GPUMON_NVIDIA_SMI": str(FAKE), "FAKE_NVIDIA_SMI_CASE": str(DATA / f"{name}.csv")}


@pytest.fixture(params=SHELLS)
def shell(request) -> str:
    return request.param


# -- a full disk ----------------------------------------------------------------------------------

@contextlib.contextmanager
def tiny_tmpfs(where: Path, size: str = "64k"):
    """A tmpfs of ``size`` mounted at ``where`` (needs root; skips otherwise), unmounted after."""
    where.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs (needs root): {proc.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=True)


def fill(folder: Path, leave: int) -> None:
    """Fill the file system of ``folder`` to the last byte, then free ``leave`` bytes."""
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError as e:
        assert e.errno == errno.ENOSPC
    finally:
        os.close(fd)
    if leave:
        os.truncate(filler, max(0, filler.stat().st_size - leave))


@pytest.mark.parametrize("leave", [0, 4096, 8192], ids=["no-room", "room-for-output", "room-for-part-of-file"])
def test_full_disk_keeps_the_old_file(tmp_path, shell, leave):
    """No room at all, room for nvidia-smi's output but not the file, room for part of the file:
    each time the previous file stays as it was, nothing temporary is left, exit 2 says why."""
    with tiny_tmpfs(tmp_path / "textfile") as folder:
        assert run(tmp_path, shell, case("h100-load"), folder).returncode == 0
        before = (folder / PROM).read_bytes()
        fill(folder, leave)
        proc = run(tmp_path, shell, case("two-gpus"), folder)
        assert proc.returncode == 2, proc.stderr.decode()
        assert b"keeping the previous file" in proc.stderr
        assert (folder / PROM).read_bytes() == before
        assert sorted(p.name for p in folder.iterdir()) == ["filler", PROM]


def test_the_loop_exits_when_the_file_cannot_be_written(tmp_path):
    """The long-running loop stops with exit 2 (the pod restarts, kubelet retries with back-off)
    instead of writing nothing and looking alive."""
    with tiny_tmpfs(tmp_path / "textfile") as folder:
        assert run(tmp_path, "dash", case("h100-load"), folder).returncode == 0
        before = (folder / PROM).read_bytes()
        fill(folder, 0)
        proc = run(tmp_path, "dash", {**case("two-gpus"), "GPUMON_INTERVAL": "60"}, folder, timeout=30, once=False)
        assert proc.returncode == 2 and b"keeping the previous file" in proc.stderr, proc.stderr.decode()
        assert (folder / PROM).read_bytes() == before


# -- long lines, big numbers ------------------------------------------------------------------------

def test_long_lines_are_skipped_in_linear_time(tmp_path, shell):
    """A row with a 40 KB field is skipped and counted, the GPU rows around it kept, a 1 MB line
    after them is cut at 64 KiB and not read further; the script used to take minutes on such a
    line (its column splitting was quadratic in the line's length)."""
    huge_field = ROW1.replace(", 300.5,", ", " + "7" * 40_000 + ",")
    data = "\n".join([ROW0, huge_field, ROW1, "x" * 1_000_000, ""]).encode()
    start = time.monotonic()
    proc = run(tmp_path, shell, raw(tmp_path, data), timeout=30)
    took = time.monotonic() - start
    assert proc.returncode == 0, proc.stderr.decode()
    assert took < 10, took
    assert b"skipped 1 output lines longer than 4096 bytes" in proc.stderr
    assert b"printed more than 65536 bytes; reading the first 65536" in proc.stderr
    s = samples(tmp_path)
    assert status(s, "gpus") == "2" and status(s, "skipped_rows") == "2"
    assert s[("gpumon_nvidia_smi_power_draw_watts", gpu(G1, "1"))] == "300.5"


def test_output_is_read_up_to_a_bound(tmp_path):
    """Above 64 KiB of output only the first 64 KiB are read; the row cut there is not a reading."""
    rows = [f"GPU-{i:08d}, {i}, 59, 54, 631.95, 100, 11, 19818, 61263, 1980, 2619" for i in range(1000)]
    data = ("\n".join(rows) + "\n").encode()
    proc = run(tmp_path, "dash", raw(tmp_path, data))
    assert proc.returncode == 0, proc.stderr.decode()
    assert b"more than 65536 bytes" in proc.stderr
    s = samples(tmp_path)
    assert int(status(s, "gpus")) == data[:65536].count(b"\n") and status(s, "skipped_rows") == "1"


#: one reading per field, in the script's column order, none of which Prometheus should get
HOSTILE_NUMBERS = {"temperature.gpu": "9" * 400, "temperature.memory": "1e999", "power.draw": "NaN",
                   "utilization.gpu": "101", "utilization.memory": "Inf", "memory.used": "1" * 13,
                   "memory.free": "-5", "clocks.current.sm": "1e3"}


def hostile_numbers_row() -> str:
    return f"{H100}, 0, " + ", ".join([*HOSTILE_NUMBERS.values(), "2619"])


def test_numbers_prometheus_cannot_parse_are_dropped(tmp_path, shell):
    proc = run(tmp_path, shell, raw(tmp_path, (hostile_numbers_row() + "\n" + ROW1 + "\n").encode()))
    assert proc.returncode == 0, proc.stderr.decode()
    s = samples(tmp_path)
    g = gpu(H100, "0")
    assert [k for k in s if g in k] == [("gpumon_nvidia_smi_clocks_current_memory_hertz", g)]
    for field in HOSTILE_NUMBERS:
        assert s[("gpumon_nvidia_smi_unavailable_samples",
                  frozenset({("Hostname", "gpu-node-1"), ("field", field), ("reason", "invalid")}))] == "1", field
    assert s[("gpumon_nvidia_smi_temperature_gpu_celsius", gpu(G1, "1"))] == "60"


@pytest.mark.skipif(not PROMTOOLS, reason="promtool not installed (apt-get install prometheus)")
def test_promtool_accepts_the_file_of_hostile_numbers(tmp_path):
    run(tmp_path, "dash", raw(tmp_path, (hostile_numbers_row() + "\n").encode()))
    for promtool_bin in PROMTOOLS:
        proc = subprocess.run([promtool_bin, "check", "metrics"], stdin=open(tmp_path / "textfile" / PROM, "rb"),
                              capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout + proc.stderr


# -- a hung nvidia-smi and its child ---------------------------------------------------------------

def survivors(mark: str) -> list[int]:
    """Live processes whose environment holds ``mark`` (zombies have none left)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if mark.encode() in (entry / "environ").read_bytes():
                    found.append(int(entry.name))
    return found


def test_a_hung_nvidia_smis_children_are_killed(tmp_path, shell):
    """busybox `timeout` signals only the command, so the sleeping child of a hung nvidia-smi used
    to live on; the script now kills the query's whole process group."""
    bindir = tmp_path / "fake-bin"
    bindir.mkdir()
    (bindir / "nvidia-smi").write_text("#!/bin/sh\nsleep 300 &\nsleep 300\n")
    (bindir / "nvidia-smi").chmod(0o755)
    mark = f"GPUMON_TEST_MARK={uuid.uuid4()}"
    name, value = mark.split("=")
    try:
        proc = run(tmp_path, shell, {"PATH_PREPEND": str(bindir), "GPUMON_TIMEOUT": "1", name: value})
        assert proc.returncode == 1 and b"did not answer within 1s" in proc.stderr, proc.stderr.decode()
        deadline = time.monotonic() + 5    # SIGKILL is sent; wait until the kernel has torn them down
        while survivors(mark) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert survivors(mark) == []
    finally:
        for pid in survivors(mark):
            with contextlib.suppress(OSError):
                os.kill(pid, 9)


# -- random output, checked with promtool ----------------------------------------------------------

#: random nvidia-smi outputs per run, each through dash and busybox (about 0.6 s each);
#: ``GPUMON_FUZZ_SIDECAR_EXAMPLES`` sets it (``make fuzz`` runs more)
SIDECAR_EXAMPLES = int(os.environ.get("GPUMON_FUZZ_SIDECAR_EXAMPLES", "50"))

WORDS = ["[N/A]", "[Not Supported]", "[Unknown Error]", "ERR!", "N/A", "NaN", "nan", "Inf", "+Inf", "-Inf", "1e999",
         "1e5", "-0", "5.", ".5", "-.", "0x1F", "1_000", '"59"', '"', "", " ", "\r", "\u0661\u0662", "9" * 400]
cells = st.one_of(st.sampled_from(WORDS), st.integers(-10**20, 10**20).map(str),
                  st.floats(allow_nan=True, allow_infinity=True).map(str), st.text(max_size=12),
                  st.text("0123456789.,e- ", min_size=200, max_size=6000))
uuids = st.one_of(st.sampled_from([H100, G1, "GPU-x", "GPU-00000000-0000-0000-0000-00000000000a"]), st.text(max_size=8))
rows = st.one_of(
    st.tuples(uuids, st.one_of(st.sampled_from(["0", "1", "7"]), st.text(max_size=3)),
              st.lists(cells, min_size=9, max_size=9)).map(lambda r: ", ".join([r[0], r[1], *r[2]])),
    st.lists(cells, max_size=14).map(",".join))
outputs = st.tuples(st.lists(rows, max_size=6), st.sampled_from(["\n", "\r\n"]), st.booleans()).map(
    lambda o: (o[1].join(o[0]) + (o[1] if o[2] else "")).encode("utf-8", "surrogatepass"))
nodes = st.text(max_size=20).filter(lambda t: "\0" not in t)


@pytest.mark.skipif(not PROMTOOLS, reason="promtool not installed (apt-get install prometheus)")
@settings(max_examples=SIDECAR_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=outputs, node=nodes)
@example(data=b"", node='}"\\')   # label value text that ends a naive `{...}` or quote match
def test_random_nvidia_smi_output_passes_promtool(tmp_path_factory, data, node):
    """Whatever nvidia-smi prints (placeholders, NaN/Inf words, huge fields, quotes, commas,
    unicode, CR, no final newline) and whatever the node is called, the file written under dash
    and busybox is one `promtool check metrics` accepts, and nothing temporary is left."""
    for sh in ("dash", "busybox"):
        tmp_path = tmp_path_factory.mktemp("fuzz")
        proc = run(tmp_path, sh, {**raw(tmp_path, data), "NODE_NAME": node.encode("utf-8", "surrogatepass")})
        assert proc.returncode == 0, proc.stderr.decode(errors="replace")
        samples(tmp_path)
        text = (tmp_path / "textfile" / PROM).read_bytes()
        for promtool_bin in PROMTOOLS:
            check = subprocess.run([promtool_bin, "check", "metrics"], input=text, capture_output=True)
            assert check.returncode == 0, (sh, check.stdout + check.stderr, text[:2000])
