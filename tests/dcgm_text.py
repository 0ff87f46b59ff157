"""A minimal dcgm-exporter 4.x exposition writer for the core end-to-end test.

Label set and order follow dcgm-exporter ``internal/pkg/rendermetrics`` @ 4.5.3-4.8.2 (see
tests/data/synthetic-k8s-2xH100.v4.5.3-4.8.2.prom): gpu, UUID,
pci_bus_id, device, modelName, Hostname, DCGM_FI_DRIVER_VERSION. The full simulator with fault
injection is ``gpumon simulate``; this stays small so the core test depends on nothing else.
"""

from __future__ import annotations

import time

from gpumon.fields import default_counters

VALUES = {  # plausible idle-ish readings of an H100
    "DCGM_FI_DEV_GPU_TEMP": 41, "DCGM_FI_DEV_POWER_USAGE": 71.301, "DCGM_FI_DEV_GPU_UTIL": 12,
    "DCGM_FI_DEV_MEM_COPY_UTIL": 3, "DCGM_FI_DEV_FB_USED": 1024, "DCGM_FI_DEV_FB_FREE": 80000,
    "DCGM_FI_DEV_SM_CLOCK": 1980, "DCGM_FI_DEV_MEMORY_TEMP": 38, "DCGM_FI_DEV_XID_ERRORS": 0,
}
ENERGY = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"


def uuid(node: int, gpu: int) -> str:
    return f"GPU-0a0a0a0a-0000-4000-8000-{node:06d}{gpu:06d}"


def exposition(node: str, node_index: int, gpus: int, drop: set[tuple[str, int]] = frozenset()) -> str:
    """dcgm-exporter text for one node; ``drop`` holds (metric, gpu index) pairs left out."""
    csv = default_counters()
    out = []
    for metric in list(VALUES) + [ENERGY]:
        out.append(f"# HELP {metric} {csv[metric].help}")
        out.append(f"# TYPE {metric} {csv[metric].kind}")
        for g in range(gpus):
            if (metric, g) in drop:
                continue
            labels = (f'gpu="{g}",UUID="{uuid(node_index, g)}",pci_bus_id="00000000:{0x1B + g:02X}:00.0",'
                      f'device="nvidia{g}",modelName="NVIDIA H100 80GB HBM3",Hostname="{node}",'
                      f'DCGM_FI_DRIVER_VERSION="570.148.08"')
            if metric == "DCGM_FI_DEV_XID_ERRORS":
                labels += ',err_code="0",err_msg="No Error"'
            value = int(time.time() * 71301) if metric == ENERGY else VALUES[metric]
            text = f"{value:.6f}" if isinstance(value, float) else str(value)
            out.append(f"{metric}{{{labels}}} {text}")
    return "\n".join(out) + "\n"
