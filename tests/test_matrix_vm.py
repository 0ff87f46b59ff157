"""The fault-scenario matrix (issue 11) on the other engine: every scenario of
tests/matrix_cases.py on one VictoriaMetrics, with vmalert replaying the rendered rules over all of
them (tests/matrix_vm.py). Each pages exactly the expected alerts, each once, and nothing else;
where vmalert + VictoriaMetrics genuinely differ a case says so (``Case.vm_pages``, explained in
docs/matrix.md). Two scenarios with wrong expectations ride along in the same replay to show the
comparison can fail."""

from __future__ import annotations

import struct

import pytest

from generator.simulate import Fault
from tests import matrix, matrix_vm
from tests.matrix_cases import CASES

WRONG = [matrix.Case("expects nothing, a node is down", (), (Fault("http500", node="gpu-node-2"),), bound=6),
         matrix.Case("expects the wrong GPU", (matrix.Page("GpuLost", "gpu-node-2", 0),),
                     (Fault("drop", node="gpu-node-2", gpu=1),), bound=10)]


@pytest.fixture(scope="module")
def replayed():
    """One VictoriaMetrics, one vmalert replay per spec, every scenario (and :data:`WRONG`)."""
    outcomes, seconds, log = matrix_vm.run(CASES + WRONG)
    print(f"\n{matrix_vm.table(outcomes)}\n{len(outcomes)} scenarios on vmalert in {seconds:.1f}s")
    return outcomes, log


def test_every_scenario_pages_exactly_as_expected_on_vmalert(replayed):
    outcomes, log = replayed
    failed = [(o.case.name, o.seen) for o in outcomes[:len(CASES)] if not o.ok]
    assert not failed, (failed, log[-3000:])


def test_a_wrong_expectation_fails_on_vmalert(replayed):
    outcomes, _ = replayed
    down, wrong = outcomes[len(CASES):]
    assert not down.ok and not wrong.ok
    assert down.seen[matrix.AT + 6] == ['{Hostname="gpu-node-2", alertname="GpuExporterDown"}']
    assert wrong.seen[matrix.AT + 10] == ['{Hostname="gpu-node-2", alertname="GpuLost", gpu="1"}']


def test_remote_write_encoding_keeps_the_staleness_marker():
    """The hand-written remote-write body: a sample is field 1 (double, fixed64) then field 2
    (int64 timestamp, varint); a staleness marker keeps its NaN bit pattern; the snappy block
    of literals starts with the uncompressed length."""
    body = matrix_vm.write_request([({"__name__": "up", "job": "x"}, [(1000, 1.0), (2000, "stale")])])
    assert bytes.fromhex("7ff0000000000002")[::-1] in body
    assert b"\x09" + struct.pack("<d", 1.0) + b"\x10\xe8\x07" in body   # 1.0 at 1000 ms
    assert b"\x10\xd0\x0f" in body                                           # 2000 ms
    block = matrix_vm.snappy_block(body)
    assert block[0] == len(body) and block.endswith(body)
    big = matrix_vm.snappy_block(b"a" * 70000)
    assert big[:3] == bytes([0xF0, 0xA2, 0x04]) and len(big) == 70000 + 3 + 3 + 3
