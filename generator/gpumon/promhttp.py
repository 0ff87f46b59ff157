"""The HTTP ground rules of :class:`gpumon.promapi.PromClient`: which URLs it talks to.

*One origin.* ``--prom`` is parsed once (:func:`parse_base`): a URL that does not parse, a port out
of range, a query string (gpumon's API paths would silently drop it, and it usually holds a
credential) or a ``#fragment`` is a usage error naming ``--prom``, never the URL's secrets. A
redirect is followed only within the origin (scheme, host, port) of ``--prom``
(:func:`redirect_target`): a redirect elsewhere, to a cloud metadata service, a loopback or any
internal address, is refused by name, so nothing another host answers reaches a report. A
``Location`` that is not a URL is a connection error naming the URL that sent it.
"""

from __future__ import annotations

from urllib.parse import unquote, urljoin, urlsplit, urlunsplit

import httpx

from . import redact
from .promanswer import PromError

_DEFAULT_PORTS = {"http": 80, "https": 443}


def split(url: str):
    """``urlsplit(url)`` with its port checked, or the reason it is not a URL (a ``str``)."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises for a port out of range or not a number
    except ValueError as exc:
        return f"not a valid URL ({exc})"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "not an http(s) URL (e.g. http://prometheus:9090)"
    if any(not ch.isprintable() or ch.isspace() for ch in parts.hostname):
        return "not a valid URL (its host holds white space or a control character)"
    try:
        httpx.URL(urlunsplit(parts._replace(netloc=_hostport(parts))))
    except httpx.InvalidURL as exc:
        return f"not a valid URL ({exc})"
    return parts


def _hostport(parts) -> str:
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    return host + (f":{parts.port}" if parts.port is not None else "")


def origin(parts) -> tuple[str, str, int]:
    """(scheme, host, port) of split URL ``parts``, the port filled in (``http://h`` is ``h:80``)."""
    return parts.scheme, parts.hostname or "", parts.port if parts.port is not None else _DEFAULT_PORTS[parts.scheme]


def shown(parts) -> str:
    """Split URL ``parts`` as a message shows it: no userinfo, no query string, no fragment (each
    may hold a credential)."""
    return urlunsplit((parts.scheme, _hostport(parts), parts.path, "", ""))


def parse_base(url: str):
    """``--prom`` split, with its userinfo decoded: ``(parts, user, password)`` (None without).

    Raises:
        PromError(kind="config", url="--prom"): why it is unusable, never quoting the URL.
    """
    _register_password(url)
    parts = split(url)
    if isinstance(parts, str):
        raise PromError("config", "--prom", parts)
    if parts.query:
        raise PromError("config", "--prom", "--prom must not carry a query string (gpumon's API requests would drop "
                        "it, and it is not shown: it often holds a credential); pass credentials with --header, "
                        "--bearer-token-file or --basic-auth-file")
    if parts.fragment:
        raise PromError("config", "--prom", "--prom must not carry a #fragment (it is never sent; gpumon would ask "
                        "the wrong path): pass the server's base URL, e.g. http://prometheus:9090")
    user = unquote(parts.username) if parts.username is not None else None
    password = unquote(parts.password) if parts.password is not None else None
    return parts, user, password


class Redirect(Exception):
    """A redirect answer, raised by :func:`stop_at_redirect` (before httpx parses its Location)."""

    def __init__(self, url: str, status: int, location: str):
        super().__init__(f"{status} redirect")
        self.url, self.status, self.location = url, status, location


def stop_at_redirect(response: httpx.Response) -> None:
    """httpx response hook: raise :class:`Redirect` for a redirect answer. httpx parses the
    ``Location`` of every redirect (even one it does not follow) and fails on a malformed one with
    an error that does not say which; this hook runs first, so :func:`redirect_target` decides."""
    if response.status_code in (301, 302, 303, 307, 308) and "location" in response.headers:
        raise Redirect(str(response.request.url), response.status_code, response.headers["location"])


def _register_password(url: str) -> None:
    """Register the password of ``url``'s userinfo, as given and percent-decoded, for redaction
    before anything parses it (and could fail quoting it): cut out by hand, not parsed."""
    authority = url.partition("://")[2]
    for stop in "/?#":
        authority = authority.split(stop, 1)[0]
    if "@" in authority:
        password = authority.rpartition("@")[0].partition(":")[2]
        redact.add(password)
        redact.add(unquote(password))


def redirect_target(url: str, status: int, location: str, base_origin: tuple) -> str:
    """The URL a ``status`` redirect from ``url`` to ``location`` leads to, without userinfo.

    Raises:
        PromError(kind="connection"): ``location`` is not a URL, or it leaves ``base_origin``.
    """
    where = shown(urlsplit(url))
    try:
        target = split(urljoin(url, location))
    except ValueError as exc:  # urljoin parses both URLs
        target = f"not a valid URL ({exc})"
    if isinstance(target, str):
        raise PromError("connection", where, f"redirects to a malformed Location: {target}", status,
                        hint="a broken proxy or ingress in front of the server: check --prom")
    if origin(target) != base_origin:
        scheme, host, port = base_origin
        host = f"[{host}]" if ":" in host else host
        raise PromError("connection", where, f"redirects to {shown(target)}, outside the origin of --prom "
                        f"({scheme}://{host}:{port}): not followed", status,
                        hint="gpumon talks only to the scheme, host and port --prom names; if the server it "
                             "points to is trusted, pass that URL as --prom")
    return urlunsplit(target._replace(netloc=_hostport(target)))
