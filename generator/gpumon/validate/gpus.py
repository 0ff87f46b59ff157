"""A GPU as its series identify it (:class:`Gpu`, its ``key``), the physical device behind it
(:func:`device`), and where its series come from (:class:`Site`, shared by the GPUs of a node)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Gpu:
    """One GPU (or MIG instance) as its series identify it.

    ``node`` is the value of the spec's node label, or of its other spelling (``hostname`` /
    ``Hostname``) when the series carry that one; ``node_label`` says which was found.
    ``cluster`` is the value of the spec's cluster label (empty when the spec names none): under
    a global view (Thanos Query, Mimir) one node name may exist in two clusters, so a node is
    always (cluster, node) and reads ``cluster/node``.
    """

    job: str
    node: str
    uuid: str
    index: str
    mig: str = ""
    cluster: str = ""
    node_label: str = ""
    uuid_label: str = ""

    @property
    def key(self) -> tuple[str, str, str, str, str, str]:
        """(job, node, UUID, index, MIG instance, cluster): positions 0-4 are what they always were."""
        return (self.job, self.node, self.uuid, self.index, self.mig, self.cluster)

    @property
    def where(self) -> str:
        """The node as people read it: ``gpu-node-1``, or ``b/gpu-node-1`` with a cluster label."""
        return f"{self.cluster}/{self.node or '?'}" if self.cluster else self.node

    def node_labels(self, lab) -> tuple[tuple[str, str], ...]:
        """``((cluster label, cluster), (node label, node))`` for a finding's labels (``lab``:
        the spec's exporter labels); without a cluster label only the node."""
        return (((lab.cluster, self.cluster),) if lab.cluster else ()) + ((lab.node, self.node),)

    def __str__(self) -> str:
        mig = f" MIG {self.mig}" if self.mig else ""
        return f"{self.where or '?'} gpu {self.index or '?'} ({self.uuid or 'no UUID'}{mig})"


@dataclass(frozen=True, slots=True)
class Site:
    """Where a GPU's series come from: the target (``instance``), the model and driver labels
    (``attrs``: (label, value) pairs), which spelling of the node and UUID labels they carry
    (:class:`Gpu`'s ``node_label`` / ``uuid_label``) and, for series that carry both spellings,
    the other one's values (``others``: node, UUID). The GPUs of one node share one Site (the
    inventory interns them), so what the inventory keeps per GPU is its key and one reference (a
    Gpu object, a target and a model/driver mapping per GPU, in three dicts, were 9 MiB of
    validate's peak RSS at 64,000 GPUs: bench/validate_memory.py)."""

    instance: str = ""
    attrs: tuple[tuple[str, str], ...] = ()
    node_label: str = ""
    uuid_label: str = ""
    others: tuple[str, ...] = ()

    def gpu(self, key: tuple) -> Gpu:
        """The :class:`Gpu` of ``key`` (:attr:`Gpu.key`) reporting from here."""
        return Gpu(*key, self.node_label, self.uuid_label)


def other_spelling(label: str) -> str:
    """The label name an exporter version may use instead (``Hostname`` <-> ``hostname``,
    ``UUID`` <-> ``uuid``; NVIDIA/dcgm-exporter#655 and the 1.x ``use-old-namespace`` option)."""
    return label.lower() if label != label.lower() else label.capitalize() if label == "hostname" else label.upper()


#: the Site of a GPU the inventory has not seen: no target, no model or driver, no label spelling known
NOWHERE = Site()


def device(gpu) -> tuple[str, str]:
    """The physical GPU a :class:`Gpu` (or its ``key``) is: ``(cluster, UUID)``. MIG instances of
    one GPU share its UUID (dcgm-exporter labels them with ``GPU_I_ID``), and one GPU reported under
    two targets or two node names (a second scrape config, an exporter pod replaced) keeps its UUID:
    each is one device. Without a UUID label, ``(cluster, node/index)``."""
    key = gpu if isinstance(gpu, tuple) else gpu.key
    return (key[5], device_in_cluster(key))


def device_in_cluster(key: tuple) -> str:
    """The physical GPU of a GPU key within its cluster (:func:`device` without the cluster): its
    UUID, or ``node/index`` without one."""
    return key[2] or f"{key[1]}/{key[3]}"


def device_id(key: tuple):
    """:func:`device` of a GPU key, as the key's own UUID string when it has one and no cluster
    (equal for equal devices, never equal to a tuple): counting or matching a fleet's devices then
    makes no new object per GPU (64,000 tuples and their Gpu objects were about 10 MB)."""
    return key[2] if key[2] and not key[5] else device(key)
