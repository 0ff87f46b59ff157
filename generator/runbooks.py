"""Runbooks: one Markdown page per alert name, rendered from ``templates/runbooks/`` and linked
by every alerting rule's ``runbook_url`` (``<alerts.runbook_url>/<AlertName>.md``; the default
base ``../runbooks`` resolves from ``output/rules/`` to ``output/runbooks/``).

The template is chosen by the alert's kind (``Rule.kind``, e.g. ``exporter_down`` ->
``templates/runbooks/exporter_down.md.j2``); a kind without its own template uses
``generic.md.j2``. Diagnosis steps shared by several runbooks live in ``_steps.md.j2``.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from functools import lru_cache

import jinja2

from .durations import format_duration
from .promqltext import quote
from .rules import build_groups, names
from .rules.model import Rule, RuleGroup
from .rules.output import CRD_PATH, PLAIN_PATH
from .rules.promql import num
from .spec import Spec
from .texts import templates_dir

RUNBOOK_PATH = "runbooks/{alert}.md"
#: dcgm-exporter's default listen port (dcgm-exporter ``--address`` default ``:9400``)
EXPORTER_PORT = 9400


@lru_cache(maxsize=None)
def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir() / "runbooks")),
        undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
        keep_trailing_newline=True, autoescape=False,
    )
    env.filters["num"] = num
    env.filters["dur"] = format_duration
    # values in PromQL go through the one quoting function (issue #15, finding 2); in a shell
    # single-quoted string a ' ends the string, so it is written as '\''
    env.filters["promql"] = quote
    env.filters["sq"] = lambda value: str(value).replace("'", "'\\''")
    return env


def _alerts_by_name(groups: list[RuleGroup]) -> "OrderedDict[str, list[Rule]]":
    out: OrderedDict[str, list[Rule]] = OrderedDict()
    for rule in (r for g in groups for r in g.rules):
        if rule.alert:
            out.setdefault(rule.alert, []).append(rule)
    return out


def _context(spec: Spec, alert: str, rules: list[Rule]) -> dict:
    lab = spec.exporter.labels
    fields = [r.label_map.get(names.FIELD_LABEL) for r in rules if r.label_map.get(names.FIELD_LABEL)]
    metrics = [spec.metric(f) for f in dict.fromkeys(fields) if spec.metric(f)]
    return {
        "alert": alert,
        "kind": rules[0].kind or "generic",
        "rules": [{"expr": r.expr, "for": format_duration(r.for_ or 0), "labels": r.label_map} for r in rules],
        "severities": sorted({r.label_map.get("severity", "") for r in rules}),
        "metrics": metrics,
        "job": spec.exporter.job,
        "node": lab.node, "gpu": lab.gpu, "gpu_index": lab.gpu_index, "mig": lab.mig_instance,
        "cluster": lab.cluster,
        "port": EXPORTER_PORT,
        "scrape_interval": format_duration(spec.exporter.scrape_interval),
        "scrape_timeout": format_duration(spec.exporter.scrape_timeout),
        "collect_interval": format_duration(spec.exporter.collect_interval),
        "alerts": spec.alerts,
        "gap_window": format_duration(spec.alerts.gap_window),
        "lookback": format_duration(spec.alerts.inventory_lookback),
        "flapping_window": format_duration(spec.alerts.flapping_window),
        "frozen_window": format_duration(spec.alerts.frozen_window),
        "rule_file": PLAIN_PATH.format(name=spec.name),
        "crd_file": CRD_PATH.format(name=spec.name),
        "prometheus_rule": spec.prometheus_rule,
        "names": names,
        "spec_file": spec.path.rsplit("/", 1)[-1],
        "kube": spec.kubernetes,      # None without a `kubernetes` section
    }


def render_one(spec: Spec, alert: str, rules: list[Rule]) -> str:
    """The runbook of ``alert`` (all ``rules`` carrying that name) as Markdown.

    Raises:
        jinja2.UndefinedError: a template uses a variable the context lacks (a programming error).
    """
    env = _env()
    kind = rules[0].kind or "generic"
    template = env.select_template([f"{kind}.md.j2", "generic.md.j2"])
    text = template.render(**_context(spec, alert, rules))
    text = "\n".join(line.rstrip() for line in text.strip().splitlines()) + "\n"
    return re.sub(r"\n{3,}", "\n\n", text)


def files(spec: Spec, groups: list[RuleGroup] | None = None) -> dict[str, str]:
    """Rendered runbooks keyed by path relative to the output folder, one per alert name;
    ``groups`` default to :func:`generator.rules.build_groups` of ``spec``."""
    groups = build_groups(spec) if groups is None else groups
    return {RUNBOOK_PATH.format(alert=alert): render_one(spec, alert, rules)
            for alert, rules in _alerts_by_name(groups).items()}
