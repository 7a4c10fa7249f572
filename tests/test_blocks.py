"""Sources that yield blocks of steps (``block_steps = True``): split across batches, checked per block."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from _invariants import collect
from _resume import check_resume
from _sources import CountingSource

from streamcli import StepSpecError, StreamLoader


class BlockCounting(CountingSource):
    """CountingSource's steps, yielded in blocks of ``size`` (the first starts exactly at ``start``)."""

    block_steps = True

    def __init__(self, lengths: list[int], size: int = 5, bad: str = "") -> None:
        super().__init__(lengths)
        self.size, self.bad = size, bad

    def open(self, item: int, start: int = 0) -> Iterator[dict[str, np.ndarray]]:  # type: ignore[override]
        n = self.lengths[item]
        for a in range(start, n, self.size):
            m = min(self.size, n - a)
            x = np.stack([np.full(m, item), np.arange(a, a + m)], axis=1).astype(np.int64)
            if self.bad == "shape":
                x = x[:, :1]
            if self.bad == "empty":
                x = x[:0]
            yield {"x": x}


LENGTHS = [13, 0, 7, 22, 1, 9]


@pytest.mark.parametrize("size", [1, 3, 8, 50])
@pytest.mark.parametrize("boundary", ["pad", "pack"])
def test_blocks_give_the_same_batches_as_steps(size: int, boundary: str) -> None:
    with StreamLoader(CountingSource(LENGTHS), 3, 4, boundary=boundary, seed=2) as a:
        want = collect(a)
    with StreamLoader(BlockCounting(LENGTHS, size), 3, 4, boundary=boundary, seed=2) as b:
        got = collect(b)
    assert len(want) == len(got)
    for x, y in zip(want, got, strict=True):
        assert all(np.array_equal(x[k], y[k]) for k in x)


def test_blocks_resume_and_segment() -> None:
    check_resume(lambda: BlockCounting(LENGTHS, 4), 2, 3, cuts=[2, 7, 11], segment=5)


@pytest.mark.slow
def test_blocks_in_workers() -> None:
    check_resume(lambda: BlockCounting(LENGTHS, 6), 3, 4, cuts=[3], workers_before=2, workers_after=0)


@pytest.mark.parametrize(("bad", "match"), [("shape", r"int64\[n, 2\]"), ("empty", "n >= 1")])
def test_a_bad_block_is_a_step_spec_error(bad: str, match: str) -> None:
    with StreamLoader(BlockCounting([5], 2, bad=bad), 1, 2) as loader:
        with pytest.raises(StepSpecError, match=match):
            collect(loader)
    assert StreamLoader.supports_blocks
