"""One verdict per panel, from what its queries returned, which of its selectors have series,
the GPU inventory and the other checks' findings. One small function per verdict, tried in order:
unsupported, not evaluated (query cap), query error, variable empty, masked, empty (no data or
expected empty), partial, ok."""

from __future__ import annotations

import re

from ... import redact
from ...durations import format_duration
from ...findings import Finding
from ...promapi import Answer, PromError
from ...rules import names
from ..base import gpu_list, other_spelling
from . import exprs
from .verdicts import (ALWAYS_SPARSE, HINTS, NO_ANSWER_HINT, Verdict, history_to_probe, is_empty, query_errors,
                       short_history, target_empty, window_seconds)

#: checks whose findings explain a missing series
_CAUSES = ("series-missing", "optional-absent", "gpu-lost", "legacy-metric-names", "identity-label-renamed",
           "rules-not-loaded", "rule-missing", "target-missing", "field-unsupported-on-mig")


def _names_in(message: str) -> set[str]:
    """The metric names a message lists: ``optional-absent`` names several fields in one finding
    (every absent DCGM_FI_PROF_* field, say), whose subject is then the job."""
    return set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", message))


class Judge:
    """Classifies panel runs (see the module docstring)."""

    def __init__(self, ctx, prior: list[Finding], series: dict[str, int | None], resolved: dict, runs=(),
                 history: dict[tuple, int | None] | None = None):
        self.ctx, self.prior, self.series, self.resolved = ctx, prior, series, resolved
        #: ("history", selector text, window) -> most samples any of its series has in that window
        #: now; ("short", ...) -> how many of its series have fewer than two there
        self.history = history or {}
        self.spec = {m.name: m for m in ctx.spec.metrics}
        self.seen_gpus = self._seen_in(runs)

    def _seen_in(self, runs) -> dict[str, list]:
        """Per dashboard file: every GPU (by UUID) any of its panels shows: the expected GPUs when
        the inventory has none (no spec, or a spec whose job is not the dashboards')."""
        out: dict[str, dict] = {}
        for pr in runs:
            for t in pr.targets:
                for a in t.answers:
                    if not isinstance(a, Answer):
                        continue
                    for item in a.data:
                        g = self.ctx.gpu(item.get("metric") or {})
                        if g.uuid:
                            out.setdefault(pr.dash.file, {}).setdefault(g.uuid, g)
        return {k: list(v.values()) for k, v in out.items()}

    # ------------------------------------------------------------------ helpers
    def sparse(self, metric: str | None) -> bool:
        """True when an empty answer for ``metric`` is healthy: ALERTS, gpumon's sparse recording
        rules (:func:`names.is_sparse_record`) and fields the spec marks ``presence: sparse``."""
        m = self.spec.get(metric or "")
        return (metric in ALWAYS_SPARSE or names.is_sparse_record(metric or "")
                or (m is not None and m.presence == "sparse"))

    def optional(self, metric: str | None) -> bool:
        m = self.spec.get(metric or "")
        return m is not None and m.presence == "optional"

    def causes(self, metric: str, nodes: set[str] | None = None) -> list[str]:
        """``check: subject`` of earlier findings that explain ``metric`` missing (on ``nodes``)."""
        out = []
        for f in self.prior:
            if f.check not in _CAUSES:
                continue
            about = f.subject.split(" on ")[0]
            field_ = dict(f.labels).get("dcgm_field")
            hit = (metric in (about, field_) or (":" in metric and f.check in ("rules-not-loaded", "rule-missing"))
                   or (f.check == "optional-absent" and metric in _names_in(f.message)))
            if f.check == "gpu-lost" and nodes is not None:
                hit = any(n in f.message for n in nodes)
            if hit and nodes is not None and " on " in f.subject and f.subject.split(" on ", 1)[1] not in nodes:
                hit = False
            if hit:
                out.append(f"{f.check}: {f.subject}")
        return sorted(set(out))

    def _missing_text(self, sel: exprs.Selector) -> str:
        window = f"the last {format_duration(self.ctx.lookback)}"
        if sel.metric and sel.metric != sel.text and self.series.get(sel.metric):
            return (f"`{sel.text}` selects nothing, though {sel.metric} has {self.series[sel.metric]} series "
                    "(a label or variable value does not match)")
        what = "recording rule" if sel.metric and ":" in sel.metric else "series"
        return f"{what} `{sel.metric or sel.text}` has no samples in {window}"

    def _missing(self, targets) -> list[exprs.Selector]:
        out = []
        for t in targets:
            if t.ast is None:
                continue
            for sel in exprs.selectors(t.ast):
                if self.series.get(sel.text) == 0 and sel not in out:
                    out.append(sel)
        return out

    # ------------------------------------------------------------------ verdict
    def verdict(self, pr) -> Verdict:
        dash = pr.dash
        v = Verdict(dash.title, str(dash.doc.get("uid") or ""), dash.file, pr.doc.get("id"), str(pr.doc.get("title", "")),
                    str(pr.doc.get("type", "")), pr.row, "panel-ok", "",
                    queries=[t.expr for t in pr.targets])
        v.metrics = sorted({s.metric for t in pr.targets if t.ast is not None for s in exprs.selectors(t.ast)
                            if s.metric})
        for rule in (self._unsupported, self._capped, self._errors, self._variable_empty, self._masked, self._empty,
                     self._partial):
            if rule(pr, v):
                break
        else:
            v.message = "shows data"
        if v.verdict != "panel-ok":
            partial = [a for t in pr.targets for a in t.answers if isinstance(a, Answer) and a.partial]
            sev = v.severity
            msg = v.message
            if partial and sev == "error":
                sev, msg = "inconclusive", msg + " (partial response: " + redact.clip("; ".join(partial[0].warnings), 200) + ")"
            hint = NO_ANSWER_HINT if v.downgraded == "inconclusive" else HINTS[v.verdict]
            if v.causes:
                hint += "; explained by " + "; ".join(v.causes)
            loc = dash.at(pr.pointer) if hasattr(dash, "at") else None
            v.finding = Finding(v.verdict, sev, f"{dash.title} / {v.title or 'panel ' + str(v.panel_id)}", msg, hint,
                                location=loc, labels=(("dashboard", v.uid), ("panel", str(v.panel_id))),
                                case=v.case)
        return v

    def _unsupported(self, pr, v) -> bool:
        if not pr.unsupported:
            return False
        v.verdict, v.message = "panel-unsupported", f"not evaluated: {pr.unsupported}"
        return True

    def _capped(self, pr, v) -> bool:
        if not pr.capped:
            return False
        reason = pr.capped if isinstance(pr.capped, str) else "the query cap was reached"
        v.verdict, v.message = "panel-not-evaluated", f"not evaluated: {reason}"
        return True

    def _errors(self, pr, v) -> bool:
        errs = [(t, a) for t in pr.targets for a in t.answers if isinstance(a, PromError)]
        if not errs:
            return False
        v.verdict = "panel-query-error"
        v.message, v.downgraded = query_errors(errs)
        return True

    def _variable_empty(self, pr, v) -> bool:
        if not all(target_empty(t) for t in pr.targets):
            return False
        resolved = self.resolved.get(id(pr.dash), {})
        empty = sorted({n for t in pr.targets for n in t.used if resolved.get(n) and resolved[n].empty})
        if not empty:
            return False
        parts = []
        for name in empty:
            r = resolved[name]
            why = f"the server answered: {r.error}" if r.error else "it lists no value"
            parts.append(f"${name} ({r.definition}): {why}")
        v.verdict, v.message = "panel-variable-empty", "no data because a variable is empty: " + "; ".join(parts)
        v.causes = sorted({c for m in v.metrics for c in self.causes(m)})
        return True

    def _masked(self, pr, v) -> bool:
        for t in pr.targets:
            if not t.mask_lhs or not is_empty(t.mask_answer):
                continue
            lhs = exprs.mask(t.ast)
            # masked only when a metric itself is absent: when it exists and the matchers or the
            # condition select nothing (``{Hostname=""}``, ``== 0``), the 0 is true
            missing = [s for s in exprs.selectors(lhs) if self.series.get(s.metric or s.text) == 0
                       and not self.sparse(s.metric)]
            if not missing:
                continue
            v.verdict = "panel-masked"
            v.message = (f"query {t.ref} shows a constant from `or vector(...)` because its left side is empty: "
                         + "; ".join(self._missing_text(s) for s in missing))
            v.causes = sorted({c for s in missing if s.metric for c in self.causes(s.metric)})
            return True
        return False

    def _empty(self, pr, v) -> bool:
        if not all(target_empty(t) for t in pr.targets):
            return False
        missing = self._missing(pr.targets)
        real = [s for s in missing if not self.sparse(s.metric)]
        unknown = sorted({s.text for t in pr.targets if t.ast is not None for s in exprs.selectors(t.ast)
                          if s.text in self.series and self.series[s.text] is None})
        if not missing and unknown:  # a probe failed or answered no number: nothing says the series exist
            v.verdict, v.downgraded = "panel-no-data", "inconclusive"
            v.message = f"the query returns nothing; the server gave no series count for {', '.join(unknown[:3])}"
            return True
        if not missing:
            scrape = max(1.0, self.ctx.scrape_interval)
            short = short_history(pr, self.history, scrape)
            if short:
                narrow = any(window_seconds(w) < 2 * scrape for _, w in history_to_probe(pr))
                v.verdict = "panel-too-little-history"
                v.message = ("every series it reads exists, but " + "; ".join(short) + ": rate() and its kin need "
                             "two samples in the window (a server started minutes ago, or a window shorter than two "
                             "scrape intervals); "
                             + ("widen the window ($__rate_interval)" if narrow else "run validate again later"))
                return True
            read = {sel.metric for t in pr.targets if t.ast is not None for sel in exprs.selectors(t.ast)}
            if read and all(self.sparse(m) for m in read):
                # a sparse set recorded within the lookback and not now: what it showed has ended
                v.verdict = "panel-expected-empty"
                v.message = (f"reads only sparse series ({', '.join(sorted(read))}), recorded only while something "
                             "is wrong: some were in the lookback, none now")
            elif any(t.ast is not None and exprs.filters(t.ast) for t in pr.targets):
                v.verdict = "panel-expected-empty"
                v.message = "every series it reads exists; its condition matches nothing now"
            else:
                v.verdict = "panel-no-data"
                v.message = ("every series it reads exists, yet the query returns nothing (a join on labels the "
                             "series do not share?)")
            return True
        if not real:
            sparse = ", ".join(sorted({s.metric or s.text for s in missing}))
            read = {sel.text for t in pr.targets if t.ast is not None for sel in exprs.selectors(t.ast)}
            v.verdict = "panel-expected-empty"
            v.message = (f"reads only sparse series ({sparse}): nothing happened in the lookback"
                         if read <= {s.text for s in missing} else
                         f"every series it reads exists but the sparse ones ({sparse}, recorded only while "
                         "something is wrong); its condition matches nothing now")
            return True
        v.verdict = "panel-no-data"
        v.message = "no data: " + "; ".join(self._missing_text(s) for s in real)
        v.causes = sorted({c for s in real if s.metric for c in self.causes(s.metric)})
        if all(self.optional(s.metric) for s in real):
            v.downgraded = "warning"  # the spec allows optional fields to be absent
        return True

    def _partial(self, pr, v) -> bool:
        # some targets empty while others show data
        empty = [t for t in pr.targets if target_empty(t) and t.ast is not None and not exprs.filters(t.ast)]
        real = [s for s in self._missing(empty) if not self.sparse(s.metric) and not self.optional(s.metric)]
        if real:
            v.verdict = "panel-partial"
            v.message = "; ".join(f"query {t.ref} returns nothing" for t in empty) + ": " + \
                "; ".join(self._missing_text(s) for s in real)
            v.causes = sorted({c for s in real if s.metric for c in self.causes(s.metric)})
            return True
        gap = self._gpu_gap(pr, v)
        if gap:
            v.verdict, v.message = gap
            # probed only for windows under two scrape intervals (verdicts.short_windows_to_probe)
            short = {(sel.text, w): self.history.get(("short", sel.text, w))
                     for t in pr.targets if t.ast is not None for sel, w in exprs.two_sample_windows(t.ast)}
            flicker = [f"{sel} has at most 1 sample in [{w}] on {n} series" for (sel, w), n in short.items() if n]
            if v.verdict == "panel-partial" and flicker and not v.causes:  # no finding explains the gap
                v.verdict = "panel-too-little-history"
                v.message += (": " + "; ".join(flicker) + " (a window shorter than two scrape intervals "
                              "holds two samples only when the scrapes happen to fall inside it); widen the "
                              "window ($__rate_interval)")
            if v.verdict == "panel-variable-empty":
                v.downgraded = "warning"  # the panel shows the other GPUs
            return True
        return False

    # ------------------------------------------------------------------ GPU coverage
    def _expected(self, metrics: list[str], pr=None):
        inv = self.ctx.inventory
        gpus = [inv.gpu(k) for k in inv.reporting if k in inv.sites]
        if not gpus and pr is not None:
            gpus = self.seen_gpus.get(pr.dash.file, [])
        unsupported_on_mig = any(getattr(self.spec.get(m), "mig", "") == "unsupported" for m in metrics)
        if unsupported_on_mig:
            gpus = [g for g in gpus if not g.mig]
        return gpus

    def _series_labels(self, pr) -> list[dict]:
        out = []
        for t in pr.targets:
            for a in t.answers:
                if isinstance(a, Answer):
                    out += [item.get("metric") or {} for item in a.data if item.get("values") or item.get("value")]
        return out

    def _checked_metrics(self, v) -> list[str]:
        """Metrics whose absence on a GPU is a failure: required (or not in the spec)."""
        return [m for m in v.metrics if not self.sparse(m) and not self.optional(m)]

    def _gpu_gap(self, pr, v) -> tuple[str, str] | None:
        """(verdict, message) when the panel shows fewer GPUs or nodes than the inventory: a
        variable that lacks them (``panel-variable-empty``), else ``panel-partial``."""
        if not self._checked_metrics(v) or len(self._checked_metrics(v)) < len(v.metrics):
            return None
        labels = self._series_labels(pr)
        if not labels:
            return None
        gpus = self._expected(v.metrics, pr)
        if not gpus:
            return None
        seen = [self.ctx.gpu(lab) for lab in labels]
        identified = any(g.uuid or g.node for g in seen)
        if identified and any(t.ast is None or exprs.filters(t.ast) for t in pr.targets):
            return None  # a filtered panel lists a subset of GPUs on purpose
        if any(g.uuid for g in seen):
            covered = {g.uuid for g in seen if g.uuid}
            lost = [g for g in gpus if g.uuid and g.uuid not in covered]
            unit = "GPUs"
        elif any(g.index and g.node for g in seen):
            covered = {(g.where, g.index) for g in seen}
            lost = [g for g in gpus if (g.where, g.index) not in covered]
            unit = "GPUs"
        elif any(g.node for g in seen):
            nodes = {g.where for g in seen if g.node}
            lost_nodes = sorted({g.where for g in gpus} - nodes)
            if not lost_nodes:
                return None
            v.causes = sorted({c for m in v.metrics for c in self.causes(m, set(lost_nodes))})
            picker = self._picker(pr, [g for g in gpus if g.where in lost_nodes], v)
            if picker:
                return "panel-variable-empty", picker
            return "panel-partial", (f"shows {len(nodes)} of {len({g.where for g in gpus})} nodes; missing: "
                                     + ", ".join(lost_nodes))
        else:
            gap = self._aggregate_gap(v, gpus)
            return ("panel-partial", gap) if gap else None
        lost = list({(g.uuid, g.where, g.index): g for g in lost}.values())
        if not lost:
            return None
        picker = self._picker(pr, lost, v)
        if picker:
            return "panel-variable-empty", picker
        total = len({(g.uuid or g.index, g.where) for g in gpus})
        inv = self.ctx.inventory
        culprits = [m for m in v.metrics if m in inv.now and any(g.key not in inv.now[m] for g in lost)]
        nodes = {g.where for g in lost}
        v.causes = sorted({c for m in (culprits or v.metrics) for c in self.causes(m, nodes)})
        by = f" ({', '.join(culprits)} missing there)" if culprits else ""
        return "panel-partial", f"shows {total - len(lost)} of {total} {unit}; missing{by}: {gpu_list(lost)}"

    def _picker(self, pr, lost, v) -> str:
        """Why ``lost`` GPUs are not in the panel when a variable is to blame: anchored on a
        metric some GPUs lack, it does not list them, so the selection excludes them
        (NVIDIA/dcgm-exporter#236). Empty when no variable explains it."""
        resolved = self.resolved.get(id(pr.dash), {})
        for name in sorted({n for t in pr.targets for n in t.used}):
            r = resolved.get(name)
            if not r or r.type != "query" or not r.label or not r.values:
                continue
            if r.all_selected and r.all_value is not None:
                continue  # a catch-all allValue (".*") selects GPUs the picker lacks too
            gone = [g for g in lost if self._label_value(g, r.label) not in (None, "", *r.values)]
            if gone:
                values = sorted({self._label_value(g, r.label) for g in gone})
                anchors = re.findall(r"[A-Za-z_:][\w:]*(?=\s*[{,)])", r.definition)
                v.causes = sorted({c for m in anchors for c in self.causes(m, {g.where for g in gone})})
                return (f"${name} ({r.definition}) lists {len(r.values)} value(s) but not {', '.join(values)}: "
                        f"{gpu_list(gone)} vanish from the picker and from this panel")
        return ""

    def _label_value(self, gpu, label: str) -> str | None:
        """The value a GPU has for ``label``, when it is one gpumon knows (identity or instance)."""
        lab = self.ctx.labels
        if label == "instance":
            site = self.ctx.inventory.sites.get(gpu.key)
            return site.instance if site else None
        if label in (lab.node, other_spelling(lab.node)):
            return gpu.node
        if label in (lab.gpu, other_spelling(lab.gpu)):
            return gpu.uuid
        if label == lab.gpu_index:
            return gpu.index
        if lab.cluster and label == lab.cluster:
            return gpu.cluster
        return None

    def _aggregate_gap(self, v, gpus) -> str:
        """A panel without GPU labels (max/avg/sum over the fleet) covers fewer GPUs when a field
        it reads is missing on some: the inventory says which."""
        inv = self.ctx.inventory
        lacking: dict[str, list] = {}
        for m in v.metrics:
            if m not in self.spec or m not in inv.seen:
                continue
            gone = [g for g in gpus if g.key not in inv.now.get(m, set())]
            if gone:
                lacking[m] = gone
        if not lacking:
            return ""
        lost = list({g.key: g for gs in lacking.values() for g in gs}.values())
        nodes = {g.where for g in lost}
        v.causes = sorted({c for m in lacking for c in self.causes(m, nodes)})
        total = len(gpus)
        return (f"aggregates over {total - len(lost)} of {total} GPUs ({', '.join(lacking)} missing on "
                f"{gpu_list(lost)})")
