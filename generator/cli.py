"""gpumon's command line. Only parses flags, finds files and calls the library.

Exit codes (all commands): 0 all good; 1 findings (drift, lint errors, failed checks);
2 usage, config or connection errors; validate adds 3 (inconclusive: partial data, no failures).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from . import render as render_mod
from . import writer
from .simulate import describe_kinds
from .spec import SpecError, default_spec_path, load_spec

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR, EXIT_INCONCLUSIVE = 0, 1, 2, 3

EPILOG = """\b
Exit codes:
  0  all good
  1  findings: drift, lint errors, failed checks
  2  usage, spec/config or connection error
  3  (validate) inconclusive: partial data, no failures
"""


def load_or_exit(path: str | None):
    """Load the spec at ``path`` (default: ``./gpumon.yaml``, else the bundled default spec), or
    print every problem as ``FILE:LINE:COL: path: message`` on stderr and exit 2."""
    if path is None:
        path = "gpumon.yaml" if Path("gpumon.yaml").is_file() else str(default_spec_path())
    try:
        return load_spec(path)
    except SpecError as exc:
        for problem in exc.problems:
            click.echo(str(problem), err=True)
        click.echo(f"gpumon: {len(exc.problems)} problem(s) in the spec", err=True)
        sys.exit(EXIT_ERROR)


@click.group(epilog=EPILOG, context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """gpumon: make missing GPU metrics loud and checkable.

    Render alerting/recording rules and Grafana dashboards for dcgm-exporter from a declarative
    spec, and validate a live Prometheus against it.
    """


@cli.command(epilog=EPILOG)
@click.argument("spec", required=False, type=click.Path(dir_okay=False))
@click.option("-o", "--output", "out", default="output", show_default=True, type=click.Path(file_okay=False),
              help="Folder to write into.")
@click.option("--check", is_flag=True, help="Write nothing; list what differs and exit 1 if anything does.")
def render(spec: str | None, out: str, check: bool) -> None:
    """Render rules, dashboards, rule tests and runbooks from SPEC (default: ./gpumon.yaml).

    Output is byte-identical for the same spec on any machine. Files gpumon wrote earlier and no
    longer renders are removed; other files in the folder are never touched.
    """
    model = load_or_exit(spec)
    files = render_mod.render(model)
    folder = Path(out)
    if check:
        drift = writer.diff(files, folder)
        if drift.any:
            for line in drift.lines():
                click.echo(line)
            click.echo(f"gpumon: {out}/ is out of date with {model.path}; run `gpumon render` (or `make render`)",
                       err=True)
            sys.exit(EXIT_FINDINGS)
        click.echo(f"{out}/ is up to date with {model.path} ({len(files)} files)")
        return
    try:
        drift = writer.write(files, folder)
    except OSError as exc:
        click.echo(f"gpumon: cannot write {exc.filename or out}: {exc.strerror or exc}", err=True)
        sys.exit(EXIT_ERROR)
    for line in drift.lines(applied=True):
        click.echo(line)
    click.echo(f"wrote {out}/ from {model.path} ({len(files)} files, {len(drift.added) + len(drift.changed)} "
               f"changed, {len(drift.removed)} removed)")


@cli.command(epilog="\b\nFault kinds (key=value pairs: kind, metric, node, gpu, every, seconds, value, instances):\n"
             + describe_kinds())
@click.option("--nodes", default=2, show_default=True, type=click.IntRange(1), help="Nodes (one target each).")
@click.option("--gpus", default=4, show_default=True, type=click.IntRange(1), help="GPUs per node.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", default=9400, show_default=True, type=click.IntRange(0, 65535),
              help="Port of the first node; node i uses PORT+i (0: free ports).")
@click.option("--fault", "fault_args", multiple=True, metavar="K=V,...",
              help="A fault, e.g. kind=drop,metric=DCGM_FI_DEV_GPU_UTIL,node=gpu-node-2 (repeatable).")
@click.option("--faults-file", type=click.Path(dir_okay=False),
              help="YAML/JSON file of faults, re-read on every scrape (edit it while running).")
@click.option("--dump", is_flag=True, help="Print the first node's page once and exit.")
def simulate(nodes: int, gpus: int, host: str, port: int, fault_args: tuple[str, ...], faults_file: str | None,
             dump: bool) -> None:
    """Serve dcgm-exporter 4.x exposition for NODES x GPUS simulated GPUs, with injected faults.

    Test alerting and `gpumon validate` without GPUs. Runs until Ctrl-C.
    """
    from . import simulate as sim

    try:
        faults = [sim.Fault.parse(a) for a in fault_args]
        if faults_file:
            sim.load_faults(faults_file)  # fail fast on a broken file; it is re-read on every scrape
        fleet = sim.Fleet(nodes, gpus, faults, faults_file)
    except sim.FaultError as exc:
        raise click.UsageError(str(exc)) from None
    if dump:
        status, body = fleet.page(fleet.nodes[0].name)
        click.echo(body if status == 200 else f"HTTP {status}: {body}", nl=False)
        return
    try:
        sim.serve_forever(fleet, host=host, base_port=port)
    except OSError as exc:
        ports = f"{port}..{port + nodes - 1}" if nodes > 1 and port else str(port)
        click.echo(f"gpumon simulate: cannot listen on {host}:{ports}: {exc.strerror or exc}", err=True)
        sys.exit(EXIT_ERROR)


VALIDATE_EPILOG = """\b
Exit codes:
  0  every check passed (warnings and info do not fail)
  1  a check failed (missing series, bad values, rules not loaded, ...)
  2  could not check: usage, bad spec, connection, auth, not a Prometheus API
  3  inconclusive: partial responses or failed queries, and nothing failed
"""
_BACKEND_PREFIX = {"prometheus": "", "thanos": "", "victoriametrics": "", "mimir": "/prometheus"}


@cli.command(epilog=VALIDATE_EPILOG)
@click.argument("spec", required=False, type=click.Path(dir_okay=False))
@click.option("--prom", "url", required=True, metavar="URL", help="Prometheus-compatible API base URL.")
@click.option("--backend", type=click.Choice(sorted(_BACKEND_PREFIX)), default="prometheus", show_default=True,
              help="Server kind; mimir implies --path-prefix /prometheus.")
@click.option("--path-prefix", default=None, help="Path before /api/v1 (Mimir: /prometheus).")
@click.option("--tenant", help="Tenant id, sent as X-Scope-OrgID on every request (Mimir, Cortex).")
@click.option("--header", "headers", multiple=True, metavar="K=V", help="Extra request header (repeatable).")
@click.option("--bearer-token-file", type=click.Path(dir_okay=False),
              help="File holding a bearer token ($GPUMON_BEARER_TOKEN when unset).")
@click.option("--basic-auth-file", type=click.Path(dir_okay=False), help="File holding user:password.")
@click.option("--ca-file", type=click.Path(dir_okay=False), help="CA bundle (PEM) to verify HTTPS with.")
@click.option("--insecure-skip-verify", is_flag=True, help="Do not verify the server's TLS certificate.")
@click.option("--timeout", default=30.0, show_default=True, type=click.FloatRange(0.1), help="Seconds per request.")
@click.option("--lookback", default="1h", show_default=True, help="History to check presence and gaps over.")
@click.option("--concurrency", default=4, show_default=True, type=click.IntRange(1, 32), help="Queries in flight.")
@click.option("--checks", default=None, metavar="LIST",
              help="Comma-separated subset of: targets, presence, duplicates, optional, values, continuity, counters, "
                   "rules-loaded, inventory, metadata, kubernetes (only with the spec's kubernetes section).")
@click.option("--label-limit", type=click.IntRange(1), default=None,
              help="Warn about series with more label names than this [default: 30 with --backend mimir, else off].")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "sarif", "junit", "github"]), default="text",
              show_default=True)
@click.option("-o", "--output", "out_file", type=click.Path(dir_okay=False), help="Write the report here too.")
def validate(spec, url, backend, path_prefix, tenant, headers, bearer_token_file, basic_auth_file, ca_file,
             insecure_skip_verify, timeout, lookback, concurrency, checks, label_limit, fmt, out_file) -> None:
    """Check a live Prometheus against SPEC: targets, every spec'd series on every GPU, values,
    gaps, loaded rules, driver versions. Says what is missing, where, since when and why."""
    from . import reporters
    from .durations import parse_duration
    from .promapi import PromClient, PromError
    from .validate import CHECKS
    from .validate import validate as run_validate

    try:
        lookback_s = parse_duration(lookback)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--lookback") from None
    chosen = tuple(c.strip() for c in checks.split(",")) if checks else tuple(CHECKS)
    unknown = [c for c in chosen if c not in CHECKS]
    if unknown:
        raise click.BadParameter(f"unknown check(s) {', '.join(unknown)}; choose from {', '.join(CHECKS)}",
                                 param_hint="--checks")
    extra = {}
    for h in headers:
        key, sep, value = h.partition("=")
        if not sep or not key.strip():
            # never echo the value: it is usually a credential (Authorization: Bearer ...)
            shown = key.split(":", 1)[0].strip() or "?"
            raise click.BadParameter(f"expected K=V (e.g. Authorization=Bearer ...), got {shown!r} followed by a "
                                     "value that is not shown", param_hint="--header")
        extra[key.strip()] = value
    model = load_or_exit(spec)
    try:
        client = PromClient(url, path_prefix=_BACKEND_PREFIX[backend] if path_prefix is None else path_prefix,
                            tenant=tenant, headers=extra, bearer_token_file=bearer_token_file,
                            basic_auth_file=basic_auth_file, ca_file=ca_file, insecure=insecure_skip_verify,
                            timeout=timeout)
    except PromError as exc:
        click.echo(f"gpumon validate: {exc}", err=True)
        sys.exit(EXIT_ERROR)
    with client:
        limit = label_limit or (30 if backend == "mimir" else None)
        report, code = run_validate(model, client, lookback=lookback_s, concurrency=concurrency, checks=chosen,
                                    label_limit=limit)
    text = reporters.render(report, fmt, color=fmt == "text" and sys.stdout.isatty())
    click.echo(text, nl=False)
    if out_file:
        try:
            writer.atomic_write(Path(out_file), (reporters.render(report, fmt) if fmt == "text" else text).encode())
        except OSError as exc:
            click.echo(f"gpumon validate: cannot write {out_file}: {exc.strerror or exc}", err=True)
            sys.exit(EXIT_ERROR)
    sys.exit(code)


from .lint.command import lint_command  # noqa: E402 - registered after the group exists
from .diff.command import diff_command  # noqa: E402

cli.add_command(lint_command)
cli.add_command(diff_command)


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="gpumon")


if __name__ == "__main__":  # pragma: no cover
    main()
