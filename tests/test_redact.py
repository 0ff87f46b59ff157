"""The one redaction step (gpumon.redact): every secret form is masked; a short secret only where it
stands alone, so the report around it stays readable."""

from __future__ import annotations

import pytest

from gpumon import redact


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
