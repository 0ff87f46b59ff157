"""The two API calls the dashboard check needs beyond :class:`~gpumon.promapi.PromClient`'s
own methods (range queries, label values), made through the client's :meth:`get` so auth,
tenant headers, redirects and error envelopes are handled in the one place they live."""

from __future__ import annotations

from ... import redact
from ...promapi import Answer, PromClient, PromError


def query_range(client: PromClient, expr: str, start: float, end: float, step: float) -> Answer:
    """``/api/v1/query_range``; ``data`` becomes the list of ``{"metric", "values"}``."""
    params = {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}",
              **client.query_params}
    ans = client.get("/api/v1/query_range", params)
    data = ans.data if isinstance(ans.data, dict) else {}
    if data.get("resultType") not in ("matrix", "vector", "scalar", "string"):
        raise PromError("not-json", client.base + "/api/v1/query_range", f"unexpected answer: {redact.clip(str(ans.data), 200)}")
    result = data.get("result")
    ans.data = result if isinstance(result, list) else []
    return ans


def label_values(client: PromClient, label: str, match: str | None, start: float, end: float) -> Answer:
    """``/api/v1/label/<label>/values`` (with ``match[]`` when given) over ``[start, end]``."""
    params = {"start": f"{start:.3f}", "end": f"{end:.3f}"}
    if match:
        params["match[]"] = match
    ans = client.get(f"/api/v1/label/{label}/values", params)
    ans.data = [str(v) for v in ans.data] if isinstance(ans.data, list) else []
    return ans


def labels(client: PromClient, start: float, end: float) -> Answer:
    """``/api/v1/labels`` over ``[start, end]``."""
    ans = client.get("/api/v1/labels", {"start": f"{start:.3f}", "end": f"{end:.3f}"})
    ans.data = [str(v) for v in ans.data] if isinstance(ans.data, list) else []
    return ans
