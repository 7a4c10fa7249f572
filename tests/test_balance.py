"""Uneven streams give the in-process batches with workers. On the planned path (every length known) rows are
dealt by the schedule and never move; with unknown lengths, a row moves between workers mid-stream when one
worker holds what every batch waits for and another is idle."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest
from _invariants import collect, to_numpy
from _sources import CountingSource

from streamcli import StreamLoader


class UnevenSource(CountingSource):
    """Stream ``slow``'s steps take ``delay`` seconds each, the others' nothing; ``promised`` overrides what
    ``length()`` reports (a source that lies about a length is cut at the promise wherever it is read)."""

    def __init__(self, lengths: Sequence[int], slow: int, delay: float = 0.005,
                 promised: dict[int, int] | None = None) -> None:  # fmt: skip
        super().__init__(lengths)
        self.slow, self.delay, self.promised = slow, delay, dict(promised or {})

    def length(self, item: int) -> int | None:
        return self.promised.get(item, self.lengths[item])

    def open(self, item: int, start: int = 0) -> Iterator[dict[str, np.ndarray]]:
        for step in super().open(item, start):
            if item == self.slow:
                time.sleep(self.delay)
            yield step


class GatedSource(CountingSource):
    """Stream ``slow`` reads a step only when the test lets it: it writes ``ask_<step>`` into the folder ``gate``
    and waits for ``go_<step>``. Lengths are unknown (no plan)."""

    def __init__(self, lengths: Sequence[int], slow: int, gate: str) -> None:
        super().__init__(lengths, report_length=False)
        self.slow, self.gate = slow, gate

    def open(self, item: int, start: int = 0) -> Iterator[dict[str, np.ndarray]]:
        for p, step in enumerate(super().open(item, start), start):
            if item == self.slow:
                Path(self.gate, f"ask_{p}").touch()
                go, deadline = Path(self.gate, f"go_{p}"), time.monotonic() + 60
                while not go.exists():
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"the test never let step {p} of stream {item} be read")
                    time.sleep(1e-3)
            yield step


def _let_steps_through_while_a_worker_idles(loader: StreamLoader, gate: Path, stop: threading.Event) -> None:
    """The test's side of the gate: a step of the gated stream is read only while a worker is idle. The one
    reading it is not (it is inside a piece of work), so the other is: it stays idle while the gated stream's
    owner is the one every batch waits for."""
    control = loader.ring.control
    while not stop.is_set():
        for ask in gate.glob("ask_*"):
            go = gate / f"go_{ask.name[4:]}"
            if not go.exists() and (control.idle_elsewhere(0) or control.idle_elsewhere(1)):
                go.touch()
        time.sleep(1e-3)


@pytest.mark.slow
@pytest.mark.parametrize("boundary", ["pack", "pad"])
def test_a_row_moves_to_an_idle_worker_and_batches_do_not_change(boundary: str, tmp_path: Path, no_leaks: None) -> None:
    lengths = [60] * 6
    # Lengths unknown (no plan). Resume one batch in: every row is live, and rows 0-1 start on worker 0, rows
    # 2-3 on worker 1 (their blocks). Row 0's stream is gated: it holds up every batch while worker 1 idles.
    free = GatedSource(lengths, slow=-1, gate=str(tmp_path))  # no stream gated
    with StreamLoader(free, 4, 4, boundary=boundary) as loader:
        rows = next(iter(loader)).stream[0].tolist()
        state = loader.state_dict()
    with StreamLoader(free, 4, 4, boundary=boundary) as loader:
        loader.load_state_dict(state)
        want = collect(loader)
    src = GatedSource(lengths, slow=rows[0], gate=str(tmp_path))
    got, held = [], []
    with StreamLoader(src, 4, 4, num_workers=2, boundary=boundary, timeout=60) as loader:
        loader.load_state_dict(state)
        stop = threading.Event()
        gate = threading.Thread(target=_let_steps_through_while_a_worker_idles, args=(loader, tmp_path, stop))
        gate.start()
        try:
            for batch in loader:
                got.append(to_numpy(batch))
                if not loader.stats.rows_moved and len(held) < 8:
                    held.append(batch)  # no slot returns, so no batch is handed out that would wake worker 1
                else:
                    held.clear()
            moved = loader.stats.rows_moved
        finally:
            stop.set()
            gate.join()
        del batch, held
    # Worker 0 held row 0 (gated) and row 1 (cheap) while worker 1 idled: at its next batch row 1 moved.
    assert moved >= 1
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
