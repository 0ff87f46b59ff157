"""A rule file cut into layers for the vmalert replay (tests/matrix_vm.py): one vmalert run per
layer instead of one run with a fixed sleep between rules.

``vmalert -replay`` evaluates the rules one after the other, each over the whole range, and pushes
the results to its remote-write queue without waiting for it; ``-replay.rulesDelay`` (a sleep after
every rule) is its only way to let a chained rule see what the rule before it wrote. With ~350 rules
and 1 s each, two replays slept for ~12 minutes, and a write that took longer than the delay would
have been missed.

Here each rule goes into the earliest layer after every earlier rule it reads (a recorded name in
its expression, or ``ALERTS``/``ALERTS_FOR_STATE``, which any earlier alerting rule writes). A rule
never lands in an earlier layer than a rule *before* it in the file that reads it, so a rule still
does not see what a later rule of the file writes (as in the single run, where the later rule had
not run yet). Each layer is a vmalert run of its own with no delay; the run ends only after its
remote-write queue is flushed (``rw.Close()`` at the end of ``app/vmalert/replay.go``), so the next
layer reads everything the earlier ones wrote: the order is kept by construction, not by timing.
Groups keep their names and settings (interval, labels) in every layer.
"""

from __future__ import annotations

import re

import yaml

_NAME = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
_BRACES = re.compile(r"\{[^}]*\}")
_NAME_MATCHER = re.compile(r'__name__\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')
_EQUAL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"')
#: series vmalert writes for alerting rules
ALERT_SERIES = {"ALERTS", "ALERTS_FOR_STATE"}


def _selectors(expr: str):
    """(name, {label: value} of its ``=`` matchers) for every identifier of ``expr``."""
    for m in _NAME.finditer(expr):
        rest = expr[m.end():].lstrip()
        braces = _BRACES.match(rest)
        yield m.group(), dict(_EQUAL.findall(braces.group())) if braces else {}


def _reads(rules: list[dict]) -> list[set[int]]:
    """For each rule (file order), the indexes of the rules whose output its expression can read:
    the writers of each recorded name it selects, except those whose fixed ``labels`` contradict
    an ``=`` matcher of the selector (``x{dcgm_field="A"}`` cannot read the rule that writes ``x``
    with ``dcgm_field: B``), and for ``ALERTS`` the alerting rules its ``alertname`` allows.
    Over-reading is safe (it only adds a layer); reading too little is not, so only fixed labels
    and ``=`` matchers rule a writer out."""
    writers: dict[str, list[int]] = {}
    for k, rule in enumerate(rules):
        if "record" in rule:
            writers.setdefault(rule["record"], []).append(k)
    alerting = [k for k, rule in enumerate(rules) if "alert" in rule]
    out = []
    for rule in rules:
        for op, value in _NAME_MATCHER.findall(rule["expr"]):
            # a name matcher other than a list of names can read any series: the layers could not
            # be told apart (a list's names are identifiers of the expression, read as such below)
            if op != "=~" or not all(_NAME.fullmatch(n) for n in value.split("|")):
                raise ValueError(f"a rule selects by __name__, which the layers do not follow: {rule['expr']}")
        reads: set[int] = set()
        for name, matchers in _selectors(rule["expr"]):
            for k in alerting if name in ALERT_SERIES else writers.get(name, ()):
                fixed = {**(rules[k].get("labels") or {}), **({"alertname": rules[k]["alert"]} if "alert" in rules[k] else {})}
                if all(str(fixed.get(key, value)) == value for key, value in matchers.items()):
                    reads.add(k)
        out.append(reads)
    return out


def layer_numbers(rules: list[dict]) -> list[int]:
    """The layer of each rule (file order): after every earlier rule it reads, and no earlier than
    any earlier rule that reads it (so it stays unseen by rules before it in the file)."""
    reads = _reads(rules)
    layer: list[int] = []
    for k in range(len(rules)):
        after = [layer[i] + 1 for i in reads[k] if i < k]
        not_before = [layer[j] for j in range(k) if k in reads[j]]
        layer.append(max([0, *after, *not_before]))
    return layer


def layers(text: str) -> list[str]:
    """A Prometheus rule file's text -> one rule file text per layer (groups kept, in file order,
    each with its rules of that layer; a group with none is left out of that layer)."""
    doc = yaml.safe_load(text)
    flat = [(g, rule) for g in doc["groups"] for rule in g["rules"]]
    numbers = layer_numbers([rule for _, rule in flat])
    out = []
    for n in range(max(numbers, default=-1) + 1):
        groups = []
        for group in doc["groups"]:
            chosen = [rule for (g, rule), m in zip(flat, numbers) if g is group and m == n]
            if chosen:
                groups.append({**group, "rules": chosen})
        out.append(yaml.safe_dump({"groups": groups}, sort_keys=False, width=1 << 20))
    return out
