"""``segment=N``, ``batches_per_epoch`` and ranks: every step once, equal counts, exact resume."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import numpy as np
import pytest
from _invariants import collect
from _resume import assert_same, check_resume, run_epochs
from _sources import CountingSource
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamcli import StateError, StreamLoader
from streamcli.config import resolve_rank

Steps = Counter[tuple[int, int]]


def check_segments(batches: list[dict[str, np.ndarray]], segment: int) -> Steps:
    """Rows carry streams of at most ``segment`` steps that begin at multiples of it; returns delivered steps."""
    seen: Steps = Counter()
    B = batches[0]["valid"].shape[1] if batches else 0
    cur: list[tuple[int, int, int] | None] = [None] * B  # per row: item, next position, segment end
    for bt in batches:
        valid, first, stream, pos, rep, x = (
            bt[k] for k in ("valid", "is_first", "stream", "position", "replayed", "x")
        )
        for t in range(valid.shape[0]):
            for b in range(B):
                if not valid[t, b]:
                    cur[b] = None
                    continue
                s, p = int(stream[t, b]), int(pos[t, b])
                assert list(x[t, b]) == [s, p]
                if first[t, b]:
                    assert p % segment == 0, f"a segment began at position {p}"
                    cur[b] = (s, p, p + segment)
                assert cur[b] is not None and cur[b][:2] == (s, p), f"row {b} broke continuity at {s}:{p}"
                assert p < cur[b][2], "a stream ran past its segment"
                cur[b] = (s, p + 1, cur[b][2])
                if not rep[t, b]:
                    seen[(s, p)] += 1
    return seen


def everything(lengths: list[int]) -> set[tuple[int, int]]:
    return {(s, p) for s, n in enumerate(lengths) for p in range(n)}


lengths_st = st.lists(st.integers(0, 30), min_size=1, max_size=10)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    lengths=lengths_st,
    B=st.integers(1, 4),
    T=st.integers(1, 5),
    segment=st.integers(1, 9),
    boundary=st.sampled_from(["pad", "pack"]),
    known=st.booleans(),
    cut=st.integers(1, 30),
)
def test_segments_deliver_every_step_once_and_resume(
    lengths: list[int], B: int, T: int, segment: int, boundary: str, known: bool, cut: int
) -> None:
    def make() -> CountingSource:
        return CountingSource(lengths, report_length=known)

    with StreamLoader(make(), B, T, segment=segment, boundary=boundary, seed=2) as loader:
        expected = len(loader) if known else None
        batches = collect(loader)
    seen = check_segments(batches, segment)
    assert set(seen) == everything(lengths) and all(c == 1 for c in seen.values())
    if expected is not None:
        assert len(batches) == expected
    check_resume(make, B, T, cuts=[cut], segment=segment, boundary=boundary, seed=2)


def test_segments_spread_a_long_item_over_rows() -> None:
    lengths = [400, 10, 12, 9, 11, 10, 8]
    with StreamLoader(CountingSource(lengths), 4, 16) as whole:
        n_whole = len(whole)
    with StreamLoader(CountingSource(lengths), 4, 16, segment=32) as cut:
        n_cut = len(cut)
        batches = collect(cut)
    assert n_cut < n_whole / 2  # the long item no longer runs on alone
    rows_of_item0 = {b for bt in batches for t, b in zip(*np.nonzero(bt["stream"] == 0), strict=True)}
    assert len(rows_of_item0) > 1


@pytest.mark.slow
@pytest.mark.parametrize("known", [True, False])
def test_segments_are_identical_across_worker_counts(known: bool) -> None:
    lengths = [40, 3, 0, 25, 17, 33, 8]
    check_resume(lambda: CountingSource(lengths, report_length=known), 3, 4, cuts=[4, 13], workers_before=2,
                 workers_after=1, segment=7)  # fmt: skip


# ---------------------------------------------------------------------------------------------- fixed length


@pytest.mark.parametrize("epoch_end", ["pad", "restream", "drop"])
@pytest.mark.parametrize("n", [1, 3, 40])
def test_batches_per_epoch_fixes_the_length(epoch_end: str, n: int) -> None:
    lengths = [9, 4, 13, 6, 2]
    with StreamLoader(CountingSource(lengths), 2, 3, epoch_end=epoch_end) as natural_loader:
        natural = collect(natural_loader)
    with StreamLoader(CountingSource(lengths), 2, 3, epoch_end=epoch_end, batches_per_epoch=n) as loader:
        assert len(loader) == n
        for _ in range(2):
            got = collect(loader)
            assert len(got) == n
    keep = min(n, len(natural))
    with StreamLoader(CountingSource(lengths), 2, 3, epoch_end=epoch_end, batches_per_epoch=n) as loader:
        first = collect(loader)
    with StreamLoader(CountingSource(lengths), 2, 3, epoch_end=epoch_end) as natural_loader:
        natural = collect(natural_loader)
    for a, b in zip(natural[:keep], first[:keep], strict=True):
        assert all(np.array_equal(a[k], b[k]) for k in a)
    for extra in first[keep:]:
        if epoch_end == "restream":
            assert not extra["valid"].any() or extra["replayed"][extra["valid"]].all()
        else:
            assert not extra["valid"].any(), "after the natural end a fixed-length epoch is padding"
    check_resume(lambda: CountingSource(lengths), 2, 3, cuts=[1, n - 1, n + 2], epoch_end=epoch_end,
                 batches_per_epoch=n)  # fmt: skip


# ---------------------------------------------------------------------------------------------- ranks


@pytest.mark.parametrize("world_size", [2, 3])
@pytest.mark.parametrize("epoch_end", ["pad", "restream", "drop"])
@pytest.mark.parametrize("boundary", ["pad", "pack"])
@pytest.mark.parametrize("segment", [0, 5])
def test_ranks_split_streams_disjointly_with_equal_counts(
    world_size: int, epoch_end: str, boundary: str, segment: int
) -> None:
    lengths = [17, 3, 0, 25, 9, 14, 6, 30, 1, 11, 8]
    per_rank: list[list[dict[str, np.ndarray]]] = []
    lens = []
    for rank in range(world_size):
        kw = dict(epoch_end=epoch_end, boundary=boundary, segment=segment, rank=rank, world_size=world_size)
        with StreamLoader(CountingSource(lengths), 2, 4, seed=5, **kw) as loader:  # type: ignore[arg-type]
            lens.append(len(loader))
            per_rank.append(collect(loader))
            assert len(per_rank[-1]) == lens[-1]
            n_next = len(loader)
            assert len(collect(loader)) == n_next  # the next epoch too
    assert len(set(lens)) == 1, f"ranks yield different batch counts: {lens}"
    seen: Steps = Counter()
    owners: dict[tuple[int, int], set[int]] = {}
    for rank, batches in enumerate(per_rank):
        for bt in batches:
            ok = bt["valid"] & ~bt["replayed"]
            for s, p in zip(bt["stream"][ok].tolist(), bt["position"][ok].tolist(), strict=True):
                seen[(s, p)] += 1
                owners.setdefault((s, p - p % segment if segment else 0), set()).add(rank)
    assert all(c == 1 for c in seen.values()), "a step was delivered twice across ranks"
    assert all(len(r) == 1 for r in owners.values()), "a stream was split between ranks"
    if epoch_end != "drop":
        assert set(seen) == everything(lengths)


def test_unknown_lengths_with_ranks_is_refused_with_the_fix() -> None:
    with pytest.raises(ValueError, match=r"scan=True.*batches_per_epoch"):
        StreamLoader(CountingSource([3, 4], report_length=False), 2, 2, rank=0, world_size=2)
    with StreamLoader(CountingSource([3, 4], report_length=False), 1, 2, rank=1, world_size=2,
                      batches_per_epoch=3) as loader:  # fmt: skip
        assert len(collect(loader)) == 3


def test_rank_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert resolve_rank(None, None) == (0, 1)
    monkeypatch.setenv("RANK", "2")
    monkeypatch.setenv("WORLD_SIZE", "3")
    assert resolve_rank(None, None) == (2, 3)
    assert resolve_rank(0, None) == (0, 3)
    with pytest.raises(ValueError, match="rank=3"):
        resolve_rank(3, 3)
    monkeypatch.setenv("RANK", "x")
    with pytest.raises(ValueError, match="RANK="):
        resolve_rank(None, None)


@pytest.mark.parametrize("cut", [1, 4, 9])
@pytest.mark.parametrize("segment", [0, 3])
def test_a_state_saved_on_rank_0_resumes_rank_1_at_the_same_batch(cut: int, segment: int) -> None:
    """Lightning checkpoints rank 0's loader alone and hands it to every rank: rank 1 takes its own position."""
    lengths = [5, 9, 2, 7, 8, 3, 6, 11]
    kw = dict(segment=segment, world_size=2)
    with StreamLoader(CountingSource(lengths), 2, 3, rank=1, **kw) as ref:  # type: ignore[arg-type]
        reference = run_epochs(ref, 2)
    with StreamLoader(CountingSource(lengths), 2, 3, rank=0, **kw) as a:  # type: ignore[arg-type]
        run_epochs(a, 2, stop_after=cut)
        state = json.loads(json.dumps(a.state_dict()))
    with StreamLoader(CountingSource(lengths), 2, 3, rank=1, **kw) as b:  # type: ignore[arg-type]
        b.load_state_dict(state)
        got = run_epochs(b, 2)
    assert_same(reference[cut:], got[: len(reference) - cut], f"rank 1 from rank 0's state at batch {cut}")


def test_a_state_from_another_rank_is_refused_where_ranks_deal_their_streams() -> None:
    """Where ranks deal their own streams (unknown lengths); one global schedule's state is every rank's."""
    kw: dict[str, Any] = {"world_size": 2, "batches_per_epoch": 3}
    with StreamLoader(CountingSource([5, 6, 7, 8], report_length=False), 2, 2, rank=0, **kw) as a:
        next(iter(a))
        state = a.state_dict()
    with StreamLoader(CountingSource([5, 6, 7, 8], report_length=False), 2, 2, rank=1, **kw) as b:
        with pytest.raises(StateError, match=r"saved on rank 0; taking it on rank 1 needs every stream's length"):
            b.load_state_dict(state)


def test_a_state_from_another_world_size_is_refused_where_ranks_deal_their_streams() -> None:
    """(With every length known the rest of the epoch is re-planned instead: ``test_elastic``.)"""
    source = CountingSource([5, 6, 7, 8], report_length=False)
    with StreamLoader(source, 2, 2, rank=0, world_size=2, batches_per_epoch=3) as a:
        next(iter(a))
        state = a.state_dict()
    source = CountingSource([5, 6, 7, 8], report_length=False)
    with StreamLoader(source, 2, 2, rank=1, world_size=3, batches_per_epoch=3) as b:
        with pytest.raises(StateError, match="different rank"):
            b.load_state_dict(state)


# ---------------------------------------------------------------------------------------------- honest lengths


class LyingSource(CountingSource):
    """Reports ``lengths`` but stream 1 really has 3 steps fewer and stream 2 has 4 more."""

    def open(self, item: int, start: int = 0):  # type: ignore[no-untyped-def]
        real = self.lengths[item] + {1: -3, 2: 4}.get(item, 0)
        for p in range(start, real):
            yield {"x": np.array([item, p], np.int64)}


def test_a_length_that_lies_is_warned_once_counted_and_cut() -> None:
    lengths = [5, 6, 7, 4]
    with StreamLoader(LyingSource(lengths), 2, 3, shuffle=False) as loader:
        n = len(loader)
        with pytest.warns(RuntimeWarning, match=r"length\(\) said"):
            batches = collect(loader)
        assert loader.stats.length_mismatches == 2
    assert len(batches) <= n  # a short stream shortens the epoch: len() is then an upper bound
    positions = {int(p) for bt in batches for p in bt["position"][bt["stream"] == 2]}
    assert max(positions) == 6  # a stream that goes on is cut where its length said, as len() counted


def test_useful_share_and_padding_hint() -> None:
    with StreamLoader(CountingSource([40, 2, 3]), 3, 4) as loader:
        collect(loader)
        s = loader.stats
    assert 0 < s.useful_share < 0.5
    hint = s.padding_hint()
    assert hint is not None and "segment" in hint and "real data" in hint
    with StreamLoader(CountingSource([8] * 6), 2, 4) as loader:
        collect(loader)
        assert loader.stats.useful_share == 1.0 and loader.stats.padding_hint() is None
