"""The two API calls the dashboard check needs beyond :class:`~gpumon.promapi.PromClient`'s
own methods (range queries, label values), made through the client's :meth:`get` so auth,
tenant headers, redirects and error envelopes are handled in the one place they live, and their
answers checked for the shapes the API documents as the client's own are
(:func:`~gpumon.promanswer.result_items`): a malformed answer is a ``not-json`` server error
naming the URL, never an item a panel's verdict or drawing trips on."""

from __future__ import annotations

from ...promanswer import result_items, shape_error
from ...promapi import Answer, PromClient


def query_range(client: PromClient, expr: str, start: float, end: float, step: float) -> Answer:
    """``/api/v1/query_range``; ``data`` becomes the list of ``{"metric", "values"}`` (a vector,
    scalar or string answer: its samples, as :meth:`PromClient.query` gives them).

    Raises:
        PromError(kind="not-json"): the answer is not one of those shapes.
    """
    params = {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}",
              **client.query_params}
    ans = client.get("/api/v1/query_range", params)
    items = result_items(ans.data)
    if items is None:
        raise shape_error(client.base + "/api/v1/query_range", "query_range", ans.data)
    ans.data = items
    return ans


def _strings(client: PromClient, path: str, what: str, ans: Answer) -> Answer:
    """``ans`` with ``data`` a list of strings (None: none); anything else a shape error."""
    data = [] if ans.data is None else ans.data
    if not isinstance(data, list) or not all(isinstance(v, str) for v in data):
        raise shape_error(client.base + path, what, ans.data)
    ans.data = data
    return ans


def label_values(client: PromClient, label: str, match: str | None, start: float, end: float) -> Answer:
    """``/api/v1/label/<label>/values`` (with ``match[]`` when given) over ``[start, end]``."""
    params = {"start": f"{start:.3f}", "end": f"{end:.3f}"}
    if match:
        params["match[]"] = match
    path = f"/api/v1/label/{label}/values"
    return _strings(client, path, "label values", client.get(path, params))


def labels(client: PromClient, start: float, end: float) -> Answer:
    """``/api/v1/labels`` over ``[start, end]``."""
    path = "/api/v1/labels"
    return _strings(client, path, "labels", client.get(path, {"start": f"{start:.3f}", "end": f"{end:.3f}"}))
