"""Check: behind a Thanos Query, did every store answer? (``/api/v1/stores``)

Thanos Query answers a query whose store (sidecar, store gateway, ruler, receiver) is down with
``warnings`` only for a few seconds: once its endpoint health check fails, Query drops the store
from the set it fans out to, and answers *without warnings and without that store's series*
(measured with Thanos 0.42.4: two stopped sidecars of cluster ``b`` gave partial-response warnings
for ~8 s, then plain answers holding only cluster ``a``). A whole cluster can so vanish from the
global view while every query looks complete (thanos-io/thanos#3562, #6621), and every GPU
there looks "never seen". The store
list keeps such stores with their ``lastError`` and external label sets, so validate asks it once
and says which part of the fleet it could not see.

A store that is down while another healthy store carries the same external labels apart from a
replica label (``replica``, ``prometheus_replica``, ``rule_replica``, ``receive_replica``: the
names the Thanos docs and kube-prometheus use) is one replica of an HA pair: its twin still
serves the data (deduplication), so it is a warning. Otherwise the run is inconclusive (exit 3):
what was not seen cannot be called missing. On servers without the API (Prometheus, Mimir,
VictoriaMetrics: HTTP 404) the check reports nothing.

Why: Thanos Query drops a store whose health check fails and then answers without it and without
warnings: a cluster whose sidecars are down vanishes from every answer ("many queries can succeed
without an error while the system is heavily degraded", thanos-io/thanos#3562, #6621).
Silence: Bring the store back or remove it from Query's --endpoint list; leave the check out with
--checks.
"""

from __future__ import annotations

from .. import redact
from ..findings import Finding
from ..promanswer import _is_labels
from ..promapi import PromError
from .base import CheckResult, Context

CHECK = "stores"
ORDER = 10
FINDINGS = ("store-unavailable", "replica-unavailable", CHECK)
LOOKS_AT = ('Thanos Query only (`/api/v1/stores`; other servers answer 404 and the check says nothing): a failing '
            'store whose external labels no healthy store carries means part of the fleet is in no answer. Query '
            'drops such a store after a few seconds and then answers without warnings (thanos-io/thanos PR '
            '#3562), so this is the only place it shows. A failing replica whose twin is healthy is a warning.')
FINDING_NOTES = {'store-unavailable': 'inconclusive', 'replica-unavailable': 'warning'}

#: external label names that tell replicas of one HA pair apart (Thanos docs: "Deduplication")
REPLICA_LABELS = ("replica", "prometheus_replica", "rule_replica", "receive_replica", "__replica__")


def _key(label_set: dict) -> tuple:
    """A store's external labels without the replica labels: what its HA twin also has."""
    return tuple(sorted((k, v) for k, v in (label_set or {}).items() if k not in REPLICA_LABELS))


def _label_sets(store: dict) -> list[dict]:
    """A store's ``labelSets`` that are label sets (mappings of strings): a malformed one is left
    out, not hashed or sorted where it would crash the check."""
    sets = store.get("labelSets")
    return [ls for ls in sets if _is_labels(ls)] if isinstance(sets, list) else []


def _labels_text(label_sets: list[dict]) -> str:
    return "; ".join("{" + ", ".join(f'{k}="{v}"' for k, v in sorted(s.items())) + "}" for s in label_sets) or "{}"


def run(ctx: Context) -> CheckResult:
    """Findings: ``store-unavailable`` (inconclusive) for a down store no healthy store covers,
    ``replica-unavailable`` (warning) for a down replica whose twin is healthy."""
    case = f"{CHECK}/thanos-stores"
    answer = ctx.run({"stores": ("get", "/api/v1/stores")})["stores"]
    if isinstance(answer, PromError):
        if answer.kind in ("not-found", "not-json", "http", "api"):
            return CheckResult([], [])  # not a Thanos Query: nothing to check
        return CheckResult([Finding(CHECK, "inconclusive", "thanos-stores", f"cannot list stores: {answer}",
                                    case=case)], [case])
    data = answer.data if isinstance(answer.data, dict) else {}
    stores = [(kind, s) for kind, items in sorted(data.items()) if isinstance(items, list)
              for s in items if isinstance(s, dict)]
    healthy = {_key(ls) for _, s in stores if not s.get("lastError") for ls in (_label_sets(s) or [{}])}
    findings = []
    for kind, store in stores:
        error = store.get("lastError")
        if not error:
            continue
        label_sets = _label_sets(store)
        name = str(store.get("name", "?"))
        covered = label_sets and all(_key(ls) in healthy for ls in label_sets)
        what = f"Thanos Query lists {kind} store {name} {_labels_text(label_sets)} as failing: {redact.clip(str(error), 300)}"
        if covered:
            findings.append(Finding("replica-unavailable", "warning", name,
                                    f"{what}; a healthy replica with the same labels serves its series",
                                    "restart the replica; until then the HA pair has no spare",
                                    labels=(("store", name),), case=case))
        else:
            findings.append(Finding("store-unavailable", "inconclusive", name,
                                    f"{what}; no healthy store carries these labels, so their series are in no "
                                    "answer and GPUs there cannot be told missing from unseen",
                                    "bring the store back (sidecar, store gateway, ruler), then validate again",
                                    labels=(("store", name),), case=case))
    return CheckResult(findings, [case])
