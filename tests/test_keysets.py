"""validate's amended key sets behave as the plain sets they stand for, with every operation the
checks use, on either side of the operator."""

from __future__ import annotations

import random

from gpumon.validate.keysets import Amended


def test_an_amended_set_is_the_set_it_stands_for():
    rng = random.Random(7)
    for _ in range(200):
        base = {("job", f"n{rng.randrange(20)}", f"GPU-{i}") for i in range(rng.randrange(0, 60))}
        pool = sorted(base) + [("job", "x", f"GPU-new-{i}") for i in range(5)]
        less = set(rng.sample(pool, rng.randrange(0, len(pool) + 1)))
        more = set(rng.sample(pool, rng.randrange(0, len(pool) + 1)))
        plain = (base - less) | more
        amended = Amended(base, less, more)
        other = set(rng.sample(pool, rng.randrange(0, len(pool) + 1)))
        assert set(amended) == plain and len(amended) == len(plain) and bool(amended) == bool(plain)
        assert all((k in amended) == (k in plain) for k in pool)
        assert other - amended == other - plain and amended - other == plain - other
        assert other & amended == other & plain and amended & other == plain & other
        assert other | amended == other | plain and set().union(amended, other) == plain | other
        gone = set(rng.sample(pool, rng.randrange(0, 4)))
        assert set(amended.plus(gone)) == plain | gone
        assert type(other & amended) is set and type(other - amended) is set


def test_it_holds_the_few_keys_that_differ_not_a_copy():
    base = {("job", "n", f"GPU-{i}") for i in range(10_000)}
    amended = Amended(base, [("job", "n", "GPU-1")]).plus([("job", "m", "GPU-x")])
    assert amended.base is base and len(amended.less) == 1 and len(amended.more) == 1
    assert len(amended) == 10_000 and ("job", "n", "GPU-1") not in amended and ("job", "m", "GPU-x") in amended
