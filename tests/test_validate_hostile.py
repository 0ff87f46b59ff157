"""`gpumon validate` against a hostile server (tests/hostile_prom.py), in every output format and
with every kind of credential (issue #15, findings 3, 4, 5, 6): the documented exit code (never 0,
never the internal-error 4), no traceback, no secret in stdout, stderr or the -o report, and every
run inside its deadline."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import pytest
from click.testing import CliRunner

from gpumon import redact, reporters
from gpumon.cli import cli

from .conftest import ROOT
from .hostile_prom import MODES, HostileProm

FORMATS = ("text", "json", "sarif", "junit", "github")
TOKEN = "tok-3f9a1c77e2b54d0e"
PASSWORD = "pw-9c1e55aa03d7"
HEADER = "hdr-5e2b7d19c4a0"
#: every form a secret could be printed in
SECRETS = (TOKEN, PASSWORD, HEADER, base64.b64encode(f"alice:{PASSWORD}".encode()).decode())
TIMEOUT, DEADLINE = 1.0, 3.0
#: a run may exceed --deadline by at most this (the last read, rendering, process exit)
SLACK = 3.0


@pytest.fixture(scope="module")
def server():
    with HostileProm() as srv:
        yield srv


@pytest.fixture(scope="module")
def creds(tmp_path_factory):
    folder = tmp_path_factory.mktemp("creds")
    (folder / "token").write_text(TOKEN + "\n")
    (folder / "basic").write_text(f"alice:{PASSWORD}\n")
    return folder


def auth_args(kind: str, creds) -> list[str]:
    extra = ["--header", f"X-Secret={HEADER}"]
    if kind == "bearer":
        return extra + ["--bearer-token-file", str(creds / "token")]
    if kind == "basic":
        return extra + ["--basic-auth-file", str(creds / "basic")]
    return extra


def validate(url: str, fmt: str, auth: list[str], out_file, *more: str):
    redact.reset()  # each run registers its own secrets, as a fresh process would
    args = ["validate", str(ROOT / "gpumon.yaml"), "--prom", url, "--format", fmt, "-o", str(out_file),
            "--timeout", str(TIMEOUT), "--deadline", str(DEADLINE), "--max-response-mib", "1", *auth, *more]
    start = time.monotonic()
    result = CliRunner().invoke(cli, args, env={"GPUMON_BEARER_TOKEN": None})
    return result, time.monotonic() - start


def assert_parses(fmt: str, text: str) -> None:
    if fmt in ("json", "sarif"):
        json.loads(text)
    elif fmt == "junit":
        ET.fromstring(text.split("?>", 1)[1] if text.startswith("<?xml") else text)


#: each mode's one CLI run prints and writes (-o) in a format rotating through the five; the other
#: four are rendered from that run's report (the format only picks the renderer: the checks, the
#: requests and the redaction registry are the same), so every mode is checked in every format
CLI_FORMAT = {mode: FORMATS[i % len(FORMATS)] for i, mode in enumerate(MODES)}
MATRIX = [(mode, fmt) for mode in MODES for fmt in FORMATS]


def validate_once(monkeypatch, url: str, fmt: str, auth: list[str], out_file):
    """Run ``validate`` once through the CLI and keep the report it rendered (the spy wraps
    ``reporters.render``, which the CLI calls for what it prints)."""
    seen = []
    real = reporters.render

    def spy(report, fmt, **kw):
        seen.append(report)
        return real(report, fmt, **kw)

    monkeypatch.setattr(reporters, "render", spy)
    result, took = validate(url, fmt, auth, out_file)
    monkeypatch.setattr(reporters, "render", real)
    return result, took, seen[0] if seen else None


@pytest.mark.parametrize("mode", list(MODES))
def test_hostile_server_every_format(server, creds, tmp_path, monkeypatch, mode):
    server.mode = mode
    kind = ("bearer", "basic", "header")[list(MODES).index(mode) % 3]
    fmt = CLI_FORMAT[mode]
    out_file = tmp_path / f"report.{fmt}"
    result, took, report = validate_once(monkeypatch, server.url, fmt, auth_args(kind, creds), out_file)
    expected = MODES[mode][1]
    output = result.stdout + result.stderr
    written = out_file.read_text() if out_file.exists() else ""
    assert result.exit_code in expected, f"{mode}/{fmt}: exit {result.exit_code}\n{output[-2000:]}"
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in output and "gpumon: internal error" not in output
    for secret in SECRETS:
        assert secret not in output and secret not in written, f"{mode}/{fmt}: secret {secret[:6]}… printed"
    assert took < DEADLINE + SLACK, f"{mode}/{fmt}: {took:.1f}s"
    assert result.stdout.strip(), "a report on stdout"
    assert_parses(fmt, result.stdout)
    assert report is not None and result.stdout == reporters.render(report, fmt), "the spy saw the printed report"
    for other in FORMATS:  # the same run in every format: a report, parseable, no secret
        text = reporters.render(report, other)
        assert text.strip(), f"{mode}/{other}: empty report"
        assert_parses(other, text)
        for secret in SECRETS:
            assert secret not in text, f"{mode}/{other}: secret {secret[:6]}… printed"


def test_matrix_size():
    """The bar: at least 40 hostile modes, each in all 5 formats (one run per mode, every format
    rendered from it; every format is also the printed and written one for some mode)."""
    assert len(MODES) >= 40 and len(MATRIX) >= 200 and set(CLI_FORMAT.values()) == set(FORMATS)


def test_no_secret_sent_to_another_host(server, creds, tmp_path):
    server.mode = "redirect-other-host-echo"
    result, _ = validate(server.url, "json", auth_args("bearer", creds), tmp_path / "r")
    # the redirect to another host name is refused, not followed (exit 2, naming where it pointed)
    assert server.server.seen_auth == [f"Bearer {TOKEN}"]
    assert result.exit_code == 2 and "redirects to http://localhost:" in result.stdout


def test_repeated_group_next_token_stops(server, creds, tmp_path):
    server.mode = "rules-token-loop"
    result, took = validate(server.url, "json", [], tmp_path / "r", "--checks", "rules-loaded")
    assert result.exit_code == 3 and "repeated groupNextToken" in result.stdout
    assert server.server.requests < 10 and took < 5


def test_thanos_partial_response_with_missing_target_is_inconclusive(server, tmp_path):
    server.mode = "partial-missing-target"
    result, _ = validate(server.url, "json", [], tmp_path / "r")
    doc = json.loads(result.stdout)
    assert result.exit_code == 3, result.stdout[-1000:]
    assert not [f for f in doc["findings"] if f["severity"] == "error"]
    assert any("partial" in f["message"] for f in doc["findings"])


def test_non_prometheus_probe_answer_is_exit_2(server, tmp_path):
    for mode in ("probe-string-x1", "probe-result-string"):
        server.mode = mode
        result, _ = validate(server.url, "json", [], tmp_path / "r")
        assert result.exit_code == 2 and "not-prometheus-api" in result.stdout, mode


def test_connection_refused_every_format_is_exit_2(tmp_path):
    sock = __import__("socket").socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    for fmt in FORMATS:
        result, _ = validate(f"http://127.0.0.1:{port}", fmt, [], tmp_path / "r")
        assert result.exit_code == 2 and "Traceback" not in result.output, (fmt, result.output[-500:])


@pytest.mark.parametrize("content,what", [(f"{TOKEN}\nsecond-line\n", "more than one line"),
                                          (f"{TOKEN}\r\n\r\nx", "more than one line"),
                                          (f"{TOKEN}\x01", "control character")])
def test_bearer_token_file_with_a_second_line_is_a_usage_error(tmp_path, content, what):
    token = tmp_path / "token"
    token.write_text(content)
    out_file = tmp_path / "r"
    result, _ = validate("http://127.0.0.1:9", "text", ["--bearer-token-file", str(token)], out_file)
    assert result.exit_code == 2 and what in result.output
    assert TOKEN not in result.output and "second-line" not in result.output
    assert not out_file.exists() or TOKEN not in out_file.read_text()


@pytest.mark.parametrize("value", [f"{HEADER}\r\nX-Injected: 1", f"{HEADER}\nx", f"{HEADER}\x00"])
def test_header_with_cr_lf_is_a_usage_error_without_the_value(tmp_path, value):
    result, _ = validate("http://127.0.0.1:9", "json", ["--header", f"X-Secret={value}"], tmp_path / "r")
    assert result.exit_code == 2 and "--header" in result.output
    assert HEADER not in result.output and "Traceback" not in result.output


@pytest.mark.parametrize("mode", ["gzip-bomb", "huge-body"])
def test_memory_stays_bounded(server, tmp_path, mode):
    """The issue measured 3.15 GB RSS for a 1 MiB gzip bomb and 2.8 GB for a 100 MB answer; with
    the 1 MiB cap a run stays far below 400 MB."""
    server.mode = mode
    # the peak of this process' own memory (VmHWM): ru_maxrss would carry the pytest worker's peak
    # over, since Linux keeps the peak of the memory an exec replaces (Python's subprocess starts the
    # child with vfork, sharing the worker's memory until the exec)
    code = ("import re, sys\nfrom gpumon.cli import main\nsys.argv = ['gpumon'] + sys.argv[1:]\n"
            "try:\n    main()\nfinally:\n"
            "    print('MAXRSS', re.search(r'VmHWM:\\s+(\\d+) kB', open('/proc/self/status').read()).group(1),"
            " file=sys.stderr)\n")
    proc = subprocess.run([sys.executable, "-c", code, "validate", "gpumon.yaml", "--prom", server.url, "--timeout", "5",
                           "--max-response-mib", "1", "--format", "json"], capture_output=True, text=True, cwd=ROOT,
                          timeout=60, env={**os.environ, "GPUMON_BEARER_TOKEN": ""})
    rss_kib = int(proc.stderr.rsplit("MAXRSS", 1)[1].split()[0])
    assert proc.returncode == 2 and "response-too-large" in proc.stdout, proc.stdout[-500:] + proc.stderr[-500:]
    assert rss_kib < 400 * 1024, f"{rss_kib / 1024:.0f} MiB"
