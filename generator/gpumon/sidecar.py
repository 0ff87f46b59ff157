"""The nvidia-smi textfile sidecar: the field guide's workaround, ready to deploy.

Where DCGM's detailed query returns nothing for a GPU (dcgm-exporter shows "N/A") plain
``nvidia-smi`` still prints the reading. The spec's optional ``textfile_sidecar`` section makes
``gpumon render`` write ``kubernetes/<name>-nvidia-smi-textfile.yaml``: a ConfigMap carrying
``templates/sidecar/gpumon-nvidia-smi-textfile.sh`` (POSIX ``sh``) and a DaemonSet that runs it
on every GPU node, writing node_exporter textfile-collector metrics into a host folder that
node_exporter's ``--collector.textfile.directory`` reads. The series it writes
(``gpumon_nvidia_smi_*{UUID,gpu,Hostname}``) are read back through the ``nvidia-smi-textfile``
source preset (:mod:`gpumon.spec.presets`). A spec without the section renders no such file.

Facts behind the defaults: the GPU Operator labels GPU nodes ``nvidia.com/gpu.present=true``
(GPU Feature Discovery) and taints them ``nvidia.com/gpu:NoSchedule`` on many clusters (the
operator's dcgm-exporter DaemonSet tolerates exactly that); the NVIDIA container toolkit mounts
``nvidia-smi`` and the driver libraries into a container that sets ``NVIDIA_VISIBLE_DEVICES=all``
and ``NVIDIA_DRIVER_CAPABILITIES=utility`` (its docs: "utility: required for using nvidia-smi and
NVML"); ``NODE_NAME`` from the downward API (``spec.nodeName``) is how dcgm-exporter's DaemonSets
set their node label, so ``Hostname`` values agree. The section's model (defaults, checks) is
:mod:`gpumon.spec.sidecar`; this module renders it.
"""

from __future__ import annotations

import hashlib

from .spec.sidecar import TextfileSidecar, Toleration
from .spec import Spec
from .texts import templates_dir
from .yamlout import dump_all

#: the script, relative to ``templates/``
SCRIPT = "sidecar/gpumon-nvidia-smi-textfile.sh"
#: the rendered manifest, relative to the output folder
PATH = "kubernetes/{name}-nvidia-smi-textfile.yaml"
#: the ConfigMap key and the folder it is mounted at
SCRIPT_KEY = "gpumon-nvidia-smi-textfile.sh"
SCRIPT_MOUNT = "/gpumon"
#: where the host's textfile folder is mounted inside the container
TEXTFILE_MOUNT = "/textfile"


def stale_after(spec: Spec) -> float:
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


def manifest(spec: Spec) -> str:
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


def files(spec: Spec, groups: list | None = None) -> dict[str, str]:
    """``{kubernetes/<name>-nvidia-smi-textfile.yaml: manifest}`` when the spec has a
    ``textfile_sidecar`` section, else nothing (other specs' output stays byte-identical)."""
    if spec.textfile_sidecar is None:
        return {}
    return {PATH.format(name=spec.name): manifest(spec)}
