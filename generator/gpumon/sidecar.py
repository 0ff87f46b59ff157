"""The nvidia-smi textfile sidecar: the field guide's workaround, ready to deploy.

Where DCGM's detailed query returns nothing for a GPU (dcgm-exporter shows "N/A") plain
``nvidia-smi`` still prints the reading. The spec's optional ``textfile_sidecar`` section makes
``gpumon render`` write ``kubernetes/<name>-nvidia-smi-textfile.yaml``: a ConfigMap carrying
``templates/sidecar/gpumon-nvidia-smi-textfile.sh`` (POSIX ``sh``) and a DaemonSet that runs it
on every GPU node, writing node_exporter textfile-collector metrics into a host folder that
node_exporter's ``--collector.textfile.directory`` reads. The series it writes
(``gpumon_nvidia_smi_*{UUID,gpu,Hostname}``) are read back through the ``nvidia-smi-textfile``
source preset (:mod:`gpumon.sourcepresets`). A spec without the section renders no such file.

Facts behind the defaults: the GPU Operator labels GPU nodes ``nvidia.com/gpu.present=true``
(GPU Feature Discovery) and taints them ``nvidia.com/gpu:NoSchedule`` on many clusters (the
operator's dcgm-exporter DaemonSet tolerates exactly that); the NVIDIA container toolkit mounts
``nvidia-smi`` and the driver libraries into a container that sets ``NVIDIA_VISIBLE_DEVICES=all``
and ``NVIDIA_DRIVER_CAPABILITIES=utility`` (its docs: "utility: required for using nvidia-smi and
NVML"); ``NODE_NAME`` from the downward API (``spec.nodeName``) is how dcgm-exporter's DaemonSets
set their node label, so ``Hostname`` values agree. This module does not import the spec module
(the spec imports it).
"""

from __future__ import annotations

import hashlib
import posixpath
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from .durations import format_duration, parse_duration
from .texts import templates_dir
from .yamlout import dump_all

if TYPE_CHECKING:  # the spec module imports this one
    from .spec import Spec

#: the script, relative to ``templates/``
SCRIPT = "sidecar/gpumon-nvidia-smi-textfile.sh"
#: the rendered manifest, relative to the output folder
PATH = "kubernetes/{name}-nvidia-smi-textfile.yaml"
#: the ConfigMap key and the folder it is mounted at
SCRIPT_KEY = "gpumon-nvidia-smi-textfile.sh"
SCRIPT_MOUNT = "/gpumon"
#: where the host's textfile folder is mounted inside the container
TEXTFILE_MOUNT = "/textfile"


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


def stale_after(spec: "Spec") -> float:
    """Seconds after the sidecar's last run (``gpumon_nvidia_smi_last_run_timestamp_seconds``) at
    which its readings stop serving: node_exporter keeps serving the last file of a sidecar that
    died (a crash-looping pod, a deleted DaemonSet), so without this check a fallback would serve
    a frozen reading forever. Four intervals plus the timeout, at least 2 minutes (clock skew
    between node and Prometheus); the spec's ``textfile_sidecar`` intervals, else the defaults."""
    sc = spec.textfile_sidecar or TextfileSidecar()
    return max(120.0, 4 * sc.interval + sc.timeout)


def script_text() -> str:
    """The sidecar's POSIX sh script (``templates/sidecar/gpumon-nvidia-smi-textfile.sh``)."""
    return (templates_dir() / SCRIPT).read_text("utf-8")


def _labels(sc: TextfileSidecar) -> dict:
    return {"app.kubernetes.io/name": sc.name, "app.kubernetes.io/component": "nvidia-smi-textfile",
            "app.kubernetes.io/managed-by": "gpumon"}


def _toleration(t: Toleration) -> dict:
    out: dict = {}
    if t.key:
        out["key"] = t.key
    out["operator"] = t.operator
    if t.value is not None:
        out["value"] = t.value
    if t.effect:
        out["effect"] = t.effect
    return out


def manifest(spec: "Spec") -> str:
    """The ConfigMap + DaemonSet YAML (two documents) for ``spec.textfile_sidecar``.

    The pod template carries the script's SHA-256 as an annotation, so a changed script rolls the
    DaemonSet (Kubernetes does not restart pods when a mounted ConfigMap changes). Byte-identical
    for the same spec.
    """
    sc = spec.textfile_sidecar
    assert sc is not None
    script = script_text()
    labels = _labels(sc)
    configmap = {"apiVersion": "v1", "kind": "ConfigMap",
                 "metadata": {"name": sc.name, "namespace": sc.namespace, "labels": labels},
                 "data": {SCRIPT_KEY: script}}
    env = [
        {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {"name": "GPUMON_TEXTFILE_DIR", "value": TEXTFILE_MOUNT},
        {"name": "GPUMON_INTERVAL", "value": str(int(sc.interval))},
        {"name": "GPUMON_TIMEOUT", "value": str(int(sc.timeout))},
        # the NVIDIA container toolkit mounts nvidia-smi and NVML for these (no GPU is allocated)
        {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
        {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "utility"},
    ]
    pod: dict = {}
    if sc.node_selector:
        pod["nodeSelector"] = dict(sc.node_selector)
    if sc.tolerations:
        pod["tolerations"] = [_toleration(t) for t in sc.tolerations]
    if sc.runtime_class_name:
        pod["runtimeClassName"] = sc.runtime_class_name
    pod["automountServiceAccountToken"] = False
    pod["terminationGracePeriodSeconds"] = 5
    pod["containers"] = [{
        "name": "nvidia-smi-textfile",
        "image": sc.image,
        "command": ["sh", f"{SCRIPT_MOUNT}/{SCRIPT_KEY}"],
        "env": env,
        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "64Mi"}},
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True},
        "volumeMounts": [{"name": "script", "mountPath": SCRIPT_MOUNT, "readOnly": True},
                         {"name": "textfile", "mountPath": TEXTFILE_MOUNT}],
    }]
    pod["volumes"] = [{"name": "script", "configMap": {"name": sc.name, "defaultMode": 0o555}},
                      {"name": "textfile", "hostPath": {"path": sc.textfile_directory, "type": "DirectoryOrCreate"}}]
    daemonset = {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": sc.name, "namespace": sc.namespace, "labels": labels},
        "spec": {
            "selector": {"matchLabels": {"app.kubernetes.io/name": sc.name}},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {
                "metadata": {"labels": labels, "annotations": {
                    "gpumon/script-sha256": hashlib.sha256(script.encode("utf-8")).hexdigest()}},
                "spec": pod,
            },
        },
    }
    header = (f"Generated by `gpumon render` from {spec.path.rsplit('/', 1)[-1]} (textfile_sidecar). Do not edit:\n"
              "change the spec and run `make render`. node_exporter must read the same host folder:\n"
              f"--collector.textfile.directory on a mount of {sc.textfile_directory}.")
    return dump_all([configmap, daemonset], header=header)


def files(spec: "Spec", groups: list | None = None) -> dict[str, str]:
    """``{kubernetes/<name>-nvidia-smi-textfile.yaml: manifest}`` when the spec has a
    ``textfile_sidecar`` section, else nothing (other specs' output stays byte-identical)."""
    if spec.textfile_sidecar is None:
        return {}
    return {PATH.format(name=spec.name): manifest(spec)}
