"""What every command shares: exit codes, the internal-error exit and loading the spec (or exiting
2 with every problem).

Only ``click`` and :mod:`gpumon.exitcodes` (which imports nothing) are imported at module level,
so ``gpumon --help`` stays fast; the library is imported inside the functions that need it.
"""

from __future__ import annotations

import functools
import os
import sys
from dataclasses import dataclass, fields
from pathlib import Path

import click

# the exit codes of every command (documented in ``EPILOG`` and README "Exit codes"), re-exported
# for the commands from the one module that defines them
from ..exitcodes import EXIT_ERROR, EXIT_INTERNAL

EPILOG = """\b
Exit codes:
  0  all good
  1  findings: drift, lint errors, failed checks
  2  usage, spec/config or connection error
  3  (validate, preview) inconclusive: partial data, no failures
  4  internal error: a bug in gpumon (please report it; GPUMON_DEBUG=1 shows the traceback)
"""


def input_options(func):
    """``--follow-symlinks`` and ``--max-input-mib``: how lint, diff and validate --dashboards read
    files (:mod:`gpumon.readers.files`; the defaults refuse symlinks leading out of the paths
    given, devices and FIFOs, files over 16 MiB, and YAML/JSON nested over 100 levels)."""
    func = click.option("--max-input-mib", default=16, show_default=True, type=click.IntRange(1, 1024),
                        help="Refuse input files larger than this (each file; exit 2).")(func)
    return click.option("--follow-symlinks", is_flag=True,
                        help="Read symlinks that lead outside the paths given (refused by default; devices, "
                             "FIFOs and sockets are refused always).")(func)


def read_limits(follow_symlinks: bool, max_input_mib: int):
    """The :class:`gpumon.readers.files.Limits` the two options above ask for."""
    from ..readers.files import Limits

    return Limits(follow_symlinks=follow_symlinks, max_bytes=max_input_mib << 20)


def parse_headers(headers: tuple[str, ...]) -> dict[str, str]:
    """``--header K=V`` options as a dict; each value is registered for redaction (it is usually
    a credential) and never echoed. click.BadParameter for a malformed or forbidden header."""
    from .. import redact
    from ..promapi import PromError, check_header

    extra = {}
    for h in headers:
        key, sep, value = h.partition("=")
        if not sep or not key.strip():
            # never echo the value: it is usually a credential (Authorization: Bearer ...)
            shown = key.split(":", 1)[0].strip() or "?"
            raise click.BadParameter(f"expected K=V (e.g. Authorization=Bearer ...), got {shown!r} followed by a "
                                     "value that is not shown", param_hint="--header")
        redact.add(value)
        try:
            check_header(key.strip(), value)
        except PromError as exc:
            raise click.BadParameter(exc.message, param_hint="--header") from None
        extra[key.strip()] = value
    return extra


def internal_error(exc: BaseException, command: str | None = None) -> None:
    """Exit 4 with one line asking for a bug report: an uncaught exception is a bug, and must
    not end as exit 1 (findings) or 2, which CI reads as drift or bad input (issue #15, finding 4).
    The line is redacted (an exception may quote a header); ``GPUMON_DEBUG=1`` adds the traceback."""
    from ..oneline import one_line
    from ..redact import redact

    if os.environ.get("GPUMON_DEBUG") == "1":
        import traceback

        click.echo(redact("".join(traceback.format_exception(exc))), err=True, nl=False)
    # the exception's text may come from the input (a template, a server): escaped like any
    detail = one_line(" ".join(redact(f"{type(exc).__name__}: {exc}").split()))[:300]
    where = f" in {command}" if command else ""
    click.echo(f"gpumon: internal error{where} ({detail}); this is a bug in gpumon: please report it with the command "
               "and its input (GPUMON_DEBUG=1 shows the traceback)", err=True)
    sys.exit(EXIT_INTERNAL)


#: the SPEC value that picks gpumon's bundled example spec (never chosen without being asked for)
DEFAULT_SPEC = "default"


def find_spec(start: Path | None = None) -> Path | None:
    """The ``gpumon.yaml`` in ``start`` (default: the working directory) or the nearest folder
    above it, as ``git`` finds its repository; None when no folder up to the root has one."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if _is_file(folder / "gpumon.yaml"):
            return folder / "gpumon.yaml"
    return None


def _is_file(path: Path) -> bool:
    """``path.is_file()``, False where a folder on the way may not be entered (stat raises
    PermissionError there, which ``Path.is_file`` passes on)."""
    try:
        return path.is_file()
    except OSError:
        return False


def specs_for(paths: list[str]) -> dict[Path, list[str]]:
    """The spec that governs each path: the nearest ``gpumon.yaml`` from the path's own folder (a
    folder: itself) upwards, so ``gpumon lint clusters/a/output clusters/b/output`` checks each
    tree against its own spec from anywhere; for a path outside every spec's tree, the working
    directory's (:func:`find_spec`), the project lint runs in. Returns spec -> the paths it
    governs (in the order given); exits 2 naming a path no spec governs (never a guess)."""
    out: dict[Path, list[str]] = {}
    for path in paths:
        start = Path(path).parent if _is_file(Path(path)) or not _is_dir(Path(path)) else Path(path)
        found = find_spec(start) or find_spec()
        if found is None:
            where = sorted({str(start.resolve()), str(Path.cwd())})
            click.echo(f"gpumon: no spec found: pass {_how_to_name()} or run `gpumon init` "
                       f"(no gpumon.yaml in {' or '.join(where)} "
                       f"or a folder above, for {path}; `--spec {DEFAULT_SPEC}` uses gpumon's bundled example spec)",
                       err=True)
            sys.exit(EXIT_ERROR)
        out.setdefault(found, []).append(path)
    return out


def _how_to_name() -> str:
    """How the running command takes a spec, for "pass ... or run `gpumon init`": ``SPEC`` where
    it is an argument (render, validate), ``--spec SPEC`` where it is only an option (lint,
    preview): naming an argument a command does not have sends the user to a usage error."""
    ctx = click.get_current_context(silent=True)
    params = ctx.command.params if ctx is not None else ()
    positional = any(isinstance(p, click.Argument) and "SPEC" in (p.metavar or p.name.upper()) for p in params)
    return "SPEC" if positional or ctx is None else "--spec SPEC"


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:
        return False


def pick_spec(argument: str | None, option: str | None) -> str | None:
    """The spec given as the SPEC argument or as ``--spec`` (a usage error when both differ)."""
    if argument and option and argument != option:
        raise click.UsageError(f"two specs given: {argument} and --spec {option}")
    return argument or option


def load_or_exit(path: str | None):
    """The spec of :func:`load_built_or_exit`, checked as it checks it (the override names, the
    one spec problem building finds) but with no rule group built: for a command that needs no
    groups, or builds them while it does other work."""
    from ..rules import check_overrides

    return _load_or_exit(path, check_overrides)[0]


def load_built_or_exit(path: str | None):
    """``(spec, rule groups)``: load the spec at ``path`` and build its rule groups
    (:func:`gpumon.rules.build_groups`, which checks the override names), or print every problem as ``FILE:LINE:COL: path: message`` on
    stderr and exit 2. ``None`` means the nearest ``gpumon.yaml`` (:func:`find_spec`), ``default``
    the bundled spec; when there is no spec, say how to get one and exit 2 (never guess: the
    bundled spec's labels and runbook links are not the user's). Warnings go to stderr."""
    from ..rules import build_groups

    return _load_or_exit(path, build_groups)


def _load_or_exit(path: str | None, then):
    """``(spec, then(spec))``, or every problem on stderr and exit 2 (:func:`load_built_or_exit`)."""
    from ..spec import SpecError, default_spec_path, load_spec

    if path == DEFAULT_SPEC:
        path = str(default_spec_path())
    elif path is None:
        found = find_spec()
        if found is None:
            click.echo(f"gpumon: no spec found: pass {_how_to_name()} or run `gpumon init` (no gpumon.yaml in "
                       f"{Path.cwd()} or a folder above it; `{DEFAULT_SPEC}` uses gpumon's bundled example spec)", err=True)
            sys.exit(EXIT_ERROR)
        path = os.path.relpath(found)
    try:
        found = Path(path).is_file()
    except OSError as exc:     # a folder on the way may not be entered
        click.echo(f"gpumon: cannot read spec {path}: {exc.strerror or exc}", err=True)
        sys.exit(EXIT_ERROR)
    if not found:
        click.echo(f"gpumon: no spec found at {path}: pass {_how_to_name()} or run `gpumon init`", err=True)
        sys.exit(EXIT_ERROR)
    spec = None
    try:
        spec = load_spec(path)
        made = then(spec)     # build_groups checks the override names against the alerts it builds
    except SpecError as exc:
        # warnings too, in file order among the errors: an uncatalogued field name is often the
        # typo behind an error, and fixing the errors first would hide it for a round
        warnings = exc.warnings or (spec.warnings if spec is not None else ())
        for problem in sorted((*exc.problems, *warnings), key=lambda p: (p.file, p.line, p.column)):
            click.echo(str(problem), err=True)
        also = f" and {len(warnings)} warning(s)" if warnings else ""
        click.echo(f"gpumon: {len(exc.problems)} problem(s) in the spec{also}", err=True)
        sys.exit(EXIT_ERROR)
    for warning in spec.warnings:
        click.echo(str(warning), err=True)
    return spec, made


#: the HTTP path a backend serves the Prometheus API under (Mimir's is /prometheus)
BACKEND_PREFIX = {"prometheus": "", "thanos": "", "victoriametrics": "", "mimir": "/prometheus"}



@dataclass(frozen=True)
class ServerOptions:
    """How to reach the server: the options :func:`server_options` adds, ``--header`` parsed by
    :func:`parse_headers`."""

    backend: str
    path_prefix: str | None
    tenant: str | None
    headers: dict[str, str]
    bearer_token_file: str | None
    basic_auth_file: str | None
    ca_file: str | None
    insecure_skip_verify: bool


def server_options(command):
    """The options saying how to reach the server (``validate``, ``preview``): backend, path prefix,
    tenant, headers, credentials files and TLS, in the order ``--help`` lists them. The command
    receives them as one ``server`` argument (a :class:`ServerOptions`)."""
    names = [f.name for f in fields(ServerOptions)]

    @functools.wraps(command)
    def with_server(**kwargs):
        return command(server=ServerOptions(**{n: kwargs.pop(n) for n in names}), **kwargs)

    for decorator in reversed([
        click.option("--backend", type=click.Choice(sorted(BACKEND_PREFIX)), default="prometheus", show_default=True,
                     help="Server kind; mimir implies --path-prefix /prometheus."),
        click.option("--path-prefix", default=None, help="Path before /api/v1 (Mimir: /prometheus)."),
        click.option("--tenant", help="Tenant id, sent as X-Scope-OrgID on every request (Mimir, Cortex)."),
        click.option("--header", "headers", multiple=True, metavar="K=V", help="Extra request header (repeatable).",
                     callback=lambda _ctx, _param, value: parse_headers(value) if value else {}),
        click.option("--bearer-token-file", type=click.Path(dir_okay=False),
                     help="File holding a bearer token ($GPUMON_BEARER_TOKEN when unset)."),
        click.option("--basic-auth-file", type=click.Path(dir_okay=False), help="File holding user:password."),
        click.option("--ca-file", type=click.Path(dir_okay=False), help="CA bundle (PEM) to verify HTTPS with."),
        click.option("--insecure-skip-verify", is_flag=True, help="Do not verify the server's TLS certificate."),
    ]):
        with_server = decorator(with_server)
    return with_server


def connect_or_exit(command: str, url: str, server: ServerOptions, *, timeout: float, deadline: float,
                    max_response_mib: int):
    """The :class:`~gpumon.promapi.PromClient` that ``validate`` and ``preview`` (``command``)
    talk to the server with (``max_response_mib`` in MiB, times in seconds); a client that cannot
    be built (an unreadable token file, a bad URL) says why on stderr and exits 2."""
    from ..promapi import BACKEND_QUERY_PARAMS, PromClient, PromError

    s = server
    try:
        return PromClient(url, path_prefix=BACKEND_PREFIX[s.backend] if s.path_prefix is None else s.path_prefix,
                          tenant=s.tenant, headers=s.headers, bearer_token_file=s.bearer_token_file,
                          basic_auth_file=s.basic_auth_file, ca_file=s.ca_file, insecure=s.insecure_skip_verify,
                          timeout=timeout, deadline=deadline, max_bytes=max_response_mib << 20,
                          query_params=BACKEND_QUERY_PARAMS.get(s.backend))
    except PromError as exc:
        click.echo(f"gpumon {command}: {exc}", err=True)
        sys.exit(EXIT_ERROR)
