"""The HTTP ground rules of :class:`gpumon.promapi.PromClient`: which URLs it talks to, and how long
it waits for them.

*One origin.* ``--prom`` is parsed once (:func:`parse_base`): a URL that does not parse, a port out
of range, a query string (gpumon's API paths would silently drop it, and it usually holds a
credential) or a ``#fragment`` is a usage error naming ``--prom``, never the URL's secrets. A
redirect is followed only within the origin (scheme, host, port) of ``--prom``
(:func:`redirect_target`): a redirect elsewhere, to a cloud metadata service, a loopback or any
internal address, is refused by name, so nothing another host answers reaches a report. A
``Location`` that is not a URL is a connection error naming the URL that sent it.

*Wall-time deadlines.* httpx's read timeout is per read: a server sending a header line (or a byte
of the body) just before each timeout keeps a request open for ever. :class:`DeadlineBackend` wraps
the network backend of every httpcore connection pool of the client, and bounds every connect, TLS
handshake, read and write by the time left until the absolute deadline of the request in flight on
this thread (:func:`deadline`); at that deadline an operation fails as httpcore's own timeout. The
socket's own timeout does the waiting, except for the host name's lookup: ``getaddrinfo`` takes no
timeout (a resolver that does not answer held a run for the resolver's own retries, 20 s and more
with glibc's defaults), so it runs on a daemon thread, waited for until the deadline, and the
connection is made to the addresses it returned.
"""

from __future__ import annotations

import contextlib
import contextvars
import ipaddress
import socket
import threading
import time
from urllib.parse import unquote, urljoin, urlsplit, urlunsplit

import httpcore
import httpx

from . import redact
from .promanswer import PromError

#: the absolute deadline (``time.monotonic()``) of the request this thread is sending, or None
_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("gpumon_request_deadline", default=None)
_DEFAULT_PORTS = {"http": 80, "https": 443}
#: bytes written per bounded write (a server that reads slowly cannot stretch one write)
_WRITE_CHUNK = 16384


@contextlib.contextmanager
def deadline(at: float):
    """Bound every network operation of this thread by ``at`` (``time.monotonic()``) until exit."""
    token = _DEADLINE.set(at)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def _bounded(timeout: float | None, expired: type[Exception]) -> float | None:
    """``timeout`` cut to the time left before this thread's request deadline; ``expired`` once
    none is left."""
    at = _DEADLINE.get()
    if at is None:
        return timeout
    left = at - time.monotonic()
    if left <= 0:
        raise expired("the request's deadline passed")
    return left if timeout is None else min(timeout, left)


class DeadlineStream(httpcore.NetworkStream):
    """A network stream each of whose reads and writes ends by the request's deadline."""

    def __init__(self, inner: httpcore.NetworkStream):
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        """At most ``max_bytes``, waiting no longer than the timeout or the request's deadline."""
        return self._inner.read(max_bytes, _bounded(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        """``buffer``, sent in chunks each bounded by the time left."""
        for at in range(0, len(buffer), _WRITE_CHUNK):
            self._inner.write(buffer[at:at + _WRITE_CHUNK], _bounded(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        """Close the connection."""
        self._inner.close()

    def start_tls(self, ssl_context, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        """The TLS stream; the whole handshake is bounded (Python's ssl module applies the socket
        timeout to the handshake as a whole, not to each of its reads)."""
        bounded = _bounded(timeout, httpcore.ConnectTimeout)
        return DeadlineStream(self._inner.start_tls(ssl_context, server_hostname, bounded))

    def get_extra_info(self, info: str):
        """What the wrapped stream says (httpcore asks whether a kept-alive socket is readable)."""
        return self._inner.get_extra_info(info)


class DeadlineBackend(httpcore.NetworkBackend):
    """httpcore's network backend with every stream a :class:`DeadlineStream`."""

    def __init__(self, inner: httpcore.NetworkBackend):
        self._inner = inner

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options=None) -> httpcore.NetworkStream:
        """A TCP connection, made before the request's deadline: the host's addresses looked up
        within it (:func:`resolve`), then each tried in turn with the time left."""
        failed: OSError | None = None
        for address in resolve(host, port, _bounded(timeout, httpcore.ConnectTimeout)):
            try:
                stream = self._inner.connect_tcp(address, port, _bounded(timeout, httpcore.ConnectTimeout),
                                                 local_address, socket_options)
            except httpcore.ConnectError as exc:
                failed = exc
                continue
            return DeadlineStream(stream)
        raise failed if failed else httpcore.ConnectError(f"{host}: no address")

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options=None) -> httpcore.NetworkStream:
        """A Unix socket connection, made before the request's deadline."""
        bounded = _bounded(timeout, httpcore.ConnectTimeout)
        return DeadlineStream(self._inner.connect_unix_socket(path, bounded, socket_options))

    def sleep(self, seconds: float) -> None:
        """Sleep (httpcore's retry back-off)."""
        self._inner.sleep(seconds)


def resolve(host: str, port: int, timeout: float | None) -> list[str]:
    """The addresses of ``host`` (an IP address as is), in the resolver's order, each once.

    Raises:
        httpcore.ConnectTimeout: no answer within ``timeout`` seconds (the lookup goes on, on its
            daemon thread, and its answer is dropped).
        httpcore.ConnectError: the resolver's own error (no such host, no network).
    """
    try:
        ipaddress.ip_address(host)
        return [host]
    except ValueError:
        pass
    answer: list = []

    def lookup() -> None:
        try:
            answer.append(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
        except OSError as exc:
            answer.append(exc)
    worker = threading.Thread(target=lookup, name=f"gpumon-resolve-{host}", daemon=True)
    worker.start()
    worker.join(timeout)
    if not answer:
        raise httpcore.ConnectTimeout(f"looking up {host} took longer than the time left ({timeout or 0:.1f}s)")
    if isinstance(answer[0], OSError):
        raise httpcore.ConnectError(f"{host}: {answer[0]}")
    return list(dict.fromkeys(info[4][0] for info in answer[0]))


def bound(client: httpx.Client) -> None:
    """Put every connection pool of ``client`` (its transport, and those it mounted for proxies
    from the environment) on a :class:`DeadlineBackend`. A transport given by a test (no pool) is
    left as is.

    Raises:
        RuntimeError: an httpx transport whose pool is not where httpx 0.27/0.28 keeps it: sending
            without the wall-time bound is not an option (a bug to report, exit 4).
    """
    for transport in (client._transport, *client._mounts.values()):
        if not isinstance(transport, httpx.HTTPTransport):
            continue
        pool = getattr(transport, "_pool", None)
        if not isinstance(pool, httpcore.ConnectionPool) or not hasattr(pool, "_network_backend"):
            raise RuntimeError("cannot bound this httpx version's requests by their deadline")
        if not isinstance(pool._network_backend, DeadlineBackend):
            pool._network_backend = DeadlineBackend(pool._network_backend)


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
        raise PromError("config", "--prom", "must not carry a query string (gpumon's API requests would drop "
                        "it, and it is not shown: it often holds a credential); pass credentials with --header, "
                        "--bearer-token-file or --basic-auth-file")
    if parts.fragment:
        raise PromError("config", "--prom", "must not carry a #fragment (it is never sent; gpumon would ask "
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
