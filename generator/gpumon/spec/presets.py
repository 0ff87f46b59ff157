"""Alternative sources of one quantity: the presets a spec names in one line, and unit conversion.

A spec'd metric (a DCGM field as dcgm-exporter 4.x writes it) may list, in priority order, other
series that carry the same reading where the primary cannot (:class:`gpumon.spec.Source`).
Facts behind the presets:

* ``dcgm-exporter-1.x``: dcgm-exporter's 1.x compatibility mode (``use-old-namespace``,
  ``etc/1.x-compatibility-metrics.csv``) writes ``dcgm_gpu_temp`` etc. with the GPU in label
  ``uuid`` instead of ``UUID``; the node label is the exporter's. A metric's own ``legacy_names``
  (first entry) overrides the table below.
* ``nvidia_gpu_exporter``: utkuozdemir/nvidia_gpu_exporter (nvidia-smi based, run where DCGM
  cannot be; its docs/METRICS.md): ``nvidia_smi_temperature_gpu{uuid="…"}`` (the UUID without
  NVML's ``GPU-`` prefix, so the preset adds it; a value that has it is kept as is),
  ``nvidia_smi_utilization_gpu_ratio``
  (0-1, not percent), ``nvidia_smi_power_draw_watts``, ``nvidia_smi_memory_used_bytes`` (bytes,
  not MiB), clocks in Hz; no node label, so the node is its target's ``instance`` without the port
  (gpumon issue 13).
* ``nvidia-smi-textfile``: gpumon's own nvidia-smi sidecar (``templates/sidecar/``, rendered with
  the spec's ``textfile_sidecar`` section, :mod:`gpumon.sidecar`) writes
  ``gpumon_nvidia_smi_temperature_gpu_celsius{UUID="GPU-…",gpu="0",Hostname="node"}`` and the like
  (units in base units: ratio, bytes, hertz) for node_exporter's textfile collector, so the series
  carry node_exporter's job (default ``node-exporter``; a source entry's ``job:`` overrides) and
  dcgm-exporter's own label names.
* ``openshift-ai-renames``: OpenShift AI's accelerator-metrics scrape job renames eight DCGM fields
  to ``nvidia_gpu_*`` families (opendatahub-operator#2236; the eight rules as in
  opendatahub-io/odh-observability's ``internal/controller/resources/opentelemetry-collector.tmpl.yaml``,
  ported there in its PR #36) and relabels the job ``rhoai-accelerator-metrics``, keeping
  dcgm-exporter's labels (``UUID``, ``gpu``, ``Hostname``; it adds ``node``). The percent fields
  become ``*_ratio`` names marked for scaling to 0-1 ("Convert DCGM percentage metrics to ratios
  (0-1 scale)"), so the preset converts x100; the memory fields are renamed ``*_bytes`` but
  relabeling cannot scale a value, so they stay MiB; clocks stay MHz. odh-observability#51
  reverted to the DCGM names ("continue to be converted to ratios"), so fleets on either side of
  it mix both names. The template only tags the ratio series (``__tmp_scale_needed``), and a
  collector that did not scale them leaves percent under a ``_ratio`` name: a source entry's
  ``unit: percent`` says so (a x100 too many shows as implausible readings, never as silence).
* ``dcgm-renames``: fields DCGM renamed: ``DCGM_FI_DEV_CLOCK_THROTTLE_REASONS`` ->
  ``DCGM_FI_DEV_CLOCKS_EVENT_REASONS`` and the exporter's ``DCGM_FI_EXP_CLOCK_THROTTLE_REASONS_COUNT``
  -> ``DCGM_EXP_CLOCK_EVENTS_COUNT`` (NVIDIA/dcgm-exporter#261); either name serves the other.
"""

from __future__ import annotations

from dataclasses import dataclass

#: ``labels.node`` value meaning "the target's instance label, port removed"
NODE_FROM_INSTANCE = "instance"

#: the ``source`` label value of readings from the metric's own (primary) series
PRIMARY = "dcgm-exporter"

#: (source unit, metric unit) -> (operator, number): reading_in_metric_unit = reading <op> number
CONVERSIONS: dict[tuple[str, str], tuple[str, float]] = {
    ("ratio", "percent"): ("*", 100.0),
    ("percent", "ratio"): ("/", 100.0),
    ("bytes", "MiB"): ("/", 1048576.0),
    ("MiB", "bytes"): ("*", 1048576.0),
    ("milliwatts", "watts"): ("/", 1000.0),
    ("joules", "millijoules"): ("*", 1000.0),
    ("millijoules", "joules"): ("/", 1000.0),
    ("hertz", "MHz"): ("/", 1e6),
    ("kilohertz", "MHz"): ("/", 1000.0),
}


def conversion(source_unit: str, metric_unit: str) -> tuple[str, float] | None:
    """How a reading in ``source_unit`` becomes one in ``metric_unit``.

    Returns:
        ``("*", 1.0)`` for equal units, ``(op, number)`` from :data:`CONVERSIONS` (``op`` is ``*``
        or ``/``), or None when the units cannot convert (a spec error).
    """
    if source_unit == metric_unit:
        return ("*", 1.0)
    return CONVERSIONS.get((source_unit, metric_unit))


@dataclass(frozen=True)
class Preset:
    """One preset: where its series live and what they are called per spec'd metric.

    ``job`` None = the exporter's job; ``gpu``/``node``/``gpu_index`` None = the exporter's label
    of that role; ``series`` maps a metric name to (series name, unit; None = the metric's unit).
    """

    job: str | None
    gpu: str | None
    node: str | None
    gpu_index: str | None
    gpu_prefix: str
    series: dict[str, tuple[str, str | None]]


#: dcgm-exporter 1.x names of the fields that have one (its etc/1.x-compatibility-metrics.csv, with
#: the ``dcgm_`` namespace); the simulator serves the same names (generator/gpumon/simulate.py)
DCGM_1X_NAMES = {
    "DCGM_FI_DEV_GPU_TEMP": "dcgm_gpu_temp", "DCGM_FI_DEV_MEMORY_TEMP": "dcgm_memory_temp",
    "DCGM_FI_DEV_POWER_USAGE": "dcgm_power_usage",
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": "dcgm_total_energy_consumption",
    "DCGM_FI_DEV_GPU_UTIL": "dcgm_gpu_utilization", "DCGM_FI_DEV_MEM_COPY_UTIL": "dcgm_mem_copy_utilization",
    "DCGM_FI_DEV_ENC_UTIL": "dcgm_enc_utilization", "DCGM_FI_DEV_DEC_UTIL": "dcgm_dec_utilization",
    "DCGM_FI_DEV_FB_USED": "dcgm_fb_used", "DCGM_FI_DEV_FB_FREE": "dcgm_fb_free",
    "DCGM_FI_DEV_SM_CLOCK": "dcgm_sm_clock", "DCGM_FI_DEV_MEM_CLOCK": "dcgm_memory_clock",
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": "dcgm_pcie_replay_counter", "DCGM_FI_DEV_XID_ERRORS": "dcgm_xid_errors",
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": "dcgm_nvlink_bandwidth_total",
}

#: the sidecar's "when did the last query start" series (Unix seconds, per node): a reading is
#: only used while this is recent, since node_exporter keeps serving a dead sidecar's last file
TEXTFILE_LAST_RUN = "gpumon_nvidia_smi_last_run_timestamp_seconds"

#: node_exporter's usual job name (kube-prometheus-stack's node-exporter ServiceMonitor)
TEXTFILE_JOB = "node-exporter"

#: spec'd metric -> (series the sidecar script writes, its unit, the nvidia-smi --query-gpu field);
#: the script (templates/sidecar/gpumon-nvidia-smi-textfile.sh) writes exactly these names
TEXTFILE_SERIES: dict[str, tuple[str, str, str]] = {
    "DCGM_FI_DEV_GPU_TEMP": ("gpumon_nvidia_smi_temperature_gpu_celsius", "celsius", "temperature.gpu"),
    "DCGM_FI_DEV_MEMORY_TEMP": ("gpumon_nvidia_smi_temperature_memory_celsius", "celsius", "temperature.memory"),
    "DCGM_FI_DEV_POWER_USAGE": ("gpumon_nvidia_smi_power_draw_watts", "watts", "power.draw"),
    "DCGM_FI_DEV_GPU_UTIL": ("gpumon_nvidia_smi_utilization_gpu_ratio", "ratio", "utilization.gpu"),
    "DCGM_FI_DEV_MEM_COPY_UTIL": ("gpumon_nvidia_smi_utilization_memory_ratio", "ratio", "utilization.memory"),
    "DCGM_FI_DEV_FB_USED": ("gpumon_nvidia_smi_memory_used_bytes", "bytes", "memory.used"),
    "DCGM_FI_DEV_FB_FREE": ("gpumon_nvidia_smi_memory_free_bytes", "bytes", "memory.free"),
    "DCGM_FI_DEV_SM_CLOCK": ("gpumon_nvidia_smi_clocks_current_sm_hertz", "hertz", "clocks.current.sm"),
    "DCGM_FI_DEV_MEM_CLOCK": ("gpumon_nvidia_smi_clocks_current_memory_hertz", "hertz", "clocks.current.memory"),
}

PRESETS: dict[str, Preset] = {
    "dcgm-exporter-1.x": Preset(job=None, gpu="uuid", node=None, gpu_index=None, gpu_prefix="keep",
                                series={k: (v, None) for k, v in DCGM_1X_NAMES.items()}),
    "nvidia_gpu_exporter": Preset(
        job="nvidia-gpu-exporter", gpu="uuid", node=NODE_FROM_INSTANCE, gpu_index=None, gpu_prefix="add",
        series={
            "DCGM_FI_DEV_GPU_TEMP": ("nvidia_smi_temperature_gpu", "celsius"),
            "DCGM_FI_DEV_MEMORY_TEMP": ("nvidia_smi_temperature_memory", "celsius"),
            "DCGM_FI_DEV_GPU_UTIL": ("nvidia_smi_utilization_gpu_ratio", "ratio"),
            "DCGM_FI_DEV_MEM_COPY_UTIL": ("nvidia_smi_utilization_memory_ratio", "ratio"),
            "DCGM_FI_DEV_POWER_USAGE": ("nvidia_smi_power_draw_watts", "watts"),
            "DCGM_FI_DEV_FB_USED": ("nvidia_smi_memory_used_bytes", "bytes"),
            "DCGM_FI_DEV_FB_FREE": ("nvidia_smi_memory_free_bytes", "bytes"),
            "DCGM_FI_DEV_SM_CLOCK": ("nvidia_smi_clocks_current_sm_clock_hz", "hertz"),
            "DCGM_FI_DEV_MEM_CLOCK": ("nvidia_smi_clocks_current_memory_clock_hz", "hertz"),
        }),
    "nvidia-smi-textfile": Preset(
        job=TEXTFILE_JOB, gpu="UUID", node="Hostname", gpu_index="gpu", gpu_prefix="keep",
        series={metric: (series, unit) for metric, (series, unit, _field) in TEXTFILE_SERIES.items()}),
    "openshift-ai-renames": Preset(
        job="rhoai-accelerator-metrics", gpu="UUID", node="Hostname", gpu_index="gpu", gpu_prefix="keep", series={
            "DCGM_FI_DEV_GPU_TEMP": ("nvidia_gpu_temperature_celsius", "celsius"),
            "DCGM_FI_DEV_GPU_UTIL": ("nvidia_gpu_utilization_ratio", "ratio"),
            "DCGM_FI_DEV_MEM_COPY_UTIL": ("nvidia_gpu_memory_utilization_ratio", "ratio"),
            "DCGM_FI_DEV_FB_USED": ("nvidia_gpu_memory_used_bytes", "MiB"),     # renamed, not scaled
            "DCGM_FI_DEV_FB_FREE": ("nvidia_gpu_memory_free_bytes", "MiB"),     # renamed, not scaled
            "DCGM_FI_DEV_POWER_USAGE": ("nvidia_gpu_power_usage_watts", "watts"),
            "DCGM_FI_DEV_SM_CLOCK": ("nvidia_gpu_sm_clock_mhz", "MHz"),
            "DCGM_FI_DEV_MEM_CLOCK": ("nvidia_gpu_memory_clock_mhz", "MHz"),
        }),
    "dcgm-renames": Preset(job=None, gpu=None, node=None, gpu_index=None, gpu_prefix="keep", series={
        "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": ("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", None),
        "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", None),
        "DCGM_EXP_CLOCK_EVENTS_COUNT": ("DCGM_FI_EXP_CLOCK_THROTTLE_REASONS_COUNT", None),
        "DCGM_FI_EXP_CLOCK_THROTTLE_REASONS_COUNT": ("DCGM_EXP_CLOCK_EVENTS_COUNT", None),
    }),
}
