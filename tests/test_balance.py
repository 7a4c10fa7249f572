"""Uneven streams give the in-process batches with workers. By default, with every length known, each worker keeps a
block of rows; with unknown lengths, or ``balance=True`` (a source's ``costly_steps``), a row's next stream goes to
whichever worker is free, and a row moves between workers mid-stream when one worker holds what every batch waits
for and another is idle."""

from __future__ import annotations

import threading
import time
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _invariants import collect, to_numpy
from _resume import check_resume
from _sources import CountingSource

from streamcli import StreamLoader
from streamcli.errors import ConfigError


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
    and waits for ``go_<step>``. Lengths are unknown unless ``report_length``."""

    def __init__(self, lengths: Sequence[int], slow: int, gate: str, report_length: bool = False) -> None:
        super().__init__(lengths, report_length=report_length)
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
@pytest.mark.parametrize("known", [False, True], ids=["lengths unknown", "lengths known, balance=True"])
def test_a_row_moves_to_an_idle_worker_and_batches_do_not_change(boundary: str, known: bool, tmp_path: Path,
                                                                 no_leaks: None) -> None:  # fmt: skip
    lengths = [60] * 6
    # Resume one batch in: every row is live, and rows 0-1 start on worker 0, rows 2-3 on worker 1 (their
    # blocks). Row 0's stream is gated: it holds up every batch while worker 1 idles.
    free = GatedSource(lengths, slow=-1, gate=str(tmp_path), report_length=known)  # no stream gated
    with StreamLoader(free, 4, 4, boundary=boundary, balance=known or None) as loader:
        rows = next(iter(loader)).stream[0].tolist()
        state = loader.state_dict()
    with StreamLoader(free, 4, 4, boundary=boundary) as loader:
        loader.load_state_dict(state)
        want = collect(loader)
    src = GatedSource(lengths, slow=rows[0], gate=str(tmp_path), report_length=known)
    got, held = [], []
    with StreamLoader(src, 4, 4, num_workers=2, boundary=boundary, timeout=60, balance=known or None) as loader:
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


class BrokenPromises(UnevenSource):
    """``UnevenSource`` whose stream ``fails`` raises at step ``at`` (skipped under ``on_error="skip"``)."""

    def __init__(self, *args: Any, fails: int, at: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fails, self.at = fails, at

    def open(self, item: int, start: int = 0) -> Iterator[dict[str, np.ndarray]]:
        for p, step in enumerate(super().open(item, start), start):
            if item == self.fails and p == self.at:
                raise RuntimeError(f"corrupt step {p} of stream {item}")
            yield step


def _lying(delay: float = 0.002) -> BrokenPromises:
    # Stream 5 is slow; 2 runs past its promise, 4 ends before it, 7 fails at step 10.
    lengths = [23, 5, 31, 17, 9, 40, 12, 28, 3, 19]
    return BrokenPromises(lengths, slow=5, delay=delay, promised={2: 29, 4: 15}, fails=7, at=10)


@pytest.mark.slow
@pytest.mark.parametrize(
    "kw",
    [dict(boundary="pack"), dict(boundary="pad", epoch_end="restream"), dict(boundary="pack", segment=7)],
    ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items()),
)
def test_balanced_rows_give_the_same_batches_for_every_worker_count(kw: dict[str, Any], no_leaks: None) -> None:
    # Known lengths, balance=True: rows go to whichever worker is free, and broken promises (a stream that runs
    # past its length, one that ends before it, one that fails under "skip") change nothing between worker counts,
    # and each is reported once, however often rows moved (a row whose stream broke its promise never moves).
    runs, reports = [], []
    for workers in (0, 1, 2):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # the broken promises, reported in every run
            with StreamLoader(_lying(), 4, 3, num_workers=workers, balance=True, on_error="skip",
                              **kw) as loader:  # fmt: skip
                runs.append([b for _ in range(2) for b in collect(loader)])
                reports.append((loader.stats.length_mismatches, loader.stats.skipped))
    assert reports == [reports[0]] * 3 and reports[0][0] > 0 and reports[0][1] > 0
    for other in runs[1:]:
        assert len(other) == len(runs[0])
        for a, b in zip(runs[0], other, strict=True):
            for name in a:
                np.testing.assert_array_equal(a[name], b[name], err_msg=name)


@pytest.mark.slow
@pytest.mark.parametrize("boundary", ["pack", "pad"])
def test_a_restreaming_epoch_ends_where_planned_when_a_stream_runs_out_at_a_batch_end(
    boundary: str, no_leaks: None
) -> None:
    # Stream 0 promises 31 steps and has 30: with T=3 it runs out exactly at batch 9's end. Rows planned from the
    # lengths find that out when batch 10 reads it, so a first stream is still read after batch 9 and the epoch,
    # which restreams until every first stream is over, goes on; the engine that claimed rows at run time looked a
    # step ahead and knew it in batch 9, and used to end the epoch one batch early.
    runs = []
    for workers in (0, 2):
        src = BrokenPromises([30, 21], slow=-1, promised={0: 31}, fails=-1, at=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # the broken promise, reported in every run
            with StreamLoader(src, 4, 3, num_workers=workers, balance=True, boundary=boundary,
                              epoch_end="restream") as loader:  # fmt: skip
                runs.append([b for _ in range(2) for b in collect(loader)])
    assert len(runs[0]) == len(runs[1]) == 2 * 11
    for a, b in zip(*runs, strict=True):
        for name in a:
            np.testing.assert_array_equal(a[name], b[name], err_msg=name)


@pytest.mark.slow
@pytest.mark.parametrize(
    "kw",
    [dict(boundary="pack"), dict(boundary="pad", epoch_end="restream"), dict(boundary="pack", segment=7),
     dict(boundary="pad", segment=7, epoch_end="drop")],
    ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items()),
)  # fmt: skip
def test_balance_changes_no_batch_and_no_state(kw: dict[str, Any], no_leaks: None) -> None:
    # Balanced rows (balance=True, 2 workers) get the batches, and the states after every batch, of
    # rows planned from the lengths, broken promises included: a short or failed stream pads its row until its
    # promise either way, and a stream that runs past it is cut there.
    runs, first_epoch = [], 0
    for balance in (False, True):
        batches, states = [], []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            with StreamLoader(_lying(delay=0.0), 4, 3, balance=balance, on_error="skip", num_workers=2 * balance,
                              **kw) as loader:  # fmt: skip
                for _ in range(2):
                    for batch in loader:
                        batches.append(to_numpy(batch))
                        state = loader.state_dict()
                        states.append((state["epoch"], state["batch"], state["tickets"], state["rows"]))
                    first_epoch = first_epoch or len(batches)
        runs.append((batches, states))
    (planned, planned_states), (balanced, balanced_states) = runs
    assert len(planned) == len(balanced)
    for a, b in zip(planned, balanced, strict=True):
        for name in a:
            np.testing.assert_array_equal(a[name], b[name], err_msg=name)
    # A row whose stream ended exactly at a batch's end may read LIVE in one and SHORT in the other (only a
    # run-time row looks a step ahead); either state resumes to the same batches, whichever way it is loaded.
    assert [(e, k, t, [r[:2] for r in rows]) for e, k, t, rows in planned_states] == [
        (e, k, t, [r[:2] for r in rows]) for e, k, t, rows in balanced_states
    ]
    for cut in (2, 3, first_epoch - 2):
        for before in (False, True):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                with StreamLoader(_lying(delay=0.0), 4, 3, balance=before, on_error="skip", num_workers=2 * before,
                                  **kw) as loader:  # fmt: skip
                    it = iter(loader)
                    for _ in range(cut):
                        next(it)
                    state = loader.state_dict()
                    del it
                with StreamLoader(_lying(delay=0.0), 4, 3, balance=not before, on_error="skip",
                                  num_workers=2 * (not before), **kw) as loader:  # fmt: skip
                    loader.load_state_dict(state)
                    tail = collect(loader)
            assert len(tail) == first_epoch - cut
            for a, b in zip(planned[cut:], tail, strict=False):
                for name in a:
                    np.testing.assert_array_equal(a[name], b[name], err_msg=f"cut {cut}, {name}")


def test_balance_follows_the_sources_costly_steps() -> None:
    from streamcli_sources.video import VideoSource

    from streamcli.mix import Mix

    class Costly(CountingSource):
        costly_steps = True

    assert VideoSource.costly_steps
    # None: on from the start for costly steps, else left to the loader's measure; stats say whether it is on.
    for src, want in ((CountingSource([3, 4]), None), (Costly([3, 4]), True)):
        for balance, got in ((None, want), (True, True), (False, False)):
            with StreamLoader(src, 2, 2, balance=balance) as loader:
                assert loader.config.balance is got, (src, balance)
                assert loader.stats.balanced is (got is True)
    assert Mix({"a": CountingSource([3]), "b": Costly([4])}).costly_steps
    assert not Mix({"a": CountingSource([3]), "b": CountingSource([4])}).costly_steps
    with pytest.raises(ConfigError, match=r"balance='yes' must be True, False or None"):
        StreamLoader(CountingSource([3, 4]), 2, 2, balance="yes")  # type: ignore[arg-type]


@pytest.mark.slow
def test_balanced_rows_resume_exactly_across_worker_counts(no_leaks: None) -> None:
    # A cut anywhere, broken promises included, resumes to the batches of an uncut run, whichever side has workers.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        kw: dict[str, Any] = dict(boundary="pack", segment=7, balance=True, on_error="skip")
        check_resume(_lying, 4, 3, cuts=[2, 9, 17], workers_before=2, workers_after=0, **kw)
        check_resume(_lying, 4, 3, cuts=[5, 13], workers_before=0, workers_after=2, **kw)


@pytest.mark.slow
def test_balance_turns_on_mid_epoch_when_workers_read_costly_steps_unevenly(no_leaks: None) -> None:
    # No costly_steps, balance left to the loader: one long slow stream keeps one worker busy while the other
    # idles, so the epoch goes on balanced from the batch the consumer is at; the batches are the in-process ones.
    # The consumer holds its last 3 batches throughout: the balanced producers never write a slot it holds.
    lengths = [40, 12, 90, 30, 25, 35, 20, 45, 15, 30, 40, 25]
    runs, balanced = [], []
    for workers, balance in ((0, None), (2, None), (2, False)):
        with StreamLoader(UnevenSource(lengths, slow=2, delay=0.004), 4, 3, num_workers=workers, balance=balance,
                          boundary="pack", timeout=60 if workers else None) as loader:  # fmt: skip
            got: list[dict[str, np.ndarray]] = []
            held: list[tuple[Any, dict[str, np.ndarray]]] = []
            for batch in loader:
                got.append(to_numpy(batch))
                held = [*held[-2:], (batch, got[-1])]
                for kept, seen in held:
                    for name, value in to_numpy(kept).items():
                        np.testing.assert_array_equal(value, seen[name], err_msg=f"a held batch changed: {name}")
            del batch, held
            runs.append(got)
            balanced.append(loader.stats.balanced)
    assert balanced == [False, True, False]
    for other in runs[1:]:
        assert len(other) == len(runs[0])
        for a, b in zip(runs[0], other, strict=True):
            for name in a:
                np.testing.assert_array_equal(a[name], b[name], err_msg=name)
