"""Exact mid-epoch resume: state_dict() / load_state_dict() for every source, mode and worker count."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from _resume import assert_same, check_resume, run_epochs
from _sources import CountingSource, RaisingSource
from conftest import data_root, require_shared
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from streamcli import StreamLoader, load_source

MODES = [
    {},
    {"boundary": "pack"},
    {"epoch_end": "restream"},
    {"epoch_end": "drop"},
    {"layout": "BT"},
    {"shuffle": False},
    {"boundary": "pack", "epoch_end": "restream", "layout": "BT"},
]


# ---------------------------------------------------------------------------------------------- property


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    lengths=st.lists(st.integers(0, 12), min_size=1, max_size=12),
    B=st.integers(1, 4),
    T=st.integers(1, 4),
    boundary=st.sampled_from(["pad", "pack"]),
    epoch_end=st.sampled_from(["pad", "restream", "drop"]),
    layout=st.sampled_from(["TB", "BT"]),
    shuffle=st.booleans(),
    cut=st.integers(1, 40),
)
def test_resume_is_exact_in_process(
    lengths: list[int], B: int, T: int, boundary: str, epoch_end: str, layout: str, shuffle: bool, cut: int
) -> None:
    check_resume(
        lambda: CountingSource(lengths), B, T, cuts=[cut], seed=3, shuffle=shuffle, boundary=boundary,
        epoch_end=epoch_end, layout=layout,
    )  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("kw", MODES, ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items()) or "defaults")
@pytest.mark.parametrize(("before", "after"), [(0, 2), (2, 1), (1, 0)])
def test_resume_across_worker_counts(kw: dict[str, object], before: int, after: int) -> None:
    lengths = [5, 0, 9, 3, 12, 1, 7, 4, 8, 2, 11]
    check_resume(lambda: CountingSource(lengths, pad=3), 4, 3, cuts=[3, 11], workers_before=before,
                 workers_after=after, seed=1, **kw)  # type: ignore[arg-type]  # fmt: skip


# ---------------------------------------------------------------------------------------------- every source


@pytest.mark.slow
def test_resume_text_books() -> None:
    books = str(data_root("text"))
    check_resume(lambda: load_source("text", books, width=64), 4, 32, cuts=[5, 150], workers_before=1,
                 workers_after=0)  # fmt: skip


@pytest.mark.slow
def test_resume_camera() -> None:
    check_resume(lambda: load_source("camera", 5, steps=23, size=(16, 16)), 3, 4, cuts=[2, 9], workers_before=0,
                 workers_after=2)  # fmt: skip


class Overlong(CountingSource):
    """Streams 0 and 3 run on past the lengths they promise (cut there, and reported as mismatches)."""

    def length(self, item: int) -> int | None:
        return self.lengths[item] - 5 if item in (0, 3) else self.lengths[item]


@pytest.mark.parametrize("kw", [dict(boundary="pad"), dict(boundary="pack")], ids=["pad", "pack"])
def test_resume_cuts_an_overlong_stream_at_its_promise(kw: dict[str, object]) -> None:
    # A row resumed mid-stream checks the promised length as the row that opened the stream did: without it,
    # the resumed run read on past the promise where the uninterrupted one had cut it.
    with pytest.warns(RuntimeWarning, match="length"):
        check_resume(lambda: Overlong([17, 9, 12, 21, 6]), 2, 3, cuts=[1, 2, 4], **kw)


@pytest.mark.slow
def test_resume_with_workers_cuts_an_overlong_stream_at_its_promise(no_leaks: None) -> None:
    # Workers read the promised lengths of the epoch being resumed, not the (empty) table before it: they
    # acknowledge a new epoch before the loader writes its streams.
    with pytest.warns(RuntimeWarning, match="length"):
        check_resume(lambda: Overlong([17, 9, 12, 21, 6]), 2, 3, cuts=[2], workers_before=0, workers_after=2)


@pytest.mark.slow
def test_resume_audio() -> None:
    folder = str(require_shared("audio"))  # 48 kHz files at the top; 8 kHz ones below are skipped by mismatch=skip
    with pytest.warns(UserWarning):
        load_source("audio", folder, mismatch="skip").items()

    def make() -> object:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            src = load_source("audio", folder, mismatch="skip")
            src.items()
        return src

    check_resume(make, 3, 8, cuts=[4, 13], workers_before=2, workers_after=0)  # type: ignore[arg-type]


@pytest.mark.slow
@pytest.mark.parametrize("scan", [False, True])
def test_resume_video(scan: bool) -> None:
    folder = str(data_root("video"))  # the .avi clips: FFV1 and MJPEG (23 frames in all)
    check_resume(lambda: load_source("video", folder, glob="*.avi", size=(16, 16), scan=scan), 2, 8, cuts=[3, 8],
                 workers_before=0, workers_after=1)  # fmt: skip


@pytest.mark.slow
def test_resume_shards_source(tmp_path: Path) -> None:
    from streamcli.shards import export, make_header

    cam = load_source("camera", 4, steps=17, size=(8, 8))
    with StreamLoader(cam, 2, 4) as loader:
        header = make_header(fields=loader.fields, batch_size=2, time_steps=4, layout="TB",
                             source={"plugin": "camera"}, loader={}, shard_bytes=20_000, compress=False)  # fmt: skip
        export(iter(loader), tmp_path, header)
    check_resume(lambda: load_source("shards", str(tmp_path)), 3, 5, cuts=[2, 7], workers_before=1, workers_after=0)


def test_resume_example_plugin() -> None:
    check_resume(lambda: load_source("sine", 5, steps=13, width=4), 2, 3, cuts=[1, 6, 15])


# ---------------------------------------------------------------------------------------------- no replay


class CountedSource(CountingSource):
    """Counts the steps it yields and the ``start`` of every open (in-process only: a class attribute)."""

    yielded = 0
    starts: list[int] = []  # noqa: RUF012

    def open(self, item: int, start: int = 0) -> Iterator[dict[str, np.ndarray]]:
        CountedSource.starts.append(start)
        for step in super().open(item, start):
            CountedSource.yielded += 1
            yield step


def test_resume_reopens_at_the_position_and_replays_nothing() -> None:
    lengths = [400, 350, 500, 420, 380, 460]
    B, T = 3, 10
    with StreamLoader(CountedSource(lengths), B, T) as a:
        batches = run_epochs(a, 1)
        cut = len(batches) - 3  # near the end of the epoch
    with StreamLoader(CountedSource(lengths), B, T) as a:
        run_epochs(a, 1, stop_after=cut)
        state = a.state_dict()
    CountedSource.yielded, CountedSource.starts = 0, []
    with StreamLoader(CountedSource(lengths), B, T) as b:
        b.load_state_dict(state)
        tail = run_epochs(b, 1)
    assert len(tail) == 3
    real = sum(int(t["valid"].sum()) for t in tail)
    # Only the steps delivered after the cut were read, plus at most one look-ahead step per row.
    assert real <= CountedSource.yielded <= real + B
    live = [pos for item, pos, state_, _ in state["rows"] if state_ == 1]
    assert sorted(s for s in CountedSource.starts if s) == sorted(live) and all(p > 300 for p in live)


# ---------------------------------------------------------------------------------------------- the state itself


def test_state_is_plain_json_at_any_time() -> None:
    src = CountingSource([4, 6, 3, 5])
    with StreamLoader(src, 2, 3) as loader:
        s0 = loader.state_dict()  # before the first batch
        assert (s0["epoch"], s0["batch"], s0["tickets"]) == (0, 0, 0)
        assert all(row[2] == 0 for row in s0["rows"])
        n = len(list(loader))
        s1 = loader.state_dict()  # between epochs: the next iter() starts epoch 1
        assert (s1["epoch"], s1["batch"]) == (1, 0)
        it = iter(loader)
        next(it)
        s2 = loader.state_dict()
        assert (s2["epoch"], s2["batch"]) == (1, 1)
        assert json.loads(json.dumps(s2)) == s2
        assert set(s2) >= {"fingerprint", "epoch", "batch", "tickets", "rows", "skipped", "version"}
    with StreamLoader(src, 2, 3) as other:
        other.load_state_dict(s1)
        assert other.state_dict() == s1  # a loaded state reads back unchanged until iterated
        assert len(other) == n or len(other) > 0
        assert len(run_epochs(other, 1)) == len(other)


def test_state_size_for_64_rows() -> None:
    src = CountingSource([50] * 200)
    with StreamLoader(src, 64, 8) as loader:
        next(iter(loader))
        size = len(json.dumps(loader.state_dict()))
    assert size < 4096, size  # ~20 bytes per row cursor plus a fixed part


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"time_steps": 4}, "time_steps"),
        ({"seed": 9}, "seed"),
        ({"shuffle": False}, "shuffle"),
        ({"boundary": "pack"}, "boundary"),
        ({"epoch_end": "drop"}, "epoch_end"),
        ({"layout": "BT"}, "layout"),
    ],
)
def test_mismatched_state_is_refused_naming_what_differs(change: dict[str, object], match: str) -> None:
    kw: dict[str, object] = {"seed": 0}
    with StreamLoader(CountingSource([4, 5, 6]), 2, 3, **kw) as a:  # type: ignore[arg-type]
        next(iter(a))
        state = a.state_dict()
    args = {"batch_size": 2, "time_steps": 3, **kw, **change}
    B, T = args.pop("batch_size"), args.pop("time_steps")
    with StreamLoader(CountingSource([4, 5, 6]), B, T, **args) as b:  # type: ignore[arg-type]
        with pytest.raises(ValueError, match=match):
            b.load_state_dict(state)


def test_state_from_other_items_or_a_newer_format_is_refused() -> None:
    with StreamLoader(CountingSource([4, 5, 6]), 2, 3) as a:
        state = a.state_dict()
    with StreamLoader(CountingSource([4, 5, 6, 7]), 2, 3) as b:
        with pytest.raises(ValueError, match="num_items"):
            b.load_state_dict(state)
    with StreamLoader(load_source("sine", 3), 2, 3) as c:
        with pytest.raises(ValueError, match="source"):
            c.load_state_dict(state)
    with StreamLoader(CountingSource([4, 5, 6]), 2, 3) as d:
        with pytest.raises(ValueError, match="newer"):
            d.load_state_dict({**state, "version": 99})
        with pytest.raises(ValueError, match="state_dict"):
            d.load_state_dict({"epoch": 0})
        with pytest.raises(ValueError, match="cursor"):
            d.load_state_dict({**state, "rows": [[0, 0, 7, 0], [0, 0, 0, 0]]})


def test_skipped_items_stay_skipped_after_resume() -> None:
    lengths = [6, 8, 5, 9, 7, 4]

    def make() -> RaisingSource:
        return RaisingSource(lengths, bad=3, at=2)  # stream 3 fails at its step 2

    ref = check_resume(make, 2, 3, cuts=[2, 5, 9, 14], on_error="skip", shuffle=False)
    with StreamLoader(make(), 2, 3, on_error="skip", shuffle=False) as a:
        n = 0
        for _ in a:
            n += 1
            if a.stats.skipped:
                break
        state = a.state_dict()
    assert state["skipped"] == [[3, 2]]
    with StreamLoader(make(), 2, 3, on_error="skip", shuffle=False) as b:
        b.load_state_dict(state)
        assert b.stats.skipped == 1
        assert_same(ref[n : len(ref) // 2], run_epochs(b, 1), "the rest of the epoch after the skip")


# ---------------------------------------------------------------------------------------------- seeking by lengths


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    lengths=st.lists(st.integers(0, 15), min_size=1, max_size=10),
    B=st.integers(1, 3),
    T=st.integers(1, 4),
    boundary=st.sampled_from(["pad", "pack"]),
    epoch_end=st.sampled_from(["pad", "restream", "drop"]),
    segment=st.sampled_from([0, 4]),
    n=st.integers(1, 25),
)
# Under "drop" this shuffle's second epoch has no batch: the run (like an export) ends there, after 1 batch.
@example(lengths=[2, 1, 1], B=2, T=2, boundary="pack", epoch_end="drop", segment=0, n=2)
def test_state_from_lengths_alone_equals_the_real_one(
    lengths: list[int], B: int, T: int, boundary: str, epoch_end: str, segment: int, n: int
) -> None:
    from streamcli.scheduled.resume import state_after

    kw = dict(batch_size=B, time_steps=T, boundary=boundary, epoch_end=epoch_end, segment=segment, seed=4)
    with StreamLoader(CountingSource(lengths), **kw) as loader:  # type: ignore[arg-type]
        got = 0
        for _ in range(3):
            before = got
            for _ in loader:
                got += 1
                if got == n:
                    break
            if got in (n, before):
                break  # an epoch with no batch ends the run, as it ends an export (``iter_limit``)
        if got < n:
            return  # the run is shorter than n batches
        real = loader.state_dict()
    assert state_after(StreamLoader, lengths, n, real["fingerprint"], **kw) == real
