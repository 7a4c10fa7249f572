"""Rows that move often between two workers change no byte: a source whose streams cost very unevenly keeps one
worker busy while the other idles, so rows move at many batch boundaries, with every length known and with none,
and the batches and states are those of ``num_workers=0``. Streams that break their promise (one ends early, one
fails mid-stream, one runs past it) are among them: a row whose stream broke its promise must not move, even when
it breaks it in the very batch its move was agreed for."""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from _invariants import to_numpy
from _sources import CountingSource

from streamcli import StreamLoader

LENGTHS = [23, 5, 31, 17, 9, 40, 12, 28, 3, 19, 26, 8, 14, 33, 6, 21] * 3


class Lopsided(CountingSource):
    """Every fifth stream reads each step in ``delay`` seconds, the others at once. Stream 2 runs past its
    promise, stream 4 ends before it, and stream 7 fails at step 10 (where lengths are reported)."""

    def __init__(self, known: bool, delay: float = 0.006) -> None:
        super().__init__(LENGTHS, report_length=known)
        self.delay = delay

    def length(self, item: int) -> int | None:
        return {2: 29, 4: 15}.get(item, LENGTHS[item]) if self.report_length else None

    def open(self, item: int, start: int = 0) -> Iterator[dict[str, np.ndarray]]:
        for p, step in enumerate(super().open(item, start), start):
            if item == 7 and p == 10:
                raise RuntimeError(f"corrupt step {p} of stream {item}")
            if item % 5 == 0:
                time.sleep(self.delay)
            yield step


def _run(workers: int, known: bool, **kw: Any) -> tuple[list[dict[str, np.ndarray]], list[Any], int]:
    """Two epochs' batches, the state after each, and the rows moved."""
    batches, states = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the broken promises, reported in every run
        with StreamLoader(Lopsided(known), 6, 3, num_workers=workers, balance=bool(workers), on_error="skip",
                          timeout=60 if workers else None, **kw) as loader:  # fmt: skip
            for _ in range(2):
                for batch in loader:
                    batches.append(to_numpy(batch))
                    s = loader.state_dict()
                    states.append((s["epoch"], s["batch"], s["tickets"], s["rows"]))
            return batches, states, loader.stats.rows_moved


@pytest.mark.slow
@pytest.mark.parametrize("segment", [0, 7], ids=["whole streams", "segment=7"])
@pytest.mark.parametrize("boundary", ["pack", "pad"])
@pytest.mark.parametrize("known", [True, False], ids=["lengths known", "lengths unknown"])
def test_rows_that_move_often_change_no_batch_and_no_state(known: bool, boundary: str, segment: int,
                                                           no_leaks: None) -> None:  # fmt: skip
    want, want_states, _ = _run(0, known, boundary=boundary, segment=segment)
    got, got_states, moved = _run(2, known, boundary=boundary, segment=segment)
    assert moved >= 1, "no row moved: the test did not exercise the protocol"
    assert len(got) == len(want)
    for k, (a, b) in enumerate(zip(want, got, strict=True)):
        for name in a:
            np.testing.assert_array_equal(a[name], b[name], err_msg=f"batch {k}, {name} ({moved} rows moved)")
    assert got_states == want_states
