"""Property test: random and hostile dashboards and rule files given to ``gpumon lint``, ``gpumon
diff`` and the offline half of ``validate --dashboards`` (reading, variable resolution with a
server that answers nothing, interpolation, the PromQL caps). None may raise (an exception is an
exit 4 in the CLI) or take long. Drawn: PromQL-ish text from operator, bracket, quote, variable
and macro fragments (long ``or`` chains and deep brackets included), Grafana variables with
regexes and custom values, JSON trees of any shape, YAML with flow and block nesting.

The fast tier runs :data:`FAST_EXAMPLES` examples (a few seconds), the slow tier :data:`EXAMPLES`,
both derandomized (the same examples every run); ``GPUMON_FUZZ_INPUT_EXAMPLES`` sets the slow
tier's count and ``GPUMON_FUZZ_RANDOM=1`` draws new examples."""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from gpumon.diff import compare
from gpumon.diff.sources import SourceError, read
from gpumon.lint import lint
from gpumon.promapi import PromError
from gpumon.readers import loader
from gpumon.spec import default_spec_path, load_spec
from gpumon.validate.dashboards import prepare, _NO_DATA_TYPES
from gpumon.validate.dashboards import variables as dash_vars
from gpumon.validate.dashboards.timing import Timing

EXAMPLES = int(os.environ.get("GPUMON_FUZZ_INPUT_EXAMPLES", "300"))
FAST_EXAMPLES = 5
#: seconds one example may take (the slowest legitimate one reads a few files and lints them)
BOUND = 5.0
# no shrinking: a failing example of this size takes minutes to shrink; hypothesis prints it whole
SETTINGS = dict(deadline=None, database=None, derandomize=os.environ.get("GPUMON_FUZZ_RANDOM") != "1",
                phases=[Phase.explicit, Phase.generate],
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])

FRAGMENTS = ["up", "rate(", "sum by (gpu) (", ")", "(", "[5m]", "[$__rate_interval]", "{", "}", 'job="x"',
             'gpu=~"$gpu"', " or ", " and ", " unless ", " + ", " / ", " > ", " == bool ", "vector(0)", "$var",
             "${var:regex}", "[[var]]", "$__interval", '"', "'", "`", "\\", "offset 5m", "@ end()", "1e308",
             "histogram_quantile(0.9, ", "label_replace(up, \"a\", \"$1\", \"b\", \"(.*)\")", "ü", "\x00", "#"]
promqlish = st.one_of(
    st.lists(st.sampled_from(FRAGMENTS), max_size=30).map("".join),
    st.text(max_size=60),
    st.integers(0, 3000).map(lambda n: " or ".join(["up"] * n)),
    st.integers(0, 3000).map(lambda n: "(" * n + "up" + ")" * n),
    st.integers(0, 300).map(lambda n: "sum(" * n + "up" + ")" * n),
)
regexes = st.one_of(st.just(""), st.just("/^(a+)+$/"), st.just("/(?<value>.*)/"), st.just("/(?=x)/"),
                    st.text(max_size=20).map(lambda t: f"/{t}/i"))
variable = st.fixed_dictionaries({
    "name": st.sampled_from(["var", "gpu", "x", ""]),
    "type": st.sampled_from(["query", "custom", "constant", "textbox", "interval", "datasource", "adhoc", "weird"]),
    "query": st.one_of(promqlish, st.builds(lambda e: f"label_values({e}, gpu)", promqlish),
                       st.builds(lambda e: f"query_result({e})", promqlish),
                       st.integers(0, 5000).map(lambda n: ",".join(f"v{i}" for i in range(n)))),
    "regex": regexes, "multi": st.booleans(), "includeAll": st.booleans(),
    "allValue": st.one_of(st.none(), st.just(".*"), st.text(max_size=5)),
    "current": st.one_of(st.none(), st.fixed_dictionaries({"value": st.one_of(st.text(max_size=5),
                                                                                st.lists(st.text(max_size=5)))})),
})
json_leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=10))
json_any = st.recursive(json_leaf, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                           st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                        max_leaves=20)
target = st.fixed_dictionaries({"refId": st.text(max_size=3), "expr": st.one_of(promqlish, json_any)},
                               optional={"instant": st.booleans(), "hide": st.booleans(), "datasource": json_any})
panel = st.fixed_dictionaries({"type": st.sampled_from(["timeseries", "stat", "row", "text", "table"]),
                               "targets": st.one_of(st.lists(target, max_size=3), json_any)},
                              optional={"panels": st.lists(st.fixed_dictionaries({"targets": st.lists(target, max_size=2)}),
                                                           max_size=2), "datasource": json_any, "id": json_any})
dashboard = st.fixed_dictionaries({"title": st.text(max_size=10), "panels": st.one_of(st.lists(panel, max_size=5), json_any),
                                   "templating": st.fixed_dictionaries({"list": st.lists(variable, max_size=3)})})
rule = st.fixed_dictionaries({"expr": st.one_of(promqlish, json_any)},
                             optional={"alert": st.text(max_size=10), "record": st.text(max_size=10), "for": json_any,
                                       "labels": json_any, "annotations": json_any})
rule_file = st.fixed_dictionaries({"groups": st.one_of(st.lists(st.fixed_dictionaries(
    {"name": st.text(max_size=5), "rules": st.one_of(st.lists(rule, max_size=4), json_any)}), max_size=2), json_any)})
nesting = st.integers(0, 3000).flatmap(lambda n: st.sampled_from([
    "[" * n + "]" * n, "a: " + "{a: " * n + "1" + "}" * n, "".join("  " * i + "- \n" for i in range(min(n, 400)))]))


def _dump_yaml(doc) -> str:
    """YAML as a person writes it, or as JSON (also YAML) when a value has no plain form."""
    import yaml

    try:
        return yaml.safe_dump(doc, allow_unicode=True)
    except yaml.YAMLError:
        return json.dumps(doc)


@pytest.fixture(scope="module")
def spec():
    return load_spec(default_spec_path())


def _write(folder: Path, dashboards: list, rules: list, raw: list[str]) -> None:
    for i, d in enumerate(dashboards):
        (folder / f"d{i}.json").write_text(json.dumps(d), encoding="utf-8")
    for i, r in enumerate(rules):
        (folder / f"r{i}.rules.yaml").write_text(_dump_yaml(r), encoding="utf-8")
    for i, text in enumerate(raw):
        (folder / f"x{i}.yaml").write_text(text, encoding="utf-8", errors="replace")


def _offline_validate(folder: Path) -> None:
    """validate --dashboards up to the first query: reading, variables (a server answering
    nothing), interpolation and the caps of every panel."""
    inputs = loader.load([folder])
    tm = Timing(0.0, 3600.0, 15.0, 60.0, 15.0)

    def no_answer(kind, *args):
        return PromError("connection", "http://127.0.0.1:9", "fuzz: no server")

    for dash in inputs.dashboards:
        resolved = dash_vars.resolve(dash.variables, no_answer, tm.macros(), "http://127.0.0.1:9")
        for p in dash.panels:
            if p.type not in _NO_DATA_TYPES:
                prepare(dash, p, resolved, 3600.0, 3600.0, 15.0)


INPUTS = dict(dashboards=st.lists(dashboard, max_size=2), rules=st.lists(rule_file, max_size=2),
              raw=st.lists(st.one_of(nesting, st.text(max_size=200)), max_size=2))


@settings(max_examples=FAST_EXAMPLES, **SETTINGS)
@given(**INPUTS)
def test_hostile_inputs_never_raise_and_stay_fast(spec, dashboards, rules, raw):
    check_inputs(spec, dashboards, rules, raw)


@pytest.mark.slow
@settings(max_examples=EXAMPLES, **SETTINGS)
@given(**INPUTS)
def test_hostile_inputs_never_raise_and_stay_fast_many(spec, dashboards, rules, raw):
    check_inputs(spec, dashboards, rules, raw)


def check_inputs(spec, dashboards, rules, raw) -> None:
    """lint, diff and the offline half of validate --dashboards on the drawn files: no exception,
    findings with messages, within :data:`BOUND` seconds."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        _write(folder, dashboards, rules, raw)
        start = time.monotonic()
        report = lint([folder], spec)
        assert all(f.message for f in report.findings)
        try:
            compare(read(str(folder)), read(str(folder)), "a", "b")
        except SourceError as exc:
            assert str(exc)
        _offline_validate(folder)
        assert time.monotonic() - start < BOUND
