"""Streams of unknown length on the one schedule (issue 35 §1): a length not known is found as the plan reads the
stream (``scheduled.claims.Probe``), and the plans are those the true lengths give."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _invariants import collect
from _sources import CountingSource

from streamcli import StreamLoader
from streamcli.fills import writers
from streamcli.scheduled import cursor as _cursor
from streamcli.scheduled.claims import OPEN
from streamcli.scheduled.cursor import RowPhase
from streamcli.scheduled.schedule import Schedule

LENGTHS = [3, 11, 5, 0, 20, 1, 9, 0, 14, 2, 4, 4]


def _schedule(lengths: list[int], known: bool | str, start: np.ndarray, *, pack: bool, restream: bool) -> Schedule:
    """``known``: every length, none, or "half" (the odd items' only: an epoch that mixes open and known bounds)."""
    order = np.array(
        [(i, 0, 0, n if known is True or (known == "half" and i % 2) else -1) for i, n in enumerate(lengths)], np.int64
    )
    return Schedule(order, start, 0, 0, T=4, pack=pack, segment=0, restream=restream)


def _content(plan: Any) -> dict[str, Any]:
    """What a plan puts in the batch, whole rows as runs (a stream's ``stop`` and promised length are the plan's
    own business)."""
    cols = zip(plan.whole.tolist(), plan.item.tolist(), plan.pos.tolist(), plan.replay.tolist(), strict=True)
    whole = [(b, 0, 4, item, pos, replay, False) for b, item, pos, replay in cols]  # a run through the batch
    return {
        "runs": sorted([r[:7] for r in plan.runs] + whole),
        "pads": sorted(plan.pads),
        "cursors": plan.cursors.tolist(),
        "claims": plan.claims.tolist(),
        "dry": plan.dry.tolist(),
    }


@pytest.mark.parametrize("unknown", [False, "half"])
@pytest.mark.parametrize("restream", [False, True])
@pytest.mark.parametrize("pack", [True, False])
def test_unknown_lengths_found_by_reading_plan_what_the_true_lengths_plan(
    pack: bool, restream: bool, unknown: bool | str
) -> None:
    calls: list[tuple[int, ...]] = []

    def probe(b: int, item: int, pos: int, t0: int, n: int, fresh: bool) -> int:
        calls.append((b, item, pos, t0, n, fresh))
        left = LENGTHS[item] - pos
        return left if left <= n else OPEN  # (ended within the steps asked for, or a step after them exists)

    resumed = _cursor.fresh(5)
    resumed[1] = _cursor.record(4, 6, RowPhase.LIVE, False, False)  # a row resumed mid-stream reopens it
    resumed[3] = _cursor.record(2, 3, RowPhase.LIVE, False, False)  # ... and finds its end in the batch
    for start in (_cursor.fresh(5), resumed):
        known = _schedule(LENGTHS, True, start, pack=pack, restream=restream)
        found = _schedule(LENGTHS, unknown, start, pack=pack, restream=restream)
        for _ in range(25):
            assert _content(found.next_plan(probe)) == _content(known.next_plan())
    assert calls and all(1 <= n <= 4 and t0 + n == 4 for _, _, _, t0, n, _ in calls)
    # A resumed stream whose reopen finds it over (it ended at the cut): the row claims at the batch's start.
    over = _cursor.fresh(2)
    over[1] = _cursor.record(2, 5, RowPhase.LIVE, False, False)
    plan = _schedule(LENGTHS, unknown, over, pack=pack, restream=restream).next_plan(probe)
    assert plan.claims[1] == 1 and all(n > 0 for _, _, n, *_ in plan.runs)
    assert [r[:2] + r[6:7] for r in plan.runs if r[0] == 1] == [(1, 0, True)]


def test_unknown_lengths_are_planned_on_the_schedule_unless_rows_are_balanced() -> None:
    def choose(W: int, fixed: bool = False) -> writers.Planned | None:
        return writers.choose(by_batch=False, w=0, W=W, B=4, known=False, balanced=False, fixed=fixed)

    assert choose(1) == writers.RowBlocks(0, 1, 4)
    assert choose(2) == writers.Balanced(0, 2, 4, known=False)  # (rows move to an idle worker unless balance=False)
    assert choose(2, fixed=True) == writers.RowBlocks(0, 2, 4)  # (claims by turns, ``fills.iterators``)


@pytest.mark.parametrize("boundary", ["pack", "pad"])
@pytest.mark.parametrize("segment", [0, 3])
def test_an_in_process_epoch_of_unknown_lengths_runs_on_the_schedule_and_reads_each_step_once(
    boundary: str, segment: int
) -> None:
    # Every next() is one step written: the look-ahead step is held, never read twice or dropped. Segments of an
    # item of unknown length follow on its row, each one's first step marked.
    source = CountingSource(LENGTHS, report_length=False)
    with StreamLoader(source, 3, 4, seed=2, boundary=boundary, segment=segment or None) as loader:
        batches = [(int(b.valid.sum()), int(b.is_first.sum())) for b in loader]
    assert sum(v for v, _ in batches) == sum(LENGTHS)
    starts = sum(-(-n // segment) for n in LENGTHS) if segment else sum(1 for n in LENGTHS if n)
    assert sum(f for _, f in batches) == starts


@pytest.mark.slow
@pytest.mark.parametrize("boundary", ["pack", "pad"])
def test_workers_with_fixed_row_blocks_share_the_claims_of_unknown_lengths(boundary: str, no_leaks: None) -> None:
    # balance=False: each worker reads its block of rows, planning them on the schedule; the claims of streams
    # whose ends only the other worker learns go by the keys published in the control block (``fills.iterators``).
    def epoch(workers: int) -> tuple[list[dict[str, np.ndarray]], Any]:
        source = CountingSource(LENGTHS, report_length=False)
        kw: dict[str, Any] = {"boundary": boundary, "segment": 3, "balance": False, "seed": 4}
        with StreamLoader(source, 3, 4, num_workers=workers, mp_context="fork", **kw) as loader:
            return collect(loader), loader.state_dict()

    want, want_state = epoch(0)
    got, got_state = epoch(2)
    assert len(got) == len(want) and got_state == want_state
    for a, b in zip(got, want, strict=True):
        assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


FIXED_BLOCKS = [  # recorded configurations of unknown lengths, run again on fixed row blocks
    ("unknown", {"boundary": "pack", "epoch_end": "restream", "segment": 4}),
    ("raising_unknown", {"on_error": "skip", "boundary": "pack"}),
]


@pytest.mark.slow
@pytest.mark.parametrize(("source", "loader"), FIXED_BLOCKS, ids=[s for s, _ in FIXED_BLOCKS])
def test_fixed_row_blocks_give_the_recorded_hashes_of_unknown_lengths(
    source: str, loader: dict[str, Any], tmp_path: Path, no_leaks: None
) -> None:
    # The golden recording holds these configurations balanced with workers (recorded when their rows were
    # claimed at run time, before the one schedule): with
    # balance=False they run on the schedule by turns, resumed across worker counts, and give the same hashes.
    import dataclasses

    from _golden import CASES, Data, run_case
    from test_engine_golden import RECORDED

    case = next(c for c in CASES if c.source == source and dict(c.loader, balance=None) == {**loader, "balance": None})
    fixed = dataclasses.replace(case, workers=2, resume_to=1, loader={**case.loader, "balance": False})
    want = next(got for got in RECORDED.values() if got["config"] == case.config_key)
    got = run_case(fixed, Data(None, tmp_path))
    assert got == {k: want[k] for k in got}


@pytest.mark.slow
def test_a_source_that_raises_on_fixed_row_blocks_stops_the_loader_and_leaves_nothing(no_leaks: None) -> None:
    # The loader raises the source's error; a worker waiting for its turn on a row the other reads ends its wait
    # when the loader closes (a new generation), and no process or segment outlives it.
    from _golden import LENGTHS, UnknownRaisingSource

    from streamcli import SourceError

    source = UnknownRaisingSource(LENGTHS, bad=6, at=11)
    with pytest.raises(SourceError, match="corrupt frame"):
        with StreamLoader(source, 3, 4, num_workers=2, balance=False, timeout=60) as loader:
            for _ in loader:
                pass


@pytest.mark.slow
def test_a_turn_is_read_in_one_pass_so_a_key_published_meanwhile_cannot_let_a_claim_jump_the_queue(
    monkeypatch: pytest.MonkeyPatch, no_leaks: None
) -> None:
    # A waiting claim once read the earliest row (argmin), then that row's key again: when its owner published a
    # later key between the two reads, the wait saw the later key as the minimum and took a ticket while another
    # row still waited below it (1 run in 30-80; every run with 0.2 ms between the reads). The turn is now the
    # minimum of one pass, which keys that only grow keep safe however long the pass takes: the pass is slowed
    # here so that publishes land inside it in every run.
    import time

    from _golden import UnknownRaisingSource

    from streamcli.shared.control import Control

    def slow_pass(self: Control) -> int:
        keys = []
        for key in self._claim:
            keys.append(int(key))
            time.sleep(1e-4)
        return min(keys)

    def epochs(workers: int) -> list[dict[str, np.ndarray]]:
        source = UnknownRaisingSource(LENGTHS, bad=6, at=11)
        kw: dict[str, Any] = {"on_error": "skip", "boundary": "pack", "balance": False, "seed": 1}
        with StreamLoader(source, 3, 4, num_workers=workers, mp_context="fork", **kw) as loader:
            return collect(loader) + collect(loader)

    want = epochs(0)
    monkeypatch.setattr(Control, "earliest_claim", slow_pass)  # (forked workers inherit it)
    for _ in range(3):
        got = epochs(2)
        assert len(got) == len(want)
        for a, b in zip(got, want, strict=True):
            assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
