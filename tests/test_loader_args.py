"""Loader arguments and configuration: bad values are refused naming the value and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from _sources import CountingSource

from streamcli import Field, SharedMemoryError, StreamLoader

HERE = Path(__file__).resolve().parent


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(batch_size=0), "batch_size=0"),
        (dict(time_steps=-1), "time_steps=-1"),
        (dict(num_workers=5), "num_workers=5 exceeds batch_size=4"),
        (dict(boundary="squash"), "boundary='squash'"),
        (dict(epoch_end="wrap"), "epoch_end='wrap'"),
        (dict(layout="TBC"), "layout='TBC'"),
        (dict(on_error="ignore"), "on_error='ignore'"),
        (dict(prefetch=0), "prefetch=0"),
        (dict(batch_size=2.5), "batch_size=2.5"),
    ],
)
def test_invalid_arguments_name_the_value(kwargs: dict[str, object], match: str, no_leaks: None) -> None:
    args: dict[str, object] = dict(batch_size=4, time_steps=2)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match.replace("(", r"\(").replace("[", r"\[")):
        StreamLoader(CountingSource([3, 3]), **args)  # type: ignore[arg-type]


def test_field_names_are_checked() -> None:
    class Clash(CountingSource):
        def fields(self):  # type: ignore[no-untyped-def]
            from streamcli import Field

            return [Field("valid", (1,), "uint8")]

    with pytest.raises(ValueError, match="clash with batch flags"):
        StreamLoader(Clash([1]), 2, 2)


def test_len_needs_lengths() -> None:
    with StreamLoader(CountingSource([3, 4], report_length=False), 2, 2) as loader:
        with pytest.raises(TypeError, match="does not report them all"):
            len(loader)
    with StreamLoader(CountingSource([3, 4]), 2, 2) as loader:
        assert len(loader) == len(list(loader)) == 2


def test_pin_memory_without_cuda_warns_once_and_does_nothing() -> None:
    if torch.cuda.is_available():
        pytest.skip("CUDA present: pinning is real here")
    import streamcli.shared.tensors as mod

    mod._pin_warned = False
    with pytest.warns(RuntimeWarning, match="CUDA is not available"):
        with StreamLoader(CountingSource([4, 4]), 2, 2, pin_memory=True) as loader:
            batches = list(loader)
    assert len(batches) == 2 and loader.stats.copies == 0


def test_unpicklable_source_with_workers_is_a_clear_error(no_leaks: None) -> None:
    src = CountingSource([3])
    src.hook = lambda: None  # type: ignore[attr-defined]
    with pytest.raises(TypeError, match="cannot be pickled for worker processes"):
        StreamLoader(src, 1, 1, num_workers=1)


def test_stats_snapshot() -> None:
    with StreamLoader(CountingSource([20] * 4), 2, 5) as loader:
        for _ in loader:
            pass
        s = loader.stats
    assert s.batches == 8 and s.steps == 80 and s.streams_done == 4 and s.streams_total == 4
    assert len(s.waits_s) == 8 and s.first_batch_s is not None and s.batches_per_s > 0
    assert s.bytes == 8 * 2 * 5 * 16


def test_stats_count_each_producers_busy_seconds() -> None:
    # Cumulative, so that two snapshots give the busy share of any window (bench_video uses them per epoch).
    with StreamLoader(CountingSource([20] * 4), 2, 5) as loader:
        it = iter(loader)
        next(it)
        first = loader.stats.worker_busy_s
        for _ in it:
            pass
        last = loader.stats
    assert len(first) == len(last.worker_busy_s) == 1  # in-process: the main process
    assert 0 < first[0] <= last.worker_busy_s[0] <= last.elapsed_s
    assert loader.stats.worker_busy_s == ()  # closed


def test_a_ring_larger_than_shared_memory_is_a_clear_error(no_leaks: None) -> None:
    # A step of 2**40 bytes: no /dev/shm anywhere holds 6 slots of it. Refused before anything is created,
    # naming the size and the fix (in a default Docker container, 64 MiB would already be too small).
    with pytest.raises(SharedMemoryError, match=r"needs \d+ MiB of shared memory .* lower prefetch=.*--shm-size"):
        StreamLoader(CountingSource([3], pad=2**40), 2, 2)


def test_a_ring_that_cannot_be_backed_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, no_leaks: None) -> None:
    # /dev/shm filled up between the check and the reservation (another process took it): the reservation
    # fails with ENOSPC, and the half-made segment is removed instead of crashing a worker with SIGBUS later.
    import errno
    import os

    def full(fd: int, offset: int, length: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", full)
    with pytest.raises(SharedMemoryError, match="MiB of shared memory"):
        StreamLoader(CountingSource([3]), 2, 2, num_workers=1)


def test_default_prefetch_runs_deep_where_shared_memory_allows(monkeypatch: pytest.MonkeyPatch) -> None:
    from streamcli.shared import sizing

    small, big = (Field("x", (2,), "int64"),), (Field("frame", (3, 512, 512), "uint8"),)
    assert sizing.default_prefetch(small, 4, 8, "TB", 0) == 4  # in-process nothing runs ahead
    assert sizing.default_prefetch(small, 4, 8, "TB", 2) == 16  # tiny slots: the deepest window
    assert sizing.default_prefetch(big, 32, 64, "TB", 2) == 4  # 1.5 GiB slots: never below the old default
    monkeypatch.setattr(sizing, "_shm_free", lambda root="/dev/shm": 64 * 2**20)  # a default Docker container
    assert sizing.default_prefetch(small, 4, 8, "TB", 2) == 16
    assert sizing.default_prefetch((Field("f", (3, 128, 128), "uint8"),), 8, 16, "TB", 2) == 4
    with StreamLoader(CountingSource([5, 3]), 2, 2) as loader:
        assert loader.prefetch == 4 and loader.config.prefetch is None


def test_default_prefetch_keeps_the_ring_within_the_last_level_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every slot is written once a lap: a ring deeper than the cache sends every copy to main memory.
    from streamcli.shared import sizing

    clips = (Field("frame", (3, 32, 32), "uint8"),)  # 64 x 16 steps: 3 MiB slots
    monkeypatch.setattr(sizing, "cache_bytes", lambda: 32 * 2**20)
    assert sizing.default_prefetch(clips, 64, 16, "TB", 2) == 6  # 10 slots fit, 4 of them beyond the window
    monkeypatch.setattr(sizing, "cache_bytes", lambda: 256 * 2**20)
    assert sizing.default_prefetch(clips, 64, 16, "TB", 2) == 16
    for level, size in [(1, "32K"), (2, "1024K"), (3, "16384K")]:
        (tmp_path / f"index{level}").mkdir()
        (tmp_path / f"index{level}" / "level").write_text(f"{level}\n")
        (tmp_path / f"index{level}" / "size").write_text(f"{size}\n")
    monkeypatch.undo()
    assert sizing.cache_bytes(str(tmp_path)) == 16 * 2**20
    assert sizing.cache_bytes(str(tmp_path / "missing")) == 32 * 2**20
