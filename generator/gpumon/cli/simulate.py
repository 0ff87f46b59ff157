"""``gpumon simulate``: serve fake dcgm-exporter pages with injected faults."""

from __future__ import annotations

import sys

import click

from ..exitcodes import EXIT_ERROR


class _FaultKindsEpilog(click.Command):
    """Lists the fault kinds under ``--help`` only when help is shown: the simulator module
    imports the HTTP server and client, which plain ``gpumon --help`` should not load."""

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        from ..simfaults import describe_kinds, describe_sources

        self.epilog = ("\b\nFault kinds (key=value pairs: kind, metric, node, gpu, every, seconds, value, "
                       "instances, source):\n" + describe_kinds()
                       + "\n\b\nSource kinds (--source KIND or KIND=gpu-node-2,...):\n" + describe_sources())
        super().format_epilog(ctx, formatter)


@click.command(cls=_FaultKindsEpilog)
@click.option("--nodes", default=2, show_default=True, type=click.IntRange(1), help="Nodes (one target each).")
@click.option("--gpus", default=4, show_default=True, type=click.IntRange(1), help="GPUs per node.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", default=9400, show_default=True, type=click.IntRange(0, 65535),
              help="Port of the first node; node i uses PORT+i (0: free ports).")
@click.option("--fault", "fault_args", multiple=True, metavar="K=V,...",
              help="A fault, e.g. kind=drop,metric=DCGM_FI_DEV_GPU_UTIL,node=gpu-node-2 (repeatable).")
@click.option("--faults-file", type=click.Path(dir_okay=False),
              help="YAML/JSON file of faults, re-read on every scrape (edit it while running).")
@click.option("--source", "source_args", multiple=True, metavar="KIND[=NODE,...]",
              help="Serve another source on every node or the nodes named, one target each: dcgm-exporter-1.x "
                   "(instead of 4.x), nvidia_gpu_exporter, nvidia-smi-textfile (repeatable).")
@click.option("--dump", is_flag=True, help="Print the first node's page once and exit.")
@click.option("--dump-source", metavar="KIND", help="With --dump: the page of this source (on the first node serving it).")
def simulate(nodes: int, gpus: int, host: str, port: int, fault_args: tuple[str, ...], faults_file: str | None,
             source_args: tuple[str, ...], dump: bool, dump_source: str | None) -> None:
    """Serve dcgm-exporter 4.x exposition for NODES x GPUS simulated GPUs, with injected faults.

    Test alerting and `gpumon validate` without GPUs. Runs until Ctrl-C.
    """
    from ..simfaults import Fault, FaultError, SourceError, load_faults, parse_sources
    from ..simserve import serve_forever
    from ..simulate import Fleet

    try:
        faults = [Fault.parse(a) for a in fault_args]
        if faults_file:
            load_faults(faults_file)  # fail fast on a broken file; it is re-read on every scrape
        fleet = Fleet(nodes, gpus, faults, faults_file, sources=parse_sources(source_args, nodes))
    except (FaultError, SourceError) as exc:
        raise click.UsageError(str(exc)) from None
    if dump:
        node = fleet.nodes[0]
        if dump_source:
            node = next((n for n in fleet.nodes if dump_source in n.sources), None)
            if node is None:
                raise click.UsageError(f"--dump-source {dump_source!r}: no node serves it (add --source {dump_source})")
        status, body = fleet.page(node.name, dump_source)
        click.echo(body if status == 200 else f"HTTP {status}: {body}", nl=False)
        return
    try:
        serve_forever(fleet, host=host, base_port=port)
    except OSError as exc:
        ports = f"{port}..{port + nodes - 1}" if nodes > 1 and port else str(port)
        click.echo(f"gpumon simulate: cannot listen on {host}:{ports}: {exc.strerror or exc}", err=True)
        sys.exit(EXIT_ERROR)
