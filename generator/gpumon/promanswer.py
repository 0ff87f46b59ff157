"""What a Prometheus API request gives back: an :class:`Answer` (the decoded ``data`` with its
``warnings``/``infos``) or a :class:`PromError` (what came back instead), and the checks of the
shapes the API documents (Prometheus ``docs/querying/api.md``) that :mod:`gpumon.promapi` applies
before a check reads an answer."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from . import redact
from .oneline import one_line

#: Error kinds of :class:`PromError`.
KINDS = ("config", "connection", "timeout", "auth", "not-found", "api", "http", "not-json", "too-large")


class PromError(Exception):
    """A request that gave no usable API answer.

    Attributes:
        kind: one of :data:`KINDS` (``auth`` for 401/403 and HTML login pages, ``not-found`` for
            404, ``api`` for a Prometheus error envelope, ``not-json`` for a 2xx that is not the API).
        url: the URL asked (credentials removed; after redirects, the final one).
        status: HTTP status, or None when no answer came.
        message: what happened, with Prometheus' own ``errorType``/``error`` or a body excerpt.
        hint: what to try.
    """

    def __init__(self, kind: str, url: str, message: str, status: int | None = None, hint: str = ""):
        url, message, hint = redact.redact(url), redact.redact(message), redact.redact(hint)
        self.kind, self.url, self.status, self.message, self.hint = kind, url, status, message, hint
        where = f"{url}: HTTP {status}" if status else url
        super().__init__(f"{where}: {message}")


def shape_error(url: str, what: str, data: object) -> PromError:
    """A ``not-json`` :class:`PromError` for an answer of the wrong shape, quoting the start of it
    (masked before it is cut)."""
    return PromError("not-json", url, f"unexpected {what} answer: {redact.clip(str(data), 200)}",
                     hint="not the Prometheus API (or a broken proxy in front of it): check --prom and --path-prefix")


#: How Prometheus 3 starts PromQL annotations (promql/annotations: "PromQL info: ", "PromQL warning: ")
ANNOTATION_PREFIXES = ("PromQL info:", "PromQL warning:")


@dataclass
class Answer:
    """A successful API answer: ``data`` as decoded JSON, plus ``warnings``/``infos`` (a partial
    response from Thanos or Mimir carries warnings and must not be read as complete)."""

    data: object
    warnings: list[str] = field(default_factory=list)
    infos: list[str] = field(default_factory=list)

    @property
    def partial(self) -> bool:
        """True when a warning says data may be missing. PromQL annotations (``PromQL info: metric
        might not be a counter ...``, ``PromQL warning: ...``) are not: Prometheus 3 returns them
        in ``infos``/``warnings`` and Thanos Query relays both as ``warnings`` (seen with Thanos
        0.42.4 on ``rate()`` of ``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION``, a counter without
        ``_total``), while its partial responses read ``fetch series for {...}: rpc error``."""
        return any(not str(w).startswith(ANNOTATION_PREFIXES) for w in self.warnings)


def escaped(text: str) -> str:
    """``text`` with every character a terminal or a CI log acts on written as an escape
    (:func:`gpumon.oneline.one_line`, the one escaper): a server's words are quoted, never obeyed."""
    return one_line(text)


def _strings(value: object) -> list[str]:
    # masked before the cut: a warning quoting a credential is not printed in part
    return [escaped(redact.clip(str(v), 500)) for v in value[:50]] if isinstance(value, list) else []


def _known_codec(name: str | None) -> bool:
    import codecs

    try:
        return bool(name) and codecs.lookup(name) is not None
    except LookupError:
        return False


def _is_labels(value: object) -> bool:
    return isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())


def _is_value(value: object) -> bool:
    """``[unix time, "number as string"]`` (Prometheus sends values as strings; ``NaN``, ``+Inf``
    included), the string a number Python reads, the time a number of seconds before the year
    5000 (Python's JSON reads ``Infinity`` and ``1e400`` as infinite, a time no reader can turn
    into milliseconds or a date)."""
    if not (isinstance(value, list) and len(value) == 2 and isinstance(value[0], (int, float))
            and not isinstance(value[0], bool) and math.isfinite(value[0]) and abs(value[0]) < 1e11
            and isinstance(value[1], str) and len(value[1]) <= 64):
        return False
    try:
        float(value[1])
    except ValueError:
        return False
    return True


def count(value: str) -> int:
    """A sample value read as a count (``count by``), 0 for NaN, infinities or negative values."""
    number = float(value)
    return int(number) if number == number and abs(number) != float("inf") and number >= 0 else 0


def _is_sample(item: object) -> bool:
    return isinstance(item, dict) and _is_labels(item.get("metric", {})) and _is_value(item.get("value"))


def _is_series(item: object) -> bool:
    return (isinstance(item, dict) and _is_labels(item.get("metric", {})) and isinstance(item.get("values"), list)
            and all(map(_is_value, item["values"])))


def _is_target(item: object) -> bool:
    return (isinstance(item, dict) and _is_labels(item.get("labels", {}))
            and all(isinstance(item.get(k, ""), str) for k in ("scrapeInterval", "health", "lastError", "scrapeUrl",
                                                                 "scrapeTimeout"))
            and isinstance(item.get("lastScrapeDuration", 0), (int, float))
            and not isinstance(item.get("lastScrapeDuration", 0), bool))


def result_items(data: object) -> list | None:
    """The items of a query answer's ``data`` (``{"resultType", "result"}``) in the shapes the API
    documents: vector samples, matrix series, a scalar or string as one sample without labels;
    None for anything else (an item that is not an object, labels that are not a mapping of
    strings, a value that is not ``[time, "number"]``), which the caller refuses as a server
    error instead of crashing where it reads the item."""
    data = data if isinstance(data, dict) else {}
    kind, result = data.get("resultType"), data.get("result")
    if kind == "vector" and isinstance(result, list) and all(map(_is_sample, result)):
        return result
    if kind == "matrix" and isinstance(result, list) and all(map(_is_series, result)):
        return result
    if kind in ("scalar", "string") and _is_value(result):
        return [{"metric": {}, "value": result}]
    return None


def streaming(each):
    """A ``json.loads`` object hook passing each decoded sample (an object with ``metric`` labels
    and a ``value`` pair) to ``each`` and keeping None in its place: the decoder builds a
    sample's dicts and hands them over, and nothing of it stays in the decoded answer."""
    def hook(obj: dict):
        if "metric" in obj and "value" in obj and _is_sample(obj):
            each(obj)
            return None
        return obj
    return hook


#: what :func:`targets_hook` leaves in place of a target ``keep`` dropped
LEFT_OUT = object()


def targets_hook(keep):
    """A ``json.loads`` object hook passing each target (an object with ``health`` and
    ``labels``) to ``keep`` as it is decoded; a target that is not well formed stays as it is,
    for :meth:`gpumon.promapi.PromClient.targets` to refuse the answer."""
    def hook(obj: dict):
        if "health" in obj and "labels" in obj and _is_target(obj):
            kept = keep(obj)
            return LEFT_OUT if kept is None else kept
        return obj
    return hook
