"""Names of gpumon's recording rules (``level:metric:operations``) and of the label that names a
DCGM field on them. Dashboards, tests and the validator import these; do not spell them elsewhere.

Levels: ``job_gpu`` = job plus the GPU identity labels (node, UUID, gpu index, MIG instance,
cluster when set); ``job_node`` = job plus node (and cluster); ``job`` = the whole job.
"""

#: label carrying the DCGM field name on per-field recording rules and alerts
FIELD_LABEL = "dcgm_field"

#: 1 per GPU in the inventory and required/optional field it does not report now (sparse: a
#: healthy fleet records none; issue 16 replaced a dense "present" series per GPU and field)
FIELD_MISSING = "job_gpu:dcgm_field_missing:group"
#: per optional field, 1 per node whose inventory GPUs none reports it (label ``dcgm_field``; sparse
#: on a fleet that serves the field): its GPUs are counted missing from this, not one by one, so a
#: field a whole fleet never serves (a profiling field DCGM lacks there) does not fill the missing set
NODE_FIELD_ABSENT = "job_node:dcgm_field_absent:group"
#: 1 per exporter target and the node its GPU series name (how exporter alerts learn their node)
TARGET_NODE = "job_instance:gpumon_target_node:group"
#: 1 per exporter target and field whose series lack the node or GPU label (sparse: none when labelled)
UNLABELLED = "job_instance:gpumon_unlabelled_series:group"
#: 1 per GPU reporting at least one required field now: the GPU inventory. Plus one series without
#: ``job`` (only ``rule_group``) written at every evaluation the rule succeeds (rules/fresh.py ``mark``)
INVENTORY = "job_gpu:gpumon_inventory:group"
#: 1 per GPU (device) that ever reported and is not retired (alerts.retired): the inventory, or this
#: series' own last value; a lost GPU stays here until it reports again or is declared gone
KNOWN = "job_gpu:gpumon_known:group"
#: 1 per GPU (device) reporting only under dcgm-exporter 1.x names now (``dcgm_gpu_temp``, label
#: ``uuid`` read as the GPU label): known and not lost, though the presence tiers cannot see it
LEGACY_INVENTORY = "job_gpu:gpumon_legacy_inventory:group"
#: 1 per exporter target and the node it served, held while the target has an ``up`` series: a
#: known node none of whose targets is left was removed from service discovery
TARGETS_KNOWN = "job_instance:gpumon_target_node_known:group"
#: the time of a rule group's last evaluation (label :data:`GROUP_LABEL`), written by its last rule:
#: alerts read the group's sparse sets as of then (generator/gpumon/rules/fresh.py)
EVALUATED = "rule_group:gpumon_evaluation:timestamp"
#: label on :data:`EVALUATED` naming the rule group
GROUP_LABEL = "rule_group"
#: per GPU gone while its last XID was critical (a GPU off the bus), the XID code, until it reports again
XID_LOST = "job_gpu:gpumon_xid_lost:max"
#: inventory series (GPUs and MIG instances) per node; ``..._non_mig`` only those not in MIG mode
#: (the denominators of coverage, for fields DCGM reports per MIG instance or not)
NODE_INVENTORY = "job_node:gpumon_inventory:count"
NODE_INVENTORY_NON_MIG = "job_node:gpumon_inventory_non_mig:count"
#: per GPU and field, the reading when it cannot be real (label ``reason``), else no series
IMPLAUSIBLE = "job_gpu:dcgm_field_implausible:max"
#: per exporter series, its reading when it cannot be real (no ``reason``; sparse): the one pass
#: over the raw metric that :data:`IMPLAUSIBLE` splits by reason (issue 16)
IMPLAUSIBLE_READING = "job_gpu:dcgm_field_implausible:unless"
#: per node, 1 when some GPU of it reads the field plausibly, only in jobs (and clusters) where
#: some GPU reads it implausibly (sparse): the implausible tiers' "valid elsewhere" guard
NODE_PLAUSIBLE = "job_node_dcgm_field:gpumon_plausible:group"
#: physical GPUs reporting now (distinct UUIDs: the MIG instances of one GPU count once), per job / per node
GPU_DEVICES_REPORTING = "job:gpumon_gpu_devices_reporting:count"
NODE_GPU_DEVICES_REPORTING = "job_node:gpumon_gpu_devices_reporting:count"
#: physical GPUs seen within the inventory lookback, per job
GPU_DEVICES_KNOWN = "job:gpumon_gpu_devices_known:count"
#: MIG instances reporting now (series with a MIG instance label), per job / per node
MIG_INSTANCES_REPORTING = "job:gpumon_mig_instances_reporting:count"
NODE_MIG_INSTANCES_REPORTING = "job_node:gpumon_mig_instances_reporting:count"
#: share of inventory GPUs reporting each field, per job (every field) and per node (only where
#: below 1: a healthy node records none) (0..1)
COVERAGE = "job_dcgm_field:gpumon_coverage:ratio"
NODE_COVERAGE = "job_node_dcgm_field:gpumon_coverage:ratio"


def sample_ratio(window: str) -> str:
    """Share of a target's successful scrapes in ``window`` that carried a field, per GPU."""
    return f"job_gpu:dcgm_field_samples:ratio{window}"


def node_sum(field: str) -> str:
    """Per-node sum of a device-wide field, MIG instances de-duplicated by UUID."""
    return f"job_node:{field}:sum"


def energy_watts(level: str, window: str) -> str:
    """Power in watts derived from the energy counter (mJ) with rate() over ``window``."""
    return f"{level}:dcgm_energy_watts:rate{window}"

# --- the kubernetes section (generator/gpumon/rules/kubernetes.py); job and node label are the exporter's

#: GPUs each node should report (kube_node_status_capacity / units_per_gpu, or the static expectation)
NODE_GPUS_EXPECTED = "job_node:gpumon_gpus_expected:count"
#: GPUs the fleet should report, per job
GPUS_EXPECTED = "job:gpumon_gpus_expected:count"
#: expected minus reporting physical GPUs, at least 0, per node (every expected node) / per job
NODE_GPUS_MISSING = "job_node:gpumon_gpus_missing:count"
GPUS_MISSING = "job:gpumon_gpus_missing:count"
#: best ``up`` of the exporter targets scheduled on each node (kube_pod_info join); absent = no target
NODE_EXPORTER_UP = "job_node:gpumon_exporter_up:max"
#: running exporter pods on each node (kube_pod_info + kube_pod_status_phase)
NODE_EXPORTER_PODS = "job_node:gpumon_exporter_pods:count"

# --- sources (issue 13; generator/gpumon/rules/sources.py): only for metrics that list ``sources``

#: per GPU and field, the primary series' reading where it exists, else the first fallback
#: source's (converted to the metric's unit); label :data:`SOURCE_LABEL` says which
NORMALIZED = "job_gpu:dcgm_field_value:normalized"
#: label on :data:`NORMALIZED` (and GpuMetricFallbackServing) naming the source of the reading
SOURCE_LABEL = "source"


#: recording rules that hold series only while something is wrong (a healthy fleet records none,
#: issue 16): a panel or query that reads only these and is empty shows a healthy fleet
SPARSE_RECORDS = frozenset({FIELD_MISSING, UNLABELLED, IMPLAUSIBLE, IMPLAUSIBLE_READING, NODE_PLAUSIBLE,
                            NODE_COVERAGE, NODE_FIELD_ABSENT, LEGACY_INVENTORY})


def is_sparse_record(name: str) -> bool:
    """True for a recording rule of :data:`SPARSE_RECORDS` or a gap ratio (:func:`sample_ratio`,
    recorded only below 1, whatever its window)."""
    return name in SPARSE_RECORDS or name.startswith(sample_ratio(""))
