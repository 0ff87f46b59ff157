"""Runbooks: one Markdown page per alert name, rendered from ``templates/runbooks/`` and linked
by every alerting rule's ``runbook_url`` (``<alerts.runbook_url>/<AlertName>.md``; the default
base ``../runbooks`` resolves from ``output/rules/`` to ``output/runbooks/``).

The template is chosen by the alert's kind (``Rule.kind``, e.g. ``exporter_down`` ->
``templates/runbooks/exporter_down.md.j2``); a kind without its own template uses
``generic.md.j2``. Diagnosis steps shared by several runbooks live in ``_steps.md.j2``.

A ``runbooks/`` folder next to the spec overrides them, so an installed gpumon can use a team's own
runbooks: ``<AlertName>.md.j2`` there is that alert's runbook, and a file named like a bundled
template (``<kind>.md.j2``, ``_steps.md.j2``, ``generic.md.j2``) replaces it. Those templates come
from the spec's repository, so they run in Jinja's sandbox (no Python attributes or calls beyond
plain data).
"""

from __future__ import annotations

import contextlib
import re
from collections import OrderedDict
from functools import lru_cache
from pathlib import Path

import jinja2

from .durations import format_duration
from .oneline import one_line
from .promqltext import quote
from .readers import files as inputs
from .runbooksandbox import MAX_OUTPUT, BoundedSandbox, OwnLoader, bounded, explain
from .rules import fresh, names
from .rules.model import Rule, RuleGroup
from .rules.output import CRD_PATH, PLAIN_PATH
from .rules.promql import num
from .spec import Spec
from . import writer
from .texts import templates_dir

RUNBOOK_PATH = "runbooks/{alert}.md"
#: the first line of a page rendered from a template of the spec's folder that does not say it
OWN_TEMPLATE_MARK = "Rendered by `gpumon render` from the spec's runbooks/ templates: edit the template, not this page"

#: the folder next to the spec whose templates replace the bundled ones
OVERRIDE_DIR = "runbooks"
#: dcgm-exporter's default listen port (dcgm-exporter ``--address`` default ``:9400``)
EXPORTER_PORT = 9400


def override_dir(spec: Spec) -> Path | None:
    """The spec's ``runbooks/`` template folder, or None when there is none (or the spec was not
    read from a file)."""
    folder = Path(spec.path).parent / OVERRIDE_DIR
    return folder if Path(spec.path).is_file() and folder.is_dir() else None


@lru_cache(maxsize=8)
def _env(own: str | None = None, limits: inputs.Limits = inputs.DEFAULT) -> jinja2.Environment:
    """The runbook templates: ``own`` (the spec's folder, read within ``limits``:
    :class:`gpumon.runbooksandbox.OwnLoader`) first, then the bundled ones."""
    bundled = jinja2.FileSystemLoader(str(templates_dir() / "runbooks"))
    loader = bundled
    if own:
        loader = OwnLoader(Path(own), limits, bundled)
    env = BoundedSandbox(
        loader=loader,
        undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
        keep_trailing_newline=True, autoescape=False,
    )
    env.filters["num"] = num
    env.filters["dur"] = format_duration
    # values in PromQL go through the one quoting function (issue #15, finding 2); in a shell
    # single-quoted string a ' ends the string, so it is written as '\''
    env.filters["promql"] = quote
    env.filters["sq"] = lambda value: str(value).replace("'", "'\\''")
    env.filters["code"] = code_span
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
        "inventory_group": fresh.inventory_group(spec),
        "crd_file": CRD_PATH.format(name=spec.name),
        "prometheus_rule": spec.prometheus_rule,
        "names": names,
        "spec_file": spec.path.rsplit("/", 1)[-1],
        "kube": spec.kubernetes,      # None without a `kubernetes` section
    }


class TemplateProblem(ValueError):
    """A runbook template of the spec's ``runbooks/`` folder cannot be rendered; the message names
    the file (and line, when Jinja knows it)."""


def code_span(value) -> str:
    """``value`` as a Markdown inline code span whose fence is longer than any run of backticks
    in it, so a spec value (a job name with a backtick) can never end the span early and inject
    Markdown (links, emphasis) into a runbook."""
    text = " ".join(str(value).splitlines())
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or (text.startswith(" ") and text.strip()) else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def render_one(spec: Spec, alert: str, rules: list[Rule], limits: inputs.Limits = inputs.DEFAULT) -> str:
    """The runbook of ``alert`` (all ``rules`` carrying that name) as Markdown; the spec's own
    templates are read within ``limits`` and rendered within the bounds of
    :mod:`gpumon.runbooksandbox`.

    Raises:
        TemplateProblem: a template of the spec's ``runbooks/`` folder has a syntax error, uses a
            variable the context lacks, breaks the sandbox's rules or bounds, or cannot be read.
        jinja2.TemplateError: the same in a bundled template (a programming error).
    """
    own = override_dir(spec)
    env = _env(str(own) if own else None, limits)
    kind = rules[0].kind or "generic"
    try:
        with bounded() if own else contextlib.nullcontext():
            template = env.select_template([f"{alert}.md.j2", f"{kind}.md.j2", "generic.md.j2"])
            text = template.render(**_context(spec, alert, rules))
        if len(text) > MAX_OUTPUT:
            raise TemplateProblem(f"runbook template {template.filename} (runbook of {alert}): the page has "
                                  f"{len(text)} characters, over the cap of {MAX_OUTPUT}")
    except TemplateProblem:
        raise
    except Exception as exc:     # noqa: BLE001 - every failure of the spec's own template is its error
        found = explain(exc) if own is not None else None
        if found is None:
            raise
        file, line, message = found
        place = f"{file}:{line}" if file and line else (file or one_line(own))
        raise TemplateProblem(f"{place}: {message} (runbook template for {alert})") from None
    text = "\n".join(line.rstrip() for line in text.strip().splitlines()) + "\n"
    text = re.sub(r"\n{3,}", "\n\n", text)
    if not writer.carries_mark(f"runbooks/{alert}.md", text.encode("utf-8")):
        # a template of the spec's folder need not say who rendered the page; gpumon removes or
        # replaces only files carrying its mark, so a hidden line says it
        text = f"<!-- {OWN_TEMPLATE_MARK} -->\n" + text
    return text


def files(spec: Spec, groups: list[RuleGroup], limits: inputs.Limits = inputs.DEFAULT) -> dict[str, str]:
    """Rendered runbooks keyed by path relative to the output folder, one per alert name of the
    ``groups`` built from ``spec`` (:func:`gpumon.rules.build_groups`); the spec's own templates
    are read within ``limits`` (``--follow-symlinks``, ``--max-input-mib``)."""
    return {RUNBOOK_PATH.format(alert=alert): render_one(spec, alert, rules, limits)
            for alert, rules in _alerts_by_name(groups).items()}
