"""Planned claims (``scheduled.claims``): with every length known, rows claim from a schedule computed from the
lengths, without waiting on one another. With honest lengths the batches are those of the unplanned order; a
stream that falls short of its promise pads its row until then, and no other row's batches change."""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import pytest
from _invariants import collect, to_numpy
from _resume import assert_same, check_resume, run_epochs
from _sources import CountingSource, RaisingSource

from streamcli import StreamLoader
from streamcli.scheduled import cursor as _cursor
from streamcli.scheduled.cursor import RowPhase

LENGTHS = [9, 0, 23, 4, 17, 1, 30, 12, 0, 7, 26, 5, 14]


class ShortSource(CountingSource):
    """Stream ``short`` promises its ``lengths`` entry but has only ``real`` steps."""

    def __init__(self, lengths: Sequence[int], short: int, real: int) -> None:
        super().__init__(lengths)
        self.short, self.real = short, real

    def open(self, item: int, start: int = 0) -> Iterator[dict[str, np.ndarray]]:
        for step in super().open(item, start):
            if item == self.short and int(step["x"][1]) >= self.real:
                return
            yield step


def _epochs(src: CountingSource, epochs: int = 2, **kw: object) -> list[dict[str, np.ndarray]]:
    with StreamLoader(src, 3, 4, **kw) as loader:  # type: ignore[arg-type]
        return run_epochs(loader, epochs)


SETTINGS = [
    dict(boundary="pack", epoch_end="pad"),
    dict(boundary="pad", epoch_end="pad"),
    dict(boundary="pack", epoch_end="restream"),
    dict(boundary="pad", epoch_end="drop"),
    dict(boundary="pack", epoch_end="pad", shuffle=False),
]


@pytest.mark.parametrize("kw", SETTINGS, ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items()))
def test_planned_claims_give_the_batches_of_the_unplanned_order(kw: dict[str, object]) -> None:
    # The same streams with and without length(): only the first can plan its claims. The states after every
    # batch (row cursors, tickets) agree as well.
    runs = []
    for src in (CountingSource(LENGTHS), CountingSource(LENGTHS, report_length=False)):
        with StreamLoader(src, 3, 4, **kw) as loader:  # type: ignore[arg-type]
            batches, states = [], []
            for _ in range(2):
                for batch in loader:
                    batches.append(to_numpy(batch))
                    state = loader.state_dict()
                    states.append((state["epoch"], state["batch"], state["tickets"], state["rows"]))
            runs.append((batches, states))
    (planned, planned_states), (unplanned, unplanned_states) = runs
    assert_same(unplanned, planned, f"planned claims, {kw}")
    assert planned_states == unplanned_states


@pytest.mark.slow
@pytest.mark.parametrize("boundary", ["pack", "pad"])
def test_planned_claims_with_workers_give_the_in_process_batches(boundary: str, no_leaks: None) -> None:
    want = _epochs(CountingSource(LENGTHS), boundary=boundary)
    got = _epochs(CountingSource(LENGTHS), boundary=boundary, num_workers=2)
    assert_same(want, got, f"2 workers, boundary={boundary}")


@pytest.mark.parametrize("boundary", ["pack", "pad"])
def test_a_short_stream_pads_its_row_until_its_promise_and_nothing_else_moves(boundary: str) -> None:
    honest = _epochs(CountingSource(LENGTHS), 1, boundary=boundary)
    with pytest.warns(RuntimeWarning, match="said 23 steps but it ended after 8"):
        short = _epochs(ShortSource(LENGTHS, short=2, real=8), 1, boundary=boundary)
    assert len(short) == len(honest)
    for h, s in zip(honest, short, strict=True):
        of_short = (h["stream"] == 2) & (h["position"] >= 8)  # where stream 2's missing steps would have gone
        assert not s["valid"][of_short].any() and (s["stream"][of_short] == -1).all()
        keep = ~of_short
        for name in ("x", "valid", "stream", "position"):
            assert np.array_equal(h[name][keep], s[name][keep]), name


def test_a_stream_with_no_first_step_pads_until_its_promise() -> None:
    honest = _epochs(CountingSource(LENGTHS), 1)
    with pytest.warns(RuntimeWarning, match="said 30 steps but it ended after 0"):
        short = _epochs(ShortSource(LENGTHS, short=6, real=0), 1)
    # The epoch ends once no row has real steps left: here stream 6 would have been the last one live.
    assert len(short) < len(honest)
    for h, s in zip(honest, short, strict=False):
        gone = h["stream"] == 6
        assert not s["valid"][gone].any()
        assert np.array_equal(h["x"][~gone], s["x"][~gone])


def test_a_skipped_stream_pads_its_row_until_its_promise() -> None:
    honest = _epochs(CountingSource(LENGTHS), 1)
    with StreamLoader(RaisingSource(LENGTHS, bad=10, at=5), 3, 4, on_error="skip") as loader:
        skipped = run_epochs(loader, 1)
        assert loader.stats.skipped == 1
    assert len(skipped) == len(honest)
    for h, s in zip(honest, skipped, strict=True):
        gone = (h["stream"] == 10) & (h["position"] >= 5)
        assert not s["valid"][gone].any()
        assert np.array_equal(h["x"][~gone], s["x"][~gone])


def test_resume_in_the_middle_of_a_short_streams_padding() -> None:
    def make() -> ShortSource:
        return ShortSource(LENGTHS, short=6, real=0)

    with pytest.warns(RuntimeWarning, match="length"):
        with StreamLoader(make(), 3, 4) as loader:
            states = []
            for _ in loader:
                states.append(json.loads(json.dumps(loader.state_dict())))
    cuts = [i + 1 for i, st in enumerate(states) if any(r[_cursor.STATE] == RowPhase.SHORT for r in st["rows"])]
    assert cuts, "no state was saved while a row padded for its short stream"
    with pytest.warns(RuntimeWarning, match="length"):
        check_resume(make, 3, 4, cuts=cuts[:: max(1, len(cuts) // 4)])


@pytest.mark.slow
def test_resume_of_a_short_stream_with_workers(no_leaks: None) -> None:
    def make() -> ShortSource:
        return ShortSource(LENGTHS, short=6, real=0)

    with pytest.warns(RuntimeWarning, match="length"):
        check_resume(make, 3, 4, cuts=[3, 6], workers_before=2, workers_after=0)
        check_resume(make, 3, 4, cuts=[5], workers_before=0, workers_after=2)


@pytest.mark.slow
def test_a_long_planned_epoch_with_workers_matches_the_unplanned_order(no_leaks: None) -> None:
    # Hundreds of claims: each worker's plan also holds the other's claims, and drops those surely made.
    lengths = [(i * 7919) % 23 for i in range(400)]
    with StreamLoader(CountingSource(lengths, report_length=False), 5, 3, boundary="pack") as loader:
        want = collect(loader)
    with StreamLoader(CountingSource(lengths), 5, 3, boundary="pack", num_workers=2) as loader:
        assert len(loader) == len(want)
        got = collect(loader)
    assert_same(want, got, "400 streams, 2 workers, planned")


def _states(make: Callable[[], CountingSource], **kw: Any) -> list[dict[str, Any]]:
    """The state after each batch of one epoch, as saved to JSON."""
    with StreamLoader(make(), 3, 4, **kw) as loader:
        return [json.loads(json.dumps(loader.state_dict())) for _ in loader]


@pytest.mark.parametrize("workers", [0, pytest.param(1, marks=pytest.mark.slow)])
def test_a_resume_inside_a_broken_streams_padding_reports_it_once(workers: int, no_leaks: None) -> None:
    """A stream that failed under on_error="skip", or ended short of its promise, was reported before the state
    was saved; the resumed loader pads on (cursor ``short``) without reopening the stream, so it neither fails
    nor reports it again."""

    def failing() -> CountingSource:
        return RaisingSource(LENGTHS, bad=6, at=5)

    def short() -> CountingSource:
        return ShortSource(LENGTHS, short=6, real=3)

    def padding(states: list[dict[str, Any]]) -> list[dict[str, Any]]:
        inside = [st for st in states if any(r[_cursor.STATE] == RowPhase.SHORT for r in st["rows"])]
        assert len(inside) >= 2, "no state was saved while a row padded for its broken stream"
        return [inside[0], inside[-1]]

    for state in padding(_states(failing, on_error="skip")):
        assert len(state["skipped"]) == 1
        with StreamLoader(failing(), 3, 4, on_error="skip", num_workers=workers) as loader:
            loader.load_state_dict(state)
            for _ in loader:
                pass
            assert loader.stats.skipped == 1  # the one the state carries, and no second failure
    with pytest.warns(RuntimeWarning, match="length"):
        states = _states(short)
    for state in padding(states):
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)  # a second report would warn again
            with StreamLoader(short(), 3, 4, num_workers=workers) as loader:
                loader.load_state_dict(state)
                for _ in loader:
                    pass
                assert loader.stats.length_mismatches == 0


def _schedule(lengths: Sequence[int], B: int, T: int, rows: tuple[int, int] | None = None,
              start: np.ndarray | None = None, pack: bool = True) -> Any:  # fmt: skip
    from streamcli.scheduled.schedule import Schedule

    order = np.array([(i, 0, 0, n) for i, n in enumerate(lengths)], np.int64)  # item, first step, open, length
    if start is None:
        start = np.array([_cursor.record(-1, 0, RowPhase.IDLE, False, False)] * B, np.int64)
    return Schedule(order, start, 0, 0, T=T, pack=pack, segment=0, restream=False, rows=rows)


def _rows_of(plan: Any, lo: int) -> dict[str, Any]:
    """A plan's content with row numbers counted in the whole batch (``lo``: the plan's first row)."""
    cols = (plan.whole, plan.item, plan.pos, plan.replay, plan.stop, plan.expect, plan.seg_end)
    rows = zip(*(c.tolist() for c in cols), strict=True)
    whole = [(b + lo, 0, -1, i, p, bool(rp), False, st, e, se) for b, i, p, rp, st, e, se in rows]
    runs = [(r[0] + lo, *r[1:]) for r in plan.runs] + whole
    return {"runs": sorted(runs), "pads": sorted((b + lo, t0, t1) for b, t0, t1 in plan.pads),
            "cursors": plan.cursors.tolist(), "claims": plan.claims.tolist(), "dry": plan.dry.tolist()}  # fmt: skip


@pytest.mark.parametrize("pack", [True, False])
@pytest.mark.parametrize("lengths", [[7] * 40, [3, 11, 5, 20, 1, 9, 0, 14, 2] * 5])
def test_a_row_blocks_schedule_plans_what_the_whole_schedule_plans_for_those_rows(lengths: list[int],
                                                                                 pack: bool) -> None:  # fmt: skip
    # A worker reading iterator streams plans only the rows of its block: the claims still follow every row.
    whole = _schedule(lengths, B=6, T=4, pack=pack)
    blocks = [_schedule(lengths, B=6, T=4, rows=r, pack=pack) for r in [(0, 2), (2, 6)]]
    for _ in range(60):
        want = _rows_of(whole.next_plan(), 0)
        got = [_rows_of(s.next_plan(), s.lo) for s in blocks]
        assert sorted(got[0]["runs"] + got[1]["runs"]) == want["runs"]
        assert sorted(got[0]["pads"] + got[1]["pads"]) == want["pads"]
        for key in ("cursors", "claims", "dry"):
            assert got[0][key] + got[1][key] == want[key], key


def test_rows_resumed_mid_stream_are_planned_by_their_block() -> None:
    start = np.array([_cursor.record(i, 2, RowPhase.LIVE, False, False) for i in range(4)], np.int64)
    plan = _schedule([9] * 8, B=4, T=4, rows=(2, 4), start=start).next_plan()
    assert plan.whole.tolist() == [0, 1] and plan.item.tolist() == [2, 3] and plan.pos.tolist() == [2, 2]


@pytest.mark.parametrize("pack", [True, False])
@pytest.mark.parametrize("lengths", [[7] * 40, [3, 11, 5, 20, 1, 9, 0, 14, 2] * 5, [1, 2, 30, 4] * 10])
def test_rows_planned_at_their_events_match_every_row_planned_in_every_batch(lengths: list[int], pack: bool) -> None:
    long = [i for i, n in enumerate(lengths) if n >= 3][:6]  # rows resumed one step into these streams
    resumed = np.array([_cursor.record(item, 1, RowPhase.LIVE if r % 3 else RowPhase.SHORT, False, False)
                        for r, item in enumerate(long)], np.int64)  # fmt: skip
    for start in (None, resumed):  # an epoch's start, and a resume with live and short rows
        every_row = _schedule(lengths, B=6, T=4, pack=pack, start=start)
        every_row.EVENTS = False
        by_events = _schedule(lengths, B=6, T=4, pack=pack, start=start)
        for _ in range(40):
            assert _rows_of(by_events.next_plan(), 0) == _rows_of(every_row.next_plan(), 0)
        assert np.array_equal(every_row.table, by_events.table)
