"""Positions of findings in JSON dashboards: one regex pass gives the line and column ruamel.yaml
gave (the key a pointer ends at, or the list item), in about a second for a 1.6 MB dashboard."""

from __future__ import annotations

import json
import time
from pathlib import Path

from ruamel.yaml.comments import CommentedMap, CommentedSeq

from gpumon.readers import positions

ROOT = Path(__file__).resolve().parent.parent


def _ruamel(text: str, pointer: str) -> tuple[int, int]:
    """The position as the ruamel.yaml-based locator computed it."""
    node, pos = positions.yaml_loader().load(text), (0, 0)
    for token in [t.replace("~1", "/").replace("~0", "~") for t in pointer.split("/")[1:]]:
        if isinstance(node, CommentedMap) and token in node:
            pos, node = node.lc.key(token), node[token]
        elif isinstance(node, CommentedSeq) and token.isdigit() and int(token) < len(node):
            pos, node = node.lc.item(int(token)), node[int(token)]
        else:
            break
    return pos[0] + 1, pos[1] + 1


def _pointers(doc, base: str = ""):
    yield base
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield from _pointers(value, base + "/" + key.replace("~", "~0").replace("/", "~1"))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            yield from _pointers(value, f"{base}/{i}")


def test_same_positions_as_ruamel():
    texts = [(ROOT / "tests" / "data" / "diff" / "v1" / "dashboard.json").read_text(),
             '{"a":1,"a":{"b":2}}', '{"a\\"x":[1, {"c":[ [3], "s,]:{" ]}],"e":null}',
             '[{"x":1},{"y":[true,false]}]', '{\n  "k" : [\n    1 ,\n    2\n  ] }']
    texts += [p.read_text() for p in sorted((ROOT / "tests" / "lint_corpus").glob("*.json"))[:4]]
    for text in texts:
        locate = positions.json_locator(text, "d.json", 0, 0)
        for pointer in list(_pointers(json.loads(text)))[:200] + ["/nope", "/panels/999/x", "/a/b/c"]:
            got = locate(pointer)
            assert (got.line, got.column) == _ruamel(text, pointer), (text[:60], pointer)
    shifted = positions.json_locator('{\n "a": 1}', "cm.yaml", 10, 4)("/a")
    assert (shifted.line, shifted.column) == (12, 6)


def test_a_large_dashboard_is_located_in_about_a_second():
    """A 1.6 MB dashboard with one finding took 55 s to locate with ruamel.yaml."""
    panels = [{"id": i, "type": "stat", "title": f"p{i}", "gridPos": {"x": 0, "y": i, "w": 4, "h": 1},
               "targets": [{"expr": "up", "refId": "A"}]} for i in range(8_000)]
    text = json.dumps({"title": "d", "uid": "d", "panels": panels}, indent=1)
    assert 1 << 20 < len(text) <= positions.LOCATOR_MAX_CHARS
    start = time.process_time()
    where = positions.json_locator(text, "d.json", 0, 0)("/panels/7999/gridPos")
    assert time.process_time() - start < 5
    assert text.splitlines()[where.line - 1].strip().startswith('"gridPos"')
