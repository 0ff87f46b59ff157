"""The gpu-inventory message stays short on a big fleet: nodes of the same GPUs, model and driver
are one line, and a node that differs keeps a line of its own (no server: the matrix is built here)."""

from gpumon.validate.inventory import LIST_NODES, _lines

H100, A100 = "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"


def _fleet(nodes: int, odd: dict | None = None) -> dict:
    table = {f"gpu-node-{n:04d}": (((H100, "550.54.15"), 8),) for n in range(nodes)}
    table.update(odd or {})
    return table


def test_a_small_fleet_lists_every_node():
    lines = _lines(_fleet(LIST_NODES))
    assert len(lines) == LIST_NODES and lines[0] == f"gpu-node-0000: 8 x {H100}, driver 550.54.15"


def test_a_big_fleet_groups_nodes_and_keeps_the_odd_ones():
    odd = {"gpu-node-0007": (((H100, "535.54.03"), 8),),
           "gpu-node-0042": (((A100, "550.54.15"), 1), ((H100, "550.54.15"), 1))}
    lines = _lines(_fleet(2000, odd))
    assert lines == [
        f"1998 nodes (gpu-node-0000, gpu-node-0001, gpu-node-0002, ...): 8 x {H100}, driver 550.54.15",
        f"gpu-node-0007: 8 x {H100}, driver 535.54.03",
        f"gpu-node-0042: 1 x {A100}, driver 550.54.15 + 1 x {H100}, driver 550.54.15",
    ]


def test_a_group_as_small_as_its_examples_names_them_all():
    table = _fleet(LIST_NODES + 1, {f"gpu-node-{n:04d}": (((A100, ""), 1),) for n in range(2)})
    lines = _lines(table)
    assert lines[-1] == f"2 nodes (gpu-node-0000, gpu-node-0001): 1 x {A100}, driver unknown", lines
