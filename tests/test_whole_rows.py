"""A step source's whole row (its stream goes on past the batch) is read by the reader's short path: a stream that
runs out in the middle of such a row pads the rest of it, is reported once, and pads until its promise."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from streamcli import StreamLoader
from tests._sources import CountingSource


class EndsEarly(CountingSource):
    """Stream 0 promises 20 steps and has 6: it runs out inside its row's second batch (T=4)."""

    def open(self, item: int, start: int = 0) -> Iterator[dict[str, np.ndarray]]:
        for step in super().open(item, start):
            if item == 0 and int(step["x"][1]) >= 6:
                return
            yield step


def test_a_stream_that_runs_out_inside_a_whole_row_pads_the_rest_and_is_reported_once() -> None:
    with StreamLoader(EndsEarly([20, 9]), 1, 4, shuffle=False) as loader:
        with pytest.warns(RuntimeWarning, match="ended after 6 steps"):
            batches = [(b.index, b.valid[:, 0].tolist(), b.stream[:, 0].tolist(), b.position[:, 0].tolist())
                       for b in loader]  # fmt: skip
        assert loader.stats.length_mismatches == 1
    assert batches[:3] == [
        (0, [True] * 4, [0] * 4, [0, 1, 2, 3]),
        (1, [True, True, False, False], [0, 0, -1, -1], [4, 5, -1, -1]),  # the whole row, cut short at step 6
        (5, [True] * 4, [1] * 4, [0, 1, 2, 3]),  # batches 2-4 pad to the promised 20 steps (not handed out)
    ]
