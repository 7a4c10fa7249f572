"""One global batch across ranks (issue 36 §1) and resume after a resize (§2).

Ranks are run one after another in this process, each with ``rank`` and ``world_size`` passed explicitly; the
global batch is every rank's batch side by side in rank order.
"""

from __future__ import annotations

import json
import logging
import warnings
from collections import Counter
from typing import Any

import numpy as np
import pytest
from _resume import assert_same, run_epochs
from _sources import CountingSource

from streamcli import StateError, StreamLoader

LENGTHS = [17, 3, 0, 25, 9, 14, 6, 30, 1, 11, 8, 21, 4]
T = 4
Batches = list[dict[str, np.ndarray]]
MODES = [
    {},
    {"boundary": "pack"},
    {"segment": 5},
    {"epoch_end": "restream", "boundary": "pack"},
    {"epoch_end": "drop", "segment": 4},
]


def side_by_side(per_rank: list[Batches]) -> Batches:
    """The global batches: every rank's batch k, rows side by side in rank order."""
    counts = {len(b) for b in per_rank}
    assert len(counts) == 1, f"ranks yield different batch counts: {[len(b) for b in per_rank]}"
    out = []
    for k in range(len(per_rank[0])):
        first = per_rank[0][k]
        out.append({f: np.concatenate([r[k][f] for r in per_rank], axis=1 if first[f].ndim > 1 else 0) for f in first})
    return out


def global_run(
    world_size: int, G: int, *, epochs: int = 2, stop_after: int | None = None, states: list[Any] | None = None,
    load: Any = None, **kw: Any,
) -> Batches:  # fmt: skip
    """The global batches of ``epochs`` epochs on ``world_size`` ranks of ``G // world_size`` rows; ``load``: a
    state for every rank (or one per rank), ``states``: gets each rank's state at the end."""
    per_rank = []
    for rank in range(world_size):
        with StreamLoader(
            CountingSource(LENGTHS), G // world_size, T, seed=5, rank=rank, world_size=world_size, **kw
        ) as loader:
            if load is not None:
                loader.load_state_dict(load[rank] if isinstance(load, list) else load)
            per_rank.append(run_epochs(loader, epochs, stop_after))
            if states is not None:
                states.append(json.loads(json.dumps(loader.state_dict())))
    return side_by_side(per_rank)


# ------------------------------------------------------------------------------------------ one global batch


@pytest.mark.parametrize("mode", MODES, ids=lambda m: ",".join(f"{k}={v}" for k, v in m.items()) or "default")
def test_the_global_batches_are_the_same_on_1_2_and_4_ranks(mode: dict[str, Any]) -> None:
    want = global_run(1, 8, **mode)
    assert want
    for world_size in (2, 4):
        assert_same(want, global_run(world_size, 8, **mode), f"{world_size} ranks of {8 // world_size} rows")


def test_every_rank_reports_the_global_schedules_length() -> None:
    lens = set()
    for rank in range(4):
        with StreamLoader(CountingSource(LENGTHS), 2, T, seed=5, rank=rank, world_size=4) as loader:
            lens.add(len(loader))
    with StreamLoader(CountingSource(LENGTHS), 8, T, seed=5) as one:
        assert lens == {len(one)}


def test_balance_true_on_several_ranks_warns_that_it_has_no_effect() -> None:
    with pytest.warns(RuntimeWarning, match=r"balance=True has no effect with world_size=2") as caught:
        StreamLoader(CountingSource(LENGTHS), 2, T, rank=1, world_size=2, balance=True).close()
    assert caught[0].filename == __file__  # at the caller's line
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the default (None) and one rank say nothing
        StreamLoader(CountingSource(LENGTHS), 2, T, rank=1, world_size=2).close()
        StreamLoader(CountingSource(LENGTHS), 2, T, balance=True).close()


@pytest.mark.slow
def test_the_global_batches_are_the_same_with_worker_processes() -> None:
    want = global_run(1, 8, epochs=1, segment=5, boundary="pack")
    assert_same(want, global_run(2, 8, epochs=1, segment=5, boundary="pack", num_workers=2), "2 ranks, 2 workers")
    assert_same(want, global_run(4, 8, epochs=1, segment=5, boundary="pack", num_workers=1), "4 ranks, 1 worker")


def test_streams_of_unknown_length_keep_a_per_rank_deal() -> None:
    """Without every length no rank can plan the others' rows: each deals itself a share, as before."""
    source = CountingSource([5, 6, 7, 8], report_length=False)
    with StreamLoader(source, 2, 2, rank=1, world_size=2, batches_per_epoch=3) as loader:
        assert not loader.epochs.shared
        assert len(run_epochs(loader, 1)) == 3


@pytest.mark.slow
def test_a_per_rank_deal_is_the_same_on_every_engine_and_worker_count() -> None:
    """The schedule a rank of a per-rank deal plans is its own B rows, not the global batch's: in process and on
    fixed row blocks (the schedule, reading lengths as it goes) as with balanced rows."""
    source = CountingSource([5, 9, 3, 12, 7, 4, 10, 6], report_length=False)

    def run(**kw: Any) -> list[dict[str, np.ndarray]]:
        with StreamLoader(source, 2, 3, rank=1, world_size=2, batches_per_epoch=6, **kw) as loader:
            return run_epochs(loader, 2)

    want = run()
    assert any(b["valid"].any() for b in want)
    assert_same(want, run(num_workers=2, balance=False), "fixed row blocks")
    assert_same(want, run(num_workers=2, balance=True), "balanced rows")


# ------------------------------------------------------------------------------------ resume at the same G


@pytest.mark.parametrize("cut", [1, 3, 6])
@pytest.mark.parametrize("mode", [{}, {"segment": 5, "boundary": "pack"}], ids=["default", "segment,pack"])
def test_a_state_resumes_exactly_on_another_world_size_at_the_same_global_batch(cut: int, mode: dict[str, Any]) -> None:
    want = global_run(1, 8, **mode)
    states: list[Any] = []
    global_run(2, 8, stop_after=cut, states=states, **mode)
    for world_size in (1, 4):
        got = global_run(world_size, 8, load=states[0], **mode)  # rank 0's alone, as Lightning saves it
        assert_same(want[cut:], got[: len(want) - cut], f"rank 0's state on {world_size} ranks at batch {cut}")
    # Each rank's own state is the same global state.
    unsealed = [{k: v for k, v in s.items() if k != "digest"} for s in states]
    assert unsealed[1] == {**unsealed[0], "fingerprint": {**states[0]["fingerprint"], "rank": 1}}
    got = global_run(2, 8, load=states, **mode)
    assert_same(want[cut:], got[: len(want) - cut], f"each rank's own state at batch {cut}")


# ------------------------------------------------------------------------------------ resume on another G


def check_exactly_once(parts: list[Batches], lengths: list[int]) -> None:
    """One epoch run in ``parts``, each resumed from the state where the one before stopped (possibly with another
    number of rows): every (item, step) exactly once, every row coherent (a stream goes on at the next position
    until another starts with ``is_first``), and every row's first valid step in a part marked ``is_first``."""
    seen: Counter[tuple[int, int]] = Counter()
    for part, batches in enumerate(parts):
        rows = batches[0]["valid"].shape[1] if batches else 0
        cur: list[tuple[int, int] | None] = [None] * rows  # per row: (item, next step)
        for k, bt in enumerate(batches):
            valid, first, stream, pos, rep = bt["valid"], bt["is_first"], bt["stream"], bt["position"], bt["replayed"]
            for b in range(rows):
                for t in range(valid.shape[0]):
                    if not valid[t, b]:
                        continue
                    s, p = int(stream[t, b]), int(pos[t, b])
                    assert list(bt["x"][t, b]) == [s, p]
                    if cur[b] is None:
                        assert first[t, b], f"{part}: row {b}'s first step at batch {k} is not is_first"
                    elif not first[t, b]:
                        assert cur[b] == (s, p), f"{part}: row {b} jumps from {cur[b]} to {(s, p)} at batch {k}"
                    cur[b] = (s, p + 1)
                    if not rep[t, b]:
                        seen[(s, p)] += 1
    want = {(i, p) for i, n in enumerate(lengths) for p in range(n)}
    twice = [k for k, c in seen.items() if c > 1]
    assert not twice, f"steps delivered twice: {sorted(twice)[:5]}"
    assert set(seen) == want, f"steps lost: {sorted(want - set(seen))[:5]}"


def first_epoch(G: int, world_size: int = 1, load: Any = None, **kw: Any) -> tuple[Batches, list[Any]]:
    states: list[Any] = []
    return global_run(world_size, G, epochs=1, load=load, states=states, **kw), states


@pytest.mark.parametrize("mode", [{}, {"boundary": "pack"}, {"segment": 5}, {"segment": 4, "boundary": "pack"}])
@pytest.mark.parametrize(("G", "G2"), [(4, 6), (6, 2), (8, 4)])
def test_another_global_batch_continues_the_epoch_exactly_once(
    G: int, G2: int, mode: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    for cut in (1, 3):
        states: list[Any] = []
        before = global_run(2 if G % 2 == 0 else 1, G, epochs=1, stop_after=cut, states=states, **mode)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="streamcli"):
            after, _ = first_epoch(G2, 1, load=states[0], **mode)
        lines = [r for r in caplog.records if "global batch" in r.getMessage()]
        assert len(lines) == 1, [r.getMessage() for r in caplog.records]
        check_exactly_once([before, after], LENGTHS)


@pytest.mark.slow
def test_another_global_batch_with_worker_processes_continues_exactly_once() -> None:
    """Workers on either side; a re-planned epoch is followed as planned even where rows are balanced."""
    mode: dict[str, Any] = {"segment": 5, "boundary": "pack", "balance": True}
    states: list[Any] = []
    before = global_run(2, 4, epochs=1, stop_after=3, states=states, num_workers=2, **mode)
    after, _ = first_epoch(6, 1, load=states[0], num_workers=2, **mode)
    check_exactly_once([before, after], LENGTHS)


@pytest.mark.parametrize("mode", [{}, {"segment": 5, "boundary": "pack"}])
def test_a_second_resize_goes_on_exactly_once(mode: dict[str, Any]) -> None:
    states: list[Any] = []
    one = global_run(2, 8, epochs=1, stop_after=2, states=states, **mode)
    second: list[Any] = []
    two = global_run(1, 3, epochs=1, stop_after=3, load=states[0], states=second, **mode)
    assert second[0]["version"] == 2 and second[0]["replan"]["batch"] == 2
    # The re-planned state resumes exactly at its own global batch, on any world size...
    rest = global_run(1, 3, epochs=1, load=states[0], **mode)
    assert_same(rest[3:], global_run(3, 3, epochs=1, load=second[0], **mode), "a re-planned state, same G")
    # ...and is re-planned again on another.
    three = global_run(2, 4, epochs=1, load=second[0], **mode)
    check_exactly_once([one, two, three], LENGTHS)


def test_another_global_batch_needs_every_length() -> None:
    source = CountingSource([5, 6, 7, 8], report_length=False)
    with StreamLoader(source, 2, 2) as a:
        next(iter(a))
        state = a.state_dict()
    with StreamLoader(CountingSource([5, 6, 7, 8], report_length=False), 3, 2) as b:
        with pytest.raises(StateError, match=r"global batch of 2 rows.*streamcli index"):
            b.load_state_dict(state)


def test_a_per_rank_state_is_refused_by_a_global_schedule() -> None:
    with StreamLoader(CountingSource([5, 6, 7, 8]), 2, 2, rank=0, world_size=2) as a:
        next(iter(a))
        state = a.state_dict()
    del state["fingerprint"]["deal"]  # as a streamcli before the global batch saved it
    with StreamLoader(CountingSource([5, 6, 7, 8]), 2, 2, rank=1, world_size=2) as b:
        with pytest.raises(StateError, match="dealt themselves a share"):
            b.load_state_dict(state)


def test_a_state_at_an_epochs_start_needs_no_re_plan(caplog: pytest.LogCaptureFixture) -> None:
    with StreamLoader(CountingSource(LENGTHS), 2, T, seed=5) as a:
        state = a.state_dict()
    with caplog.at_level(logging.WARNING, logger="streamcli"):
        got, _ = first_epoch(6, 1, load=state)
    assert not caplog.records
    assert_same(first_epoch(6, 1)[0], got, "a state before the first batch")


@pytest.mark.parametrize(
    ("replan", "match"),
    [("x", "must hold"), ({"epoch": 0, "batch": -1, "tickets": 0, "streams": []}, "integers >= 0"),
     ({"epoch": 0, "batch": 1, "tickets": 0, "streams": [[99, 0]]}, r"\[item, step\] pairs of the 13 items")],
)  # fmt: skip
def test_a_tampered_re_plan_is_refused(replan: Any, match: str) -> None:
    states: list[Any] = []
    global_run(1, 4, epochs=1, stop_after=2, states=states)
    with StreamLoader(CountingSource(LENGTHS), 3, T, seed=5) as b:
        b.load_state_dict(states[0])
        state = b.state_dict()
    state["replan"] = replan
    with StreamLoader(CountingSource(LENGTHS), 3, T, seed=5) as c:
        with pytest.raises(StateError, match=match):
            c.load_state_dict(state)
