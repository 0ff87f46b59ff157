"""The one redaction step (gpumon.redact): every secret form is masked; a short secret only where it
stands alone, so the report around it stays readable."""

from __future__ import annotations

import base64
import json

import httpx
import pytest

from gpumon import redact
from gpumon.promapi import PromClient, PromError


@pytest.fixture(autouse=True)
def _clean():
    redact.reset()
    yield
    redact.reset()


def test_a_long_secret_is_masked_everywhere_even_inside_words():
    redact.add("s3cr3t-token")
    assert redact.redact("Bearer s3cr3t-token; url?x=s3cr3t-tokenZ") == "Bearer ****; url?x=****Z"


def test_a_short_secret_is_masked_where_it_stands_alone_only():
    redact.add("1")
    text = redact.redact("header X-Scope-OrgID: 1\n12 checks run, 1 finding, 10.0.0.1:9400")
    assert "OrgID: ****" in text and "12 checks run" in text and "10.0.0.****:9400" in text
    assert "**** finding" in text


def test_quoted_forms_are_masked():
    redact.add('pa"ss\\word')
    assert "pa" not in redact.redact('{"password": "pa\\"ss\\\\word"}').replace("password", "")


def test_clip_masks_before_it_cuts():
    """A secret the cut would split is masked whole, not printed up to the cut."""
    redact.add("Bearer SUPERSECRETTOKEN")
    text = "x" * 20 + "Bearer SUPERSECRETTOKEN and more"
    assert redact.clip(text, 30) == "x" * 20 + "**** and m"
    assert redact.clip("abc", 30) == "abc" and redact.clip("y" * 50, 10) == "y" * 10


def test_clip_drops_the_start_of_a_secret_its_window_cut_off():
    """Only ``limit`` plus the longest secret is read: a secret starting near the window's end, cut
    by it, is not left in part once masks before it shrank the text."""
    secret = "TOKEN-0123456789"
    redact.add(secret)
    text = (secret + " ") * 3 + "x" * 100
    # the window is 20 + 16 characters: the third secret is cut after "TO", which the two masks
    # before it would bring inside the first 20
    assert redact.clip(text, 20) == "**** **** "


def test_percent_encoded_forms_are_masked():
    redact.add("p@ss/w0rd+x")
    text = redact.redact("redirect to /login?rd=%2Fapi%3Ftoken%3Dp%40ss%2Fw0rd%2Bx and p%40ss/w0rd%2Bx")
    assert "p%40ss" not in text and "w0rd" not in text


@pytest.mark.parametrize("status,body,ctype", [
    # an HTML error page, excerpt cut at 120 characters
    (500, "<html><body>" + "x" * 76 + "Authorization: {auth} tail</body></html>", "text/html"),
    # the API error envelope's "error", cut at 300
    (400, json.dumps({"status": "error", "errorType": "bad_data", "error": "y" * 280 + "Authorization: {auth}"}),
     "application/json"),
    # an answer of the wrong shape, quoted up to 200 characters
    (200, json.dumps({"status": "success", "data": {"resultType": "vector", "result": "z" * 160 + "{auth}"}}),
     "application/json"),
    # a warning, kept up to 500 characters
    (200, json.dumps({"status": "success", "warnings": ["w" * 480 + "{auth}"],
                      "data": {"resultType": "vector", "result": []}}), "application/json"),
])
@pytest.mark.parametrize("auth", ["bearer", "basic"])
def test_a_server_echoing_the_credential_at_a_cut_shows_no_part_of_it(tmp_path, status, body, ctype, auth):
    token, userpass = "SUPERSECRETTOKEN-0123456789", "alice:PASSW0RD-very-secret-xyz"
    (tmp_path / "tok").write_text(token)
    (tmp_path / "basic").write_text(userpass)
    kw = {"bearer_token_file": str(tmp_path / "tok")} if auth == "bearer" else \
        {"basic_auth_file": str(tmp_path / "basic")}

    def answer(request):
        return httpx.Response(status, text=body.replace("{auth}", request.headers["authorization"]),
                              headers={"content-type": ctype})

    client = PromClient("http://prom:9090", transport=httpx.MockTransport(answer), **kw)
    try:
        shown = " ".join(client.query("up").warnings)
    except PromError as exc:
        shown = f"{exc} {exc.hint}"
    b64 = base64.b64encode(userpass.encode()).decode()
    assert "****" in shown
    for part in ("Bea", token[:4], b64[:4], "PASS", "Bas"):
        assert part not in shown, shown
