"""The client talks only to the origin (scheme, host, port) ``--prom`` names: a redirect elsewhere
is refused by name (exit 2), never followed, so an answer from another host (a cloud metadata
service's credentials) can reach no report; a malformed ``--prom`` or ``Location`` is a usage or
connection error (exit 2), never an internal error (4); ``--prom`` carries no query string, and
its percent-escaped password is sent decoded. Mocked or hostile servers: a real Prometheus
neither redirects elsewhere nor sends a malformed ``Location``."""

from __future__ import annotations

import base64

import httpx
import pytest
from click.testing import CliRunner

from gpumon import redact
from gpumon.cli import cli
from gpumon.promapi import PromClient, PromError
from gpumon.promauth import strip_userinfo

from .conftest import ROOT
from .hostile_prom import FAKE_KEY, HostileProm

METADATA = "http://169.254.169.254/latest/meta-data/iam/security-credentials/role"
PROBE = {"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}, "value": [1, "1"]}]}}


def mock(handler, url="http://prom.example:9090", **kw) -> PromClient:
    return PromClient(url, transport=httpx.MockTransport(handler), **kw)


def answer_after(redirects: dict[str, str]):
    """A handler redirecting (302) each URL of ``redirects`` to its value, answering the rest."""
    seen = []

    def handler(request):
        seen.append(str(request.url))
        for origin_url, location in redirects.items():
            if str(request.url).startswith(origin_url):
                return httpx.Response(302, headers={"location": location})
        if request.url.host == "169.254.169.254":
            return httpx.Response(200, text='{"AccessKeyId": "AKIA", "SecretAccessKey": "leaked"}')
        return httpx.Response(200, json=PROBE)
    return handler, seen


@pytest.mark.parametrize("location", [METADATA + "?X-Token=abc", "http://u:pw@169.254.169.254/latest/meta-data/",
                                      "https://prom.example:9090/api/v1/query", "http://prom.example:9091/api/v1/query",
                                      "http://other.example:9090/api/v1/query", "//127.0.0.1/api/v1/query"])
def test_a_redirect_leaving_the_origin_is_refused_and_not_followed(location):
    handler, seen = answer_after({"http://prom.example:9090/": location})
    with mock(handler) as c, pytest.raises(PromError) as err:
        c.query("vector(1)")
    assert len(seen) == 1, seen  # nothing was asked of the other origin
    exc = err.value
    assert exc.kind == "connection" and exc.status == 302
    assert str(exc).startswith("http://prom.example:9090/api/v1/query: HTTP 302: ")
    shown = location.split("?")[0].replace("u:pw@", "")
    assert f"redirects to {shown if '//' not in shown[:2] else 'http:' + shown}" in exc.message
    assert "X-Token" not in str(exc) and "abc" not in str(exc) and "pw" not in str(exc) and "leaked" not in str(exc)
    assert "pass that URL as --prom" in exc.hint


@pytest.mark.parametrize("base,location,final", [
    ("http://prom.example:9090/prometheus", "/prometheus/api/v1/query/?query=vector(1)", "/prometheus/api/v1/query/"),
    ("http://prom.example", "http://PROM.example:80/x/api/v1/query?query=vector(1)", "/x/api/v1/query"),
    ("https://prom.example", "https://prom.example:443/y?query=vector(1)", "/y"),
    ("http://[::1]:9090", "http://[::1]:9090/z?query=vector(1)", "/z"),
])
def test_a_redirect_within_the_origin_is_followed_with_the_credentials(base, location, final):
    seen = []

    def handler(request):
        seen.append((request.url.path, request.headers.get("authorization")))
        if len(seen) == 1:
            return httpx.Response(302, headers={"location": location})
        return httpx.Response(200, json=PROBE)

    with mock(handler, url=base, headers={"Authorization": "Bearer tok-origin-1"}) as c:
        assert c.query("vector(1)").data
    assert seen[1] == (final, "Bearer tok-origin-1"), seen


def test_a_same_origin_redirect_carrying_userinfo_sends_no_url_credentials():
    seen = []

    def handler(request):
        seen.append((request.url.userinfo, request.headers.get("authorization")))
        if len(seen) == 1:
            return httpx.Response(302, headers={"location": "http://mallory:pw@prom.example:9090/x?query=vector(1)"})
        return httpx.Response(200, json=PROBE)

    with mock(handler) as c:
        c.query("vector(1)")
    assert seen[1] == (b"", None), seen


@pytest.mark.parametrize("location", ["http://127.0.0.1:99999/x", "http://a:b@[::1/x", "http://h:port/x",
                                      "http://exa mple/x", "http://[fe80::1%zz/x"])
def test_a_malformed_location_is_a_connection_error_naming_the_url(location):
    handler, _ = answer_after({"http://prom.example:9090/": location})
    with mock(handler) as c, pytest.raises(PromError) as err:
        c.query("vector(1)")
    assert err.value.kind == "connection" and err.value.status == 302
    assert err.value.url == "http://prom.example:9090/api/v1/query" and "malformed Location" in err.value.message


@pytest.mark.parametrize("url,why", [
    ("http://127.0.0.1:99999/", "Port"), ("http://h:abc/", "Port"), ("http://a:b@[::1", "IPv6"),
    ("http://h:9090/?api_key=SECRET-in-query", "must not carry a query string"),
    ("http://h:9090/#SECRET-in-fragment", "must not carry a #fragment"), ("ftp://h/", "not an http(s) URL"),
    ("http:///x", "not an http(s) URL"), ("http://exa mple:9090", "not a valid URL"),
])
def test_a_malformed_prom_is_a_config_error_naming_the_argument(url, why):
    with pytest.raises(PromError) as err:
        PromClient(url)
    assert err.value.kind == "config" and err.value.url == "--prom" and why in err.value.message
    assert "SECRET" not in str(err.value)


@pytest.mark.parametrize("command", ["validate", "preview"])
@pytest.mark.parametrize("url,why", [("http://127.0.0.1:99999/", "Port"), ("http://alice:s3cretpw@[::1", "IPv6"),
                                     ("http://127.0.0.1:9/?api_key=SECRET-in-query", "query string")])
def test_a_malformed_prom_exits_2_in_validate_and_preview(tmp_path, command, url, why):
    redact.reset()
    args = [command, str(ROOT / "gpumon.yaml"), "--prom", url, "-o", str(tmp_path / "out")]
    result = CliRunner().invoke(cli, args, env={"GPUMON_BEARER_TOKEN": None})
    out = result.stdout + result.stderr
    assert result.exit_code == 2, out
    assert "--prom" in out and why in out and "internal error" not in out
    assert "s3cretpw" not in out and "SECRET" not in out


@pytest.mark.parametrize("mode", ["redirect-metadata", "redirect-other-port", "redirect-https", "redirect-bad-port",
                                  "redirect-bad-ipv6"])
def test_validate_refuses_a_redirect_elsewhere_and_writes_its_report(tmp_path, mode):
    redact.reset()
    out_file = tmp_path / "report.txt"
    with HostileProm(mode) as srv:
        args = ["validate", str(ROOT / "gpumon.yaml"), "--prom", srv.url, "-o", str(out_file), "--format", "json",
                "--timeout", "2", "--deadline", "10"]
        result = CliRunner().invoke(cli, args, env={"GPUMON_BEARER_TOKEN": None})
        requests = srv.server.requests
    out = result.stdout + result.stderr + out_file.read_text()
    assert result.exit_code == 2, out
    assert f"{srv.url}/api/v1/query: HTTP 302" in out and "internal error" not in out
    assert requests == 1, "nothing asked after the redirect"
    for leak in (FAKE_KEY, "pw-in-location", "tok-in-location", "token=abc"):
        assert leak not in out
    if mode == "redirect-metadata":
        assert "redirects to http://localhost:" in out and "/latest/meta-data/iam/security-credentials/role" in out


def test_a_percent_escaped_password_is_sent_decoded_and_masked_in_both_forms():
    redact.reset()
    seen = []

    def handler(request):
        seen.append(request.headers.get("authorization"))
        return httpx.Response(401, text="denied: P%40ssw0rd-9x / P@ssw0rd-9x / " + seen[-1])

    with mock(handler, url="http://us%65r:P%40ssw0rd-9x@prom.example:9090") as c, pytest.raises(PromError) as err:
        c.query("vector(1)")
    assert seen == ["Basic " + base64.b64encode(b"user:P@ssw0rd-9x").decode()]
    assert "P%40ssw0rd-9x" not in str(err.value) and "P@ssw0rd-9x" not in str(err.value)
    assert redact.redact("P%40ssw0rd-9x P@ssw0rd-9x") == "**** ****"


def test_strip_userinfo_never_raises():
    assert strip_userinfo("http://a:b@h:99999/x") == "http://h:99999/x"
    assert strip_userinfo("http://a:b@[::1/x") == "http://[::1/x"
    assert strip_userinfo("http://h:9090/x") == "http://h:9090/x"


def test_an_error_quotes_a_short_escaped_excerpt_of_the_body():
    body = "\x1b[31mred\x1b[0m " + "x" * 5000

    def handler(request):
        return httpx.Response(500, text=body, headers={"content-type": "text/plain"})

    with mock(handler) as c, pytest.raises(PromError) as err:
        c.query("vector(1)")
    assert "\x1b" not in str(err.value) and "\\x1b[31mred" in str(err.value)
    assert len(err.value.message) <= 250
