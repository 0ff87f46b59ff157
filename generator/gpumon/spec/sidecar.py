"""The spec's optional ``textfile_sidecar`` section: the modelled settings of the nvidia-smi
textfile sidecar (:class:`TextfileSidecar`, every default in one place), mapped once by the spec
loader (:func:`from_plain`), and what the schema cannot check (:func:`problems`).

The manifest it renders is :mod:`gpumon.sidecar`'s. This module does not import the spec module
(the spec imports it).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Callable

from ..durations import format_duration, parse_duration


@dataclass(frozen=True)
class Toleration:
    """One pod toleration (Kubernetes core/v1 Toleration); ``value`` only with operator Equal."""

    key: str | None = None
    operator: str = "Exists"
    value: str | None = None
    effect: str | None = None


@dataclass(frozen=True)
class TextfileSidecar:
    """The modelled ``textfile_sidecar`` section; every default lives here (one place).

    ``interval``/``timeout`` are seconds (whole, ``timeout`` < ``interval``): the script runs
    nvidia-smi every ``interval`` under ``timeout``. ``textfile_directory`` is the host folder
    node_exporter's textfile collector reads. ``node_selector``/``tolerations`` pick the GPU nodes;
    ``runtime_class_name`` (None: the node's default runtime) selects the NVIDIA runtime where it
    is not the default (GPU Operator: RuntimeClass ``nvidia``).
    """

    name: str = "gpumon-nvidia-smi-textfile"
    namespace: str = "monitoring"
    image: str = "ubuntu:24.04"
    interval: float = 15.0
    timeout: float = 10.0
    textfile_directory: str = "/var/lib/node_exporter/textfile_collector"
    node_selector: tuple[tuple[str, str], ...] = (("nvidia.com/gpu.present", "true"),)
    tolerations: tuple[Toleration, ...] = (Toleration(key="nvidia.com/gpu", operator="Exists", effect="NoSchedule"),)
    runtime_class_name: str | None = None


def from_plain(raw: dict | None) -> TextfileSidecar | None:
    """Model a ``textfile_sidecar`` section (plain dict, already checked by the schema and
    :func:`problems`); None when the section is absent. Keys absent take the dataclass defaults."""
    if raw is None:
        return None
    d = TextfileSidecar()
    tolerations = d.tolerations
    if "tolerations" in raw:
        tolerations = tuple(Toleration(key=t.get("key"), operator=t.get("operator", "Exists"), value=t.get("value"),
                                       effect=t.get("effect")) for t in raw["tolerations"])
    return TextfileSidecar(
        name=raw.get("name", d.name),
        namespace=raw.get("namespace", d.namespace),
        image=raw.get("image", d.image),
        interval=parse_duration(raw["interval"]) if "interval" in raw else d.interval,
        timeout=parse_duration(raw["timeout"]) if "timeout" in raw else d.timeout,
        textfile_directory=raw.get("textfile_directory", d.textfile_directory),
        node_selector=tuple(sorted(raw["node_selector"].items())) if "node_selector" in raw else d.node_selector,
        tolerations=tolerations,
        runtime_class_name=raw.get("runtime_class_name", d.runtime_class_name),
    )


def problems(plain: dict, add: Callable[[list, str], None]) -> None:
    """Report what the schema cannot check in ``plain["textfile_sidecar"]`` via ``add(path, message)``:
    interval and timeout are whole seconds (``sleep`` and ``timeout`` take seconds), at least 1 s,
    and the timeout is below the interval (a run must end before the next one is due); the
    textfile folder is not the host's root or a system folder (:data:`SYSTEM_FOLDERS`); a
    toleration's ``value`` needs operator ``Equal``."""
    raw = plain.get("textfile_sidecar")
    if not isinstance(raw, dict):
        return
    base = ["textfile_sidecar"]
    d = TextfileSidecar()
    seconds: dict[str, float | None] = {}
    for key, default in (("interval", d.interval), ("timeout", d.timeout)):
        value = raw.get(key)
        if value is None:
            seconds[key] = default
            continue
        try:
            s = parse_duration(value) if isinstance(value, str) else None
        except ValueError:
            s = None
        seconds[key] = s
        if s is not None and (s < 1 or s != int(s)):
            add(base + [key], f"{key} {value!r} must be whole seconds, at least 1s (the script passes it to "
                "sleep and timeout)")
            seconds[key] = None
    interval, timeout = seconds["interval"], seconds["timeout"]
    if interval is not None and timeout is not None and timeout >= interval:
        add(base + ["timeout" if "timeout" in raw else "interval"],
            f"timeout ({format_duration(timeout)}) must be below interval ({format_duration(interval)}): a hung "
            "nvidia-smi must be given up before the next run is due")
    folder = raw.get("textfile_directory")
    if isinstance(folder, str):
        why = _system_folder(folder)
        if why:
            add(base + ["textfile_directory"], f"{folder!r} {why}: the DaemonSet mounts textfile_directory read-write "
                "into a container running as root; give node_exporter's own textfile folder (default "
                f"{d.textfile_directory})")
    tolerations = raw.get("tolerations")
    for i, t in enumerate(tolerations if isinstance(tolerations, list) else []):
        if isinstance(t, dict) and "value" in t and t.get("operator", "Exists") != "Equal":
            add(base + ["tolerations", i, "value"], "a toleration with a value needs operator: Equal "
                "(Exists matches any value; Kubernetes rejects a value with Exists)")
        if isinstance(t, dict) and not t.get("key") and t.get("operator", "Exists") == "Equal":
            add(base + ["tolerations", i], "operator Equal needs a key")


#: host folders the sidecar must never mount read-write (as root): the root and the system trees
SYSTEM_FOLDERS = frozenset(("/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/opt",
                            "/proc", "/root", "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr", "/var",
                            "/var/lib", "/var/run", "/usr/local"))
#: pseudo file systems: nothing below them is a textfile folder
_PSEUDO = ("/proc/", "/sys/", "/dev/")


def _system_folder(folder: str) -> str | None:
    """Why ``folder`` is not a folder to mount read-write into the sidecar, or None."""
    if ".." in folder.split("/"):
        return "holds '..'"
    norm = posixpath.normpath(folder)
    norm = "/" if norm == "//" else norm
    if norm in SYSTEM_FOLDERS:
        return "is a system folder"
    if (norm + "/").startswith(_PSEUDO):
        return "is inside a kernel pseudo file system"
    return None
