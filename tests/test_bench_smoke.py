"""Smoke test for benchmarks/bench_loader.py: its workload runs through a tiny StreamLoader with workers."""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
if str(BENCH) not in sys.path:  # spawn workers inherit sys.path, so they can unpickle the source too
    sys.path.insert(0, str(BENCH))

pytest.importorskip("psutil")


@pytest.mark.slow
def test_workload_through_loader_is_coherent_and_complete() -> None:
    from bench_loader_workload import CoherenceCheck, SyntheticFrames, decode_stamps

    from streamcli import StreamLoader

    source = SyntheticFrames(6, 3, 30, frame_cost_s=1e-5, open_cost_s=1e-4)
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


@pytest.mark.slow
def test_harness_measures_streamcli() -> None:
    import bench_loader

    factory = functools.partial(bench_loader.make, "streamcli", bench_loader.SyntheticFrames(64, 40, 80), 2, 1)
    r = bench_loader.measure(factory, warmup=2, batches=5, consumer="sleep")
    assert r["batches"] == 5 and r["rate"] > 0 and r["first_s"] > 0
    assert r["copies"] == 0
