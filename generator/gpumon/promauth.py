"""Credentials and headers of :class:`gpumon.promapi.PromClient`: secret files read, checked and
registered with :mod:`gpumon.redact` before anything can fail on them, header values HTTP can
carry, URLs without ``user:password@``."""

from __future__ import annotations

from pathlib import Path

from . import redact
from .promanswer import PromError


def _read_secret(path: str, what: str, ascii_only: bool = True) -> str:
    try:
        raw = Path(path).read_bytes()[:65536]
    except OSError as exc:
        raise PromError("config", path, f"cannot read {what} file: {exc.strerror or exc}") from None
    text = raw.decode("utf-8", "replace")
    redact.add(text.strip())  # before any check can quote it
    for line in text.splitlines():
        redact.add(line.strip())
    text = text.strip()
    if not text:
        raise PromError("config", path, f"{what} file is empty")
    if "\n" in text or "\r" in text:
        raise PromError("config", path, f"{what} file holds more than one line (the value is not shown): keep only "
                        "the secret on its first line")
    bad = _bad_header_char(text, ascii_only)
    if bad:
        raise PromError("config", path, f"{what} file holds {bad} (the value is not shown)")
    return text


def _bad_header_char(value: str, ascii_only: bool = True) -> str | None:
    """What makes ``value`` unusable in an HTTP header (said without quoting it), or None. The
    HTTP client (httpx) encodes header values as ASCII, so any other character is refused here
    rather than failing inside a request; ``ascii_only=False`` for text that is base64-encoded
    before it is sent (basic auth)."""
    for ch in value:
        if ch in "\r\n":
            return "a line break (CR/LF)"
        if ord(ch) < 0x20 and ch != "\t" or ord(ch) == 0x7F:
            return "a control character"
        if ascii_only and ord(ch) > 0x7E:
            return "a non-ASCII character (HTTP header values are ASCII; percent-encode it or use the ASCII form)"
    return None


def check_header(name: str, value: str) -> None:
    """Raise ``PromError(kind="config")`` for a header HTTP cannot carry; the value is never shown."""
    redact.add(value)
    if not name or any(c in name for c in ":\r\n ") or _bad_header_char(name):
        raise PromError("config", "--header", f"{name[:40]!r} is not a header name")
    bad = _bad_header_char(value)
    if bad:
        raise PromError("config", "--header", f"the value of {name} holds {bad} (the value is not shown)")


def strip_userinfo(url: str) -> str:
    """``url`` without ``user:password@`` (for messages). Never raises: the host part is cut at the
    last ``@`` of the authority, not parsed, so a URL with a bad port or bracket is still shown."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    end = min((i for i in (rest.find("/"), rest.find("?"), rest.find("#")) if i != -1), default=len(rest))
    authority = rest[:end]
    return f"{scheme}://{authority.rpartition('@')[2]}{rest[end:]}" if "@" in authority else url
