"""The lint checks, one module per check. Each module has ``ID``, a default ``SEVERITY``, a
docstring (what it catches, why, how to silence it) and ``check(inputs, ctx)`` yielding findings.
"""

from . import (absent_no_selector, absent_regex_matcher, annotation_labels, counter_fn_on_gauge,
               dashboard_datasource_placeholder, dashboard_deprecated_panel, dashboard_duplicate_panel_id,
               dashboard_hardcoded_datasource, dashboard_overlapping_panels, dashboard_variable_anchor,
               delta_on_counter, for_missing, label_name_mismatch, mig_sum, object_size, promql_syntax,
               rate_window, recording_cardinality, rule_invalid, rule_selector_labels, runbook_url, unknown_metric,
               volatile_identity)

#: Every check, in report order: rules and queries first, then PrometheusRule objects, then dashboards.
ALL = (
    rule_invalid, promql_syntax, unknown_metric, counter_fn_on_gauge, delta_on_counter, absent_no_selector,
    absent_regex_matcher, for_missing, rate_window, volatile_identity, mig_sum, recording_cardinality,
    annotation_labels, runbook_url,
    label_name_mismatch, rule_selector_labels, object_size, dashboard_datasource_placeholder,
    dashboard_hardcoded_datasource,
    dashboard_duplicate_panel_id, dashboard_overlapping_panels, dashboard_deprecated_panel,
    dashboard_variable_anchor,
)
