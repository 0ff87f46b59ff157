"""Label inference and Grafana substitution used by the lint checks (Prometheus semantics from
promql/engine.go: aggregations, one-to-one on(), group_left, absent, label_replace, or)."""

from __future__ import annotations

import pytest

from gpumon.readers import grafana, promql
from gpumon.readers.model import MACRO_WINDOW


def labels(expr: str, records=None):
    ast, err = promql.parse(expr)
    assert err is None, err
    return promql.output_labels(ast, (records or {}).get)


@pytest.mark.parametrize("expr, present, absent", [
    ("max by (job, UUID) (x)", ["job", "UUID"], ["Hostname"]),
    ("max without (instance) (x)", ["UUID", "Hostname"], ["instance"]),
    ("sum(x)", [], ["job"]),
    ("x > 5", ["anything"], []),
    ('absent(x{job="a",Hostname=~"b"})', ["job"], ["Hostname"]),
    ("a / on (job) b", ["job"], ["UUID"]),
    ("a / on (job) group_left (Hostname) max by (job, Hostname) (b)", ["UUID", "Hostname"], []),
    ("max by (job) (a) and on (job) b", ["job"], ["UUID"]),
    ("max by (job) (a) or max by (UUID) (b)", ["job", "UUID"], ["gpu"]),
    ('label_replace(max by (job) (x), "reason", "r", "", "")', ["job", "reason"], ["UUID"]),
    ('count_values("v", max by (job) (x))', ["v"], ["job"]),
    ('count_values by (job) ("v", x)', ["job", "v"], ["UUID"]),
    ("topk(3, max by (gpu) (x))", ["gpu"], ["job"]),
])
def test_output_labels(expr, present, absent):
    ls = labels(expr)
    for name in present:
        assert ls.may_have(name), (expr, name)
    for name in absent:
        assert not ls.may_have(name), (expr, name)


def test_recording_rule_labels_resolve():
    records = {"job_gpu:inv:group": promql.LabelSet(False, frozenset({"job", "Hostname", "UUID"}))}
    ls = labels("job_gpu:inv:group unless on (job, UUID) y", records)
    assert ls.may_have("Hostname") and not ls.may_have("instance")


def test_grafana_substitution_keeps_strings_and_replaces_windows():
    variables = {"Hostname": {"type": "query"}, "res": {"type": "interval"}, "n": {"type": "custom",
                                                                                   "current": {"value": "5"}}}
    text = grafana.substitute('topk($n, rate(x{Hostname=~"$Hostname"}[$__rate_interval])) + '
                              'avg_over_time(y[$res]) / $__range_s + z offset $res', variables)
    assert text == (f'topk(5, rate(x{{Hostname=~"$Hostname"}}[{MACRO_WINDOW}s])) + '
                    f'avg_over_time(y[{MACRO_WINDOW}s]) / {MACRO_WINDOW} + z offset {MACRO_WINDOW}s')
    assert promql.parse(text)[1] is None


@pytest.mark.parametrize("query, expected", [
    ("label_values(DCGM_FI_DEV_GPU_TEMP{job=\"a\", x=~\"b,c\"}, Hostname)",
     ('DCGM_FI_DEV_GPU_TEMP{job="a", x=~"b,c"}', "Hostname")),
    ("label_values(Hostname)", (None, "Hostname")),
    ("query_result(max by (job) (up))", ("max by (job) (up)", None)),
    ("label_names()", (None, None)),
])
def test_split_variable_query(query, expected):
    assert grafana.split_variable_query(query) == expected
