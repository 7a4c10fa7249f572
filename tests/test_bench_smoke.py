"""Smoke tests for the benchmark harness (the ``benchmarks`` package): its workloads run through a tiny
StreamLoader with workers, and its runner measures streamcli and the torch baseline."""

from __future__ import annotations

import functools
import os
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("psutil")

from conftest import data_root, needs_shared

from benchmarks import runner
from benchmarks.workloads import (
    BlockFrames,
    ChunkedFrames,
    CoherenceCheck,
    SyntheticFrames,
    decode_stamps,
)


@pytest.mark.slow
@pytest.mark.parametrize("kind", [SyntheticFrames, ChunkedFrames])
def test_workload_through_loader_is_coherent_and_complete(kind: type[SyntheticFrames]) -> None:
    from streamcli import StreamLoader

    source = kind(6, 3, 30, frame_cost_s=1e-5, open_cost_s=1e-4)
    check = CoherenceCheck(source, 4)
    with StreamLoader(source, 4, 5, num_workers=2, seed=1, boundary="pad", epoch_end="pad") as loader:
        for batch in loader:
            stamps = decode_stamps(batch["frame"].numpy())
            valid = batch.valid.numpy()
            assert (stamps[..., 0] == batch.stream.numpy())[valid].all()
            assert (stamps[..., 1] == batch.position.numpy())[valid].all()
            check.feed(stamps)
    assert check.finish() == []
    assert check.valid_steps == source.total_steps()


def test_chunked_and_block_sources_make_the_same_frames_as_the_plain_one() -> None:
    plain, chunked, blocks = (k(3, 5, 21) for k in (SyntheticFrames, ChunkedFrames, BlockFrames))
    for item in range(3):
        for start in (0, 3, 9):
            want = np.stack([s["frame"] for s in plain.open(item, start)])
            got = np.stack([s["frame"] for s in chunked.open(item, start)])
            parts = [b["frame"] for b in blocks.open(item, start)]
            assert all(1 <= len(p) <= 8 for p in parts)
            np.testing.assert_array_equal(got, want)
            np.testing.assert_array_equal(np.concatenate(parts), want)


@pytest.mark.slow
def test_harness_measures_streamcli() -> None:
    factory = functools.partial(runner.make, "streamcli", SyntheticFrames(64, 40, 80), 2, 1)
    r = runner.measure(factory, warmup=2, batches=5, consumer="sleep")
    assert r["batches"] == 5 and r["rate"] > 0 and r["first_s"] > 0
    assert r["copies"] == 0


@pytest.mark.slow
@pytest.mark.parametrize("workers", [0, 2])
def test_harness_torch_peer_is_the_torch_baseline_and_coherent(workers: int) -> None:
    from benchmarks.torch_baseline import TorchBaseline

    source = ChunkedFrames(8, 3, 30)
    cand = runner.make("torch", source, workers, 1)
    assert isinstance(cand.base, TorchBaseline)  # type: ignore[attr-defined]
    check = CoherenceCheck(source, runner.B)
    try:
        for batch in cand:
            assert batch["frame"].shape == (runner.T, runner.B, 3, 64, 64)
            check.feed(decode_stamps(batch["frame"].numpy()))
    finally:
        cand.close()
    assert check.finish() == []
    assert cand.stats is not None and cand.stats.steps == source.total_steps()


def test_host_ceiling_loop_writes_every_frame_into_its_ring() -> None:
    import threading

    from benchmarks import bench_host

    source = SyntheticFrames(3, 2, 5)
    frames, seconds = bench_host.fill(source, [0, 1, 2], 2, 3, threading.Barrier(1), ring=2)  # type: ignore[arg-type]
    assert frames == 3 * 2 * bench_host.T and seconds > 0


@pytest.mark.slow
@needs_shared("video")  # the video benchmarks read the shared clips (more than 10 of them)
def test_host_video_round_times_one_and_two_decoders_on_the_real_clips() -> None:
    from benchmarks import videos

    paths = videos.clip_paths()
    assert len(paths) > 10 and videos.bare(paths, True, limit=7) == 7
    one, two, ratio = videos.decode_round(paths, frames=20)
    assert one > 0 and two > 0 and ratio == pytest.approx(one / two)


def test_host_ceiling_disturber_option_parses_and_rejects_bad_values() -> None:
    import argparse

    from benchmarks import bench_host

    assert bench_host._wakes("2,120") == pytest.approx((2.0, 120e-6))
    for bad in ("2", "x,1", "0,120", "2,-1"):
        with pytest.raises(argparse.ArgumentTypeError, match="W"):
            bench_host._wakes(bad)


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="reads /proc (Linux)")
def test_wakeup_counter_reads_the_main_process_and_its_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    from benchmarks import bench_wakeups

    me = bench_wakeups.switches(os.getpid())
    assert any(v > 0 for v, _ in me.values())  # read from /proc: this process has slept since it started
    # The counts per batch are the growth between two reads, per process: each pid's threads grow by a known
    # amount between the reads (a thread that appears in between counts from zero), so the figures are exact.
    reads: dict[int, int] = {}

    def switches(pid: int) -> dict[str, tuple[int, int]]:
        n = reads[pid] = reads.get(pid, 0) + 1
        threads = {"main[1]": (100 * n, 7 * n)}
        if n == 2:
            threads["new[2]"] = (30, 3)
        return threads

    monkeypatch.setattr(bench_wakeups, "switches", switches)
    got = bench_wakeups.one_run("A8", 2, 10)
    assert sorted(reads.values()) == [2, 2, 2]  # the main process and its 2 workers, before and after
    assert got["main_sleeps"] == pytest.approx((100 + 30) / 10)  # voluntary, main process
    assert got["worker_preemptions"] == pytest.approx(2 * (7 + 3) / 10)  # involuntary, both workers
    assert got["batches_s"] > 0 and got["main_cpu_us"] > 0


def test_target_ratio_is_the_median_of_paired_rounds_not_of_two_medians() -> None:
    """A run whose host sped up between the peers' runs: the medians' ratio says met, the rounds do not."""
    from benchmarks import report

    mine = {"rate": 1544.0, "rates": [1110.0, 1643.0, 1544.0, 1000.0, 1050.0]}
    seqtools = {"rate": 1450.0, "rates": [1801.0, 1268.0, 1407.0, 1500.0, 1450.0]}
    value, spread = report.ratio(mine, seqtools)
    assert value == pytest.approx(1050 / 1450)
    assert spread == "rounds 0.62-1.30"
    target = next(t for t in report.TARGETS if t.variant == "A8" and t.workers == 0)
    res: report.Results = {"A8": {(0, "free"): {"streamcli": mine, "seqtools": seqtools}}}
    verdict = report.evaluate(target, res, {"A8": None})
    assert verdict is not None and "**not met** (0.724;" in verdict and "rounds 0.62-1.30" in verdict
    # Runs that are not pairs (a different number of rounds) fall back to the medians.
    assert report.ratio({"rate": 2.0, "rates": [2.0]}, seqtools) == (pytest.approx(2.0 / 1450), "no paired rounds")


def test_loader_table_and_verdicts_give_the_rounds_spread_and_the_load_behind_it() -> None:
    """Medians alone hide what moved: the table gives each rate's range over its rounds, and a verdict names
    the other processes' share of the machine in its lowest and highest rounds."""
    from benchmarks import report

    mine = {"rate": 1000.0, "rates": [1000.0, 600.0, 1100.0], "loads": [0.05, 0.4, 0.02], "first_s": 0.1,
            "wait_p50_ms": 0.5, "short": False, "cpu_ours": 1.0, "foreign_load_max": 0.4}  # fmt: skip
    peer = {**mine, "rate": 1000.0, "rates": [1000.0, 1000.0, 1000.0], "loads": [0.05, 0.1, 0.02]}
    value, spread = report.ratio(mine, peer)
    assert value == 1.0
    note = "other load in the lowest round 40% (streamcli) / 10% (peer), in the highest 2% / 2%"
    assert spread == f"rounds 0.60-1.10; {note}"
    res: report.Results = {"A8": {(0, "free"): {"streamcli": mine, "seqtools": peer}}}
    table = report.variant_table(res, "A8", ["streamcli", "seqtools"], (0,), ("free",), None, 1)
    assert "| streamcli | 0 | 1000 (600-1100) | 1.00x (0.60-1.10) |" in table


def test_video_bench_runs_on_a_users_folder_and_rejects_a_bad_one(tmp_path: Path) -> None:
    """``bench_video.py --folder``: independent measurements run on clips the project has not seen."""
    from benchmarks import bench_video

    try:
        with pytest.raises(SystemExit, match=r"^--folder .*nope: .* is neither a folder nor a file of videos"):
            bench_video.use_folder(str(tmp_path / "nope"))
        with pytest.raises(SystemExit, match=r"^--folder .*: no file with a video extension"):
            bench_video.use_folder(str(tmp_path))
        clip = data_root("video") / "realshort.mp4"
        (tmp_path / clip.name).symlink_to(clip)
        bench_video.use_folder(str(tmp_path))
        assert bench_video.clip_paths() == [str(tmp_path / clip.name)]
    finally:
        bench_video._folder = None


def test_replay_verdict_holds_the_readers_to_the_goal_but_not_the_checksum_row() -> None:
    from benchmarks import bench_replay

    rows = [("np.load", 100.0, 0.0, 1), ("ShardReader", 300.0, 0.0, 1), ("ShardReader(check=True)", 50.0, 0.0, 1),
            ("shards source, StreamLoader(num_workers=0)", 85.0, 0.0, 1)]  # fmt: skip
    got = bench_replay.verdict([("4 MB", 32, rows)])
    assert "**met** (lowest 0.85x: 4 MB, shards source" in got
    slow = [("32 MB", 4, [rows[0], ("ShardReader", 70.0, 0.0, 1)])]
    assert "**not met** (lowest 0.70x: 32 MB, ShardReader)" in bench_replay.verdict([("4 MB", 32, rows), *slow])
