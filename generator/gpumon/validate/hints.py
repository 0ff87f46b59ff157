"""Hint texts for validate findings, from the field's troubleshooting path (dcgm-exporter README
"Troubleshooting", NVIDIA/dcgm-exporter issues #71, #143, #571, #607, #655; prometheus-operator
#3767 on ruleSelector labels). One place so every check words the same cause the same way."""

EXPORTER_DOWN = ("check the exporter pod (`kubectl logs` for NVML/DCGM init errors, OOM kills, restarts), "
                 "that /dev/nvidia* and libnvidia-ml.so are visible inside the container, and that "
                 "`nvidia-smi -q` works inside and outside it")
SCRAPE_TIMEOUT = ("the exporter answers slower than scrapeTimeout (big GPU/MIG nodes, dcgm-exporter#607): "
                  "raise scrapeTimeout in the ServiceMonitor/scrape config, trim the collectors CSV, or find what "
                  "slows the exporter (persistence mode off, NVML calls hanging)")
CONTENT_TYPE = ("the target serves a Content-Type Prometheus 3 does not accept: fix the exporter or set "
                "fallback_scrape_protocol (fallbackScrapeProtocol in a ServiceMonitor)")
TARGET_MISSING = ("no target of this job is scraped: the ServiceMonitor/PodMonitor or scrape config does not "
                  "select the exporter (labels, namespaceSelector, serviceMonitorSelector), or the DaemonSet has "
                  "no pods (nodeSelector/tolerations, GPU Operator state)")
TARGET_EMPTY = ("the exporter answers with no samples: it is (re)initialising DCGM/NVML or cannot read the GPUs; "
                "check its logs for NVML init errors, the device files and the driver/library version match")
METRIC_ABSENT = ("the exporter runs but does not export this DCGM field: check the collectors CSV (-f / the "
                 "metrics ConfigMap), the exporter version (fields were dropped or renamed between releases, "
                 "dcgm-exporter#71, #143), and for DCGM_FI_PROF_* that the profiling module loads (dcgm-exporter#571)")
NODE_MISSING = ("only these nodes lack it: compare their exporter version, collectors CSV and driver with a "
                "healthy node; `nvidia-smi -q` on the node shows whether the GPU supports the field")
GPU_MISSING = ("only some GPUs lack it: the GPU may be in a bad state (XID errors, fallen off the bus) or not "
               "support the field; check `nvidia-smi -q -i <index>` and the exporter log for that GPU (on "
               "VictoriaMetrics a GPU that reads NaN looks missing too: its queries skip NaN samples; "
               "`curl` the exporter's /metrics to tell)")
DISAPPEARED = "it was reported earlier in the window: look for an exporter upgrade, restart or XID at that time"
LEGACY = ("the exporter runs in 1.x compatibility mode (use-old-namespace / -o with 1.x-compatibility-metrics.csv), "
          "which exports dcgm_* names and a lowercase uuid label: switch it off (gpumon's rules do not read the "
          "1.x names; the spec's legacy_names only make GpuExporterLegacyNames page for such a node)")
RENAMED = ("dcgm-exporter renamed the Hostname label to hostname after 4.8.2 (NVIDIA/dcgm-exporter#655): set "
           "exporter.labels.node in the spec to the label your exporter uses and re-render, or pin the exporter version")
MIG = ("DCGM does not report this field per MIG instance: mark it `mig: unsupported` in the spec and use "
       "DCGM_FI_PROF_GR_ENGINE_ACTIVE (per instance) for utilisation")
GPU_LOST = ("the GPU stopped reporting while its node still reports others: check for XID 79 (fallen off the "
            "bus) and `nvidia-smi` on the node; the exporter may need a restart to see a reset GPU")
RANGE_LOW = ("a running datacenter GPU never reads this low: the field is not really collected (embedded host "
             "engine, consumer GPU, driver mismatch); compare with `nvidia-smi -q` on the node")
RANGE_HIGH = "an impossible reading: a DCGM error code or a glitch; check the exporter and DCGM versions"
SENTINEL = ("a DCGM blank code (dcgm_structs.h: BLANK, NOT_FOUND, NOT_SUPPORTED, NO_PERMISSION) was exported as a "
            "value: DCGM has no reading of the field for these GPUs. Where other GPUs of the same model read it, "
            "look at these GPUs (`nvidia-smi -q -i <index>`, XIDs, the exporter log); where none does, the model "
            "or driver does not support it: drop it from the collectors CSV and the spec, or upgrade the exporter")
NAN = ("NaN readings pass every threshold alert silently: the exporter or a relabeling produces NaN; check the "
       "exporter version and the field on this GPU")
FROZEN = ("the counter stopped increasing while the target is up: the exporter serves frozen values "
          "(dcgm-exporter#164); restart the exporter pod and check DCGM/hostengine health")
INTERMITTENT = ("the field is missing from some successful scrapes: DCGM returned blank for it intermittently "
                "(collect interval longer than the scrape interval, GPU busy/throttled, NVML timeouts)")
GPU_INTERRUPTED = ("the GPU stopped reporting every field for a while, then came back: a GPU reset or one off "
                   "the bus and back (look for XID 79 and a GpuLost page), the exporter losing the GPU, or its node "
                   "label respelled by an exporter rollout and back (GpuIdentityLabelMissing); not a field's blanks")
DRIVER_MISMATCH = ("nodes run different driver versions: keep a driver/exporter version matrix, and roll the "
                   "odd nodes to the fleet's version (a mismatch between driver and NVML library breaks fields)")
FLAPPING = ("a target that alternates between up and down never fires a `for:` down alert (cloudflare/pint#966): "
            "look for scrape timeouts on big GPU/MIG nodes, exporter restarts (OOM kills) and node pressure")
# --- the kubernetes section (docs/kubernetes.md)
KSM_MISSING = ("no successful scrape of kube-state-metrics with this job: check the job name in "
               "kubernetes.kube_state_metrics.job and that kube-state-metrics runs and is scraped")
K8S_RULES = ("the expected-vs-reported GPU counts are recording rules: load the rendered rules "
             "(output/rules/ or the PrometheusRule) so the `<name>.kubernetes` and `<name>.inventory` groups run")
GPUS_MISSING = ("the node should have more GPUs than the exporter reports: look for XID 79 (fallen off the bus) in "
                "`dmesg`, run `nvidia-smi` on the node, check the exporter log for GPUs it cannot read; an exporter "
                "limited to the GPUs allocated to pods reports fewer too")
GPUS_ABOVE = ("the node reports more physical GPUs than expected: capacity.units_per_gpu or a static entry is "
              "wrong for this node (time-slicing, MIG strategy), or the device plugin lost GPUs")
NO_EXPORTER_POD = ("no Running exporter pod on this GPU node: check the DaemonSet's nodeSelector (GPU Operator: "
                   "label nvidia.com/gpu.deploy.dcgm-exporter=true), tolerations for the node's taints, and "
                   "`kubectl describe pod` for a Pending pod")
POD_NOT_SCRAPED = ("an exporter pod runs on the node but no target of the exporter job belongs to it: the "
                   "ServiceMonitor/PodMonitor selector or namespaceSelector misses it, or the Service has no "
                   "endpoint for the pod (not Ready)")
NO_GPU_SERIES = ("the node should report GPUs (static expectation) but no series of the exporter job carries "
                 "it: the exporter does not run there, its target is down, or the node label differs")
CAPACITY_MISSING = ("GPUs report telemetry but the node advertises no GPU capacity: the NVIDIA device plugin is not "
                    "running or not registered on the node, or kubernetes.node_join does not map node names")
RESTARTS = ("the exporter container restarted: `kubectl logs --previous` for NVML/DCGM init errors or panics, "
            "`kubectl describe pod` for the termination reason; every restart is a gap on the whole node")
OOM = ("the exporter was OOM-killed: its memory grows until the limit (many GPUs/MIG instances, pod labels, "
       "profiling fields); raise resources.limits.memory or trim the collectors CSV")
DS_NOT_READY = ("some nodes that should run the exporter have no ready pod: `kubectl -n <namespace> get pods -o wide` "
                "for Pending, CrashLoopBackOff or ImagePullBackOff pods (a rolling update is brief)")
DS_MISSING = ("kube-state-metrics knows no DaemonSet of this namespace and name: fix kubernetes.exporter in the spec, "
              "and scrape kube-state-metrics with honor_labels: true (else its namespace label is exported_namespace)")
DEVICE_PLUGIN = ("the device plugin marked GPUs unhealthy (allocatable < capacity), usually after an XID: check "
                 "`kubectl describe node` and the device plugin log; the GPU needs a reset or service")
DUPLICATE = ("two exporters (or two scrape configs) report the same GPU: e.g. the GPU Operator's "
             "nvidia-dcgm-exporter next to a Helm-installed dcgm-exporter, or a ServiceMonitor next to a static "
             "scrape config. Sums and counts double and every alert fires twice: remove one exporter "
             "(GPU Operator: dcgmExporter.enabled=false when you run your own) or one scrape config")
PROFILING = ("DCGM_FI_PROF_* (DCP) fields need the DCGM profiling module: check the exporter log for profiling "
             "module / DCP errors (dcgm-exporter#571), that the collectors CSV lists them, and that the GPUs "
             "support them (not on consumer GPUs, not on some vGPU profiles); dashboards built on them stay empty")
OPTIONAL_ABSENT = ("no GPU reports these optional fields: they are not in the exporter's collectors CSV, or this "
                   "model/driver/mode does not support them (vGPU-only, A100-and-newer fields); add them to the CSV "
                   "or remove them from the spec")
COUNTER_DECREASES = ("a counter that goes down is not a counter: rate()/increase() read every drop as a reset and "
                     "spike (dcgm-exporter#417). If the field is really a gauge, set `kind: gauge` in the spec and "
                     "re-render; a GPU reset or driver reload resets real counters too (aitra-ai/aitra-meter#59), "
                     "but not this often")
