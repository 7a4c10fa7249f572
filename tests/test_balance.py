"""Uneven streams give the in-process batches with workers. On the planned path (every length known) rows are
dealt by the schedule and never move; with unknown lengths, a row moves between workers mid-stream when one
worker holds what every batch waits for and another is idle."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence

import numpy as np
import pytest
from _invariants import collect
from _sources import CountingSource

from streamcli import StreamLoader


class UnevenSource(CountingSource):
    """Stream ``slow``'s steps take ``delay`` seconds each, the others' nothing; ``promised`` overrides what
    ``length()`` reports (a source that lies about a length is cut at the promise wherever it is read)."""

    def __init__(self, lengths: Sequence[int], slow: int, delay: float = 0.005,
                 promised: dict[int, int] | None = None, known: bool = True) -> None:  # fmt: skip
        super().__init__(lengths)
        self.slow, self.delay, self.promised, self.known = slow, delay, dict(promised or {}), known

    def length(self, item: int) -> int | None:
        return self.promised.get(item, self.lengths[item]) if self.known else None

    def open(self, item: int, start: int = 0) -> Iterator[dict[str, np.ndarray]]:
        for step in super().open(item, start):
            if item == self.slow:
                time.sleep(self.delay)
            yield step


def _run(
    src: CountingSource, state: dict[str, object], workers: int, boundary: str
) -> tuple[list[dict[str, np.ndarray]], int]:
    with StreamLoader(src, 4, 4, num_workers=workers, boundary=boundary) as loader:
        loader.load_state_dict(state)
        return collect(loader), loader.stats.rows_moved


@pytest.mark.slow
@pytest.mark.parametrize("boundary", ["pack", "pad"])
def test_a_row_moves_to_an_idle_worker_and_batches_do_not_change(boundary: str, no_leaks: None) -> None:
    lengths = [60] * 6
    # Lengths unknown (no plan). Resume one batch in: every row is live, and rows 0-1 start on worker 0, rows
    # 2-3 on worker 1 (their blocks). Make row 0's stream the slow one.
    with StreamLoader(UnevenSource(lengths, slow=-1, known=False), 4, 4, boundary=boundary) as loader:
        rows = next(iter(loader)).stream[0].tolist()
        state = loader.state_dict()
    want, _ = _run(UnevenSource(lengths, slow=rows[0], known=False), state, 0, boundary)
    got, moved = _run(UnevenSource(lengths, slow=rows[0], known=False), state, 2, boundary)
    assert moved >= 1  # worker 1 idled while worker 0 held row 0 (slow) and row 1 (cheap): row 1 moved
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        for name in a:
            np.testing.assert_array_equal(a[name], b[name], err_msg=name)


@pytest.mark.slow
@pytest.mark.parametrize(
    "kw",
    [
        dict(boundary="pack", epoch_end="pad"),
        dict(boundary="pad", epoch_end="restream"),
        dict(boundary="pack", epoch_end="drop", segment=7),
        dict(boundary="pack", epoch_end="pad", layout="BT"),
    ],
    ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items()),
)
def test_uneven_streams_give_the_same_batches_with_workers(kw: dict[str, object], no_leaks: None) -> None:
    # Two slow streams among cheap ones, two epochs from a fresh start: rows move whenever a worker idles while
    # the other holds the batch everything waits for; whatever moved, the batches are the in-process ones.
    lengths = [23, 5, 31, 17, 9, 40, 12, 28, 3, 19]
    runs = []
    for workers in (0, 2):
        src = UnevenSource(lengths, slow=5, delay=0.002, promised={2: 29})
        with StreamLoader(src, 4, 3, num_workers=workers, **kw) as loader:  # type: ignore[arg-type]
            runs.append([b for _ in range(2) for b in collect(loader)])
    assert len(runs[0]) == len(runs[1])
    for a, b in zip(*runs, strict=True):
        for name in a:
            np.testing.assert_array_equal(a[name], b[name], err_msg=name)
