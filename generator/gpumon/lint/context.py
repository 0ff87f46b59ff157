"""What the checks know besides the linted files: the spec (metric kinds, MIG behaviour, label
names, intervals, PrometheusRule labels), dcgm-exporter's field lists (``generator/gpumon/data``) and
the recording rules — gpumon's own (built from the spec) and those defined in the linted files."""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import fields
from ..applysize import BUDGET
from ..rules import RuleGroup
from ..spec import VOLATILE_LABELS, Spec
from ..readers import promql
from ..readers.model import Inputs

#: Label-name spellings dcgm-exporter used in different versions/modes, by what they mean.
#: Sources: NVIDIA/dcgm-exporter#655 (``Hostname`` -> ``hostname``), ``1.x-compatibility`` mode /
#: ``--use-old-namespace`` (``UUID`` -> ``uuid``).
LABEL_SPELLINGS = {"node": ("Hostname", "hostname"), "gpu": ("UUID", "uuid")}


@dataclass
class Context:
    """Knowledge shared by all checks.

    Attributes:
        spec: the loaded spec.
        kinds: metric name -> ``gauge`` or ``counter`` (the spec's ``kind`` wins over the CSV's
            ``# TYPE``, e.g. NVLINK_BANDWIDTH_TOTAL is typed counter but goes down, dcgm-exporter#417).
        known: every metric name that is not a typo: spec metrics, dcgm-exporter fields, recording
            rules (gpumon's and the linted files').
        legacy: 1.x ``dcgm_*`` name -> current field name (or "" when unknown).
        records: recording-rule name -> labels its series carry.
    """

    spec: Spec
    kinds: dict = field(default_factory=dict)
    known: set = field(default_factory=set)
    legacy: dict = field(default_factory=dict)
    records: dict = field(default_factory=dict)
    gpumon_records: set = field(default_factory=set)
    #: (rule name, expression) of every rule gpumon renders from the spec
    gpumon_rules: set = field(default_factory=set)
    #: the most bytes an object's last-applied annotation may take (``--max-object-bytes``)
    max_object_bytes: int = BUDGET

    def rendered_by_gpumon(self, query) -> bool:
        """True when ``query`` is, unchanged, the expression of a rule gpumon renders from this spec:
        such a rule may read what users should not (the 1.x names the spec's ``legacy_names``
        declare, in the 1.x label spelling, to count the GPUs of nodes still on 1.x names)."""
        rule = getattr(query, "rule", None)
        return rule is not None and (rule.name, query.source.strip()) in self.gpumon_rules

    # ---- labels
    @property
    def labels(self):
        return self.spec.exporter.labels

    @property
    def identity_labels(self) -> tuple[str, ...]:
        """Labels that say which GPU/node a series is about (cluster, node, UUID, gpu, MIG id)."""
        return self.labels.identity

    @property
    def stable_labels(self) -> frozenset:
        """Labels that identify a node or GPU across exporter restarts: node and UUID (+cluster)."""
        out = {self.labels.node, self.labels.gpu}
        if self.labels.cluster:
            out.add(self.labels.cluster)
        return frozenset(out)

    @staticmethod
    def volatile(label: str) -> bool:
        """Labels that change when the exporter pod restarts or with honor_labels."""
        return label in VOLATILE_LABELS or label.startswith("exported_")

    def wrong_spelling(self, label: str) -> str | None:
        """The configured spelling when ``label`` is another version's spelling of the node or
        GPU label (``hostname`` while the exporter writes ``Hostname``), else None."""
        for role, spellings in LABEL_SPELLINGS.items():
            configured = getattr(self.labels, role)
            if configured in spellings and label in spellings and label != configured:
                return configured
        return None

    # ---- metrics
    def is_gpu_metric(self, name: str | None) -> bool:
        """True for DCGM fields, 1.x names and recording rules over them (names with ``dcgm``/``gpumon``)."""
        if not name:
            return False
        low = name.lower()
        return low.startswith("dcgm") or ("dcgm" in low or "gpumon" in low) and ":" in name

    def device_wide(self, name: str) -> bool:
        """True when every MIG instance of a GPU reports the same device value (spec ``mig: device``)."""
        metric = self.spec.metric(name)
        return metric is not None and metric.mig == "device"

    def record_labels(self, name: str) -> "promql.LabelSet | None":
        """Labels of a recording rule's series, None for non-recorded metrics."""
        return self.records.get(name)


def build(spec: Spec, inputs: Inputs, groups: list[RuleGroup]) -> Context:
    """A :class:`Context` for ``spec``, the rule ``groups`` built from it
    (:func:`gpumon.rules.build_groups`) and the recording rules found in ``inputs``."""
    ctx = Context(spec=spec)
    known = fields.known_fields()
    for name, f in known.items():
        if f.kind in ("gauge", "counter"):
            ctx.kinds[name] = f.kind
    for m in spec.metrics:
        ctx.kinds[m.name] = m.kind
    # a metric's fallback sources (issue 13) are series the spec declares: nvidia_smi_*, old DCGM names
    ctx.known = set(known) | set(spec.metric_names) | {s.series for m in spec.metrics for s in m.sources}
    for m in spec.metrics:
        for s in m.sources:
            ctx.kinds.setdefault(s.series, m.kind)
    by_help = {f.help: name for name, f in known.items()}
    for name, f in fields.legacy_fields().items():
        ctx.legacy[name] = by_help.get(f.help, "")
        if f.kind in ("gauge", "counter"):
            ctx.kinds.setdefault(name, f.kind)
    for m in spec.metrics:
        for old in m.legacy_names:
            ctx.legacy[old] = m.name
    sources = []
    for group in groups:
        for rule in group.rules:
            ctx.gpumon_rules.add((rule.record or rule.alert, rule.expr.strip()))
            if rule.record:
                ctx.gpumon_records.add(rule.record)
                sources.append((rule.record, rule.expr, dict(rule.labels)))
    for rule in inputs.rules:
        if rule.kind == "record" and rule.name and rule.expr is not None:
            sources.append((rule.name, rule.expr.text, rule.labels))
    ctx.known |= {name for name, _, _ in sources}
    _infer_records(ctx, sources)
    return ctx


def _infer_records(ctx: Context, sources: list) -> None:
    """Label sets of recording rules, resolving rules that read other rules (a few passes, since
    rule files list them in evaluation order but several files may be linted at once)."""
    by_name: dict[str, list] = {}
    for name, expr, labels in sources:
        by_name.setdefault(name, []).append((expr, labels))
    for _ in range(4):
        resolved = {}
        for name, items in by_name.items():
            out = None
            for expr, labels in items:
                ast, _ = promql.parse(expr)
                ls = promql.output_labels(ast, ctx.records.get) if ast is not None else promql.ANY
                ls = ls.add(labels)
                out = ls if out is None else out.union(ls)
            resolved[name] = out
        if resolved == ctx.records:
            break
        ctx.records = resolved
