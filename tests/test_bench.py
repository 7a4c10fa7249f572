"""``streamcli.bench``: one wait and one runner; the harness's torch baseline; and a bottleneck line (the ``bench``
command's verdict) that tells the truth."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from benchmarks.torch_baseline import TorchBaseline
from benchmarks.workloads import BlockFrames, ChunkedFrames, CoherenceCheck, decode_stamps
from streamcli import StreamLoader
from streamcli.bench import BenchResult, run_benchmark, summarize, time_run
from streamcli.cli._bench_verdict import bottleneck, scheduling
from streamcli.stats import LoaderStats


def result(workers: int = 2, busy: tuple[float, ...] = (0.5, 0.5), wait: float = 3.0, **kw: Any) -> BenchResult:
    base = BenchResult(
        name="streamcli", workers=workers, batches_per_s=10.0, steps_per_s=100.0, mb_per_s=1.0, wait_p50_ms=wait,
        wait_p95_ms=wait, busy=float(np.mean(busy)) if busy else float("nan"), first_batch_s=0.1, peak_rss_mb=1.0,
        repeats=1, batches=10, busy_per_worker=busy,
    )  # fmt: skip
    return dataclasses.replace(base, **kw)


def test_bottleneck_names_imbalance_from_the_spread_of_worker_busy() -> None:
    line = bottleneck(result(busy=(0.2, 0.99)))
    assert line.startswith("imbalanced: worker 1 is 99% busy, worker 0 20%"), line
    assert "hand-off" not in line


def test_bottleneck_names_the_stream_of_the_busy_worker_when_known() -> None:
    line = bottleneck(result(busy=(0.99, 0.1), stream_per_worker=("big.mp4", "small.mp4")))
    assert "worker 0 is 99% busy" in line and "'big.mp4'" in line


@pytest.mark.parametrize("busy", [(0.9, 0.7), (0.5, 0.1), (0.95,)])
def test_even_or_light_load_is_not_called_imbalanced(busy: tuple[float, ...]) -> None:
    assert not bottleneck(result(busy=busy)).startswith("imbalanced")


def test_unknown_busy_reads_as_a_dash_not_zero_percent() -> None:
    line = bottleneck(result(busy=(), wait=0.5))
    assert "workers - busy" in line and "0%" not in line
    assert "not measured" in bottleneck(result(busy=(), wait=5.0))


def test_json_turns_nan_into_null_inside_per_worker_figures() -> None:
    out = result(busy=(0.5, float("nan"))).to_json()
    assert out["busy_per_worker"] == [0.5, None]


class SlowNext:
    """A loader whose ``next()`` takes 5 ms of ``clock``; its consumer takes 20 ms more per batch."""

    clock: FakeClock | None = None

    def __iter__(self) -> Iterator[int]:
        for i in range(1000):
            if self.clock is not None:
                self.clock.now += 0.005
            yield i

    def close(self) -> None:
        pass


class FakeClock:
    """Stands for ``time`` in ``streamcli.bench``: seconds pass only when a test says so, so waits are exact."""

    def __init__(self) -> None:
        self.now = 100.0

    def perf_counter(self) -> float:
        return self.now


def test_wait_is_the_time_inside_next_and_nothing_else(monkeypatch: pytest.MonkeyPatch) -> None:
    from streamcli import bench

    clock = FakeClock()
    monkeypatch.setattr(bench, "time", clock)
    monkeypatch.setattr(SlowNext, "clock", clock)

    def consume(_: object) -> None:
        clock.now += 0.02

    run = time_run(SlowNext, batches=5, warmup=1, consume=consume, sample_rss=False)
    assert run.batches == 5 and len(run.waits_s) == 5
    assert run.waits_s == pytest.approx([0.005] * 5), run.waits_s  # the consumer's 20 ms are not in it
    r = summarize("slow", 0, [run])
    assert r.steps_per_s != r.steps_per_s  # no stats: unknown, not zero
    assert r.busy != r.busy and r.busy_per_worker == ()


def test_all_zero_worker_busy_from_a_short_run_is_unknown() -> None:
    class Short(SlowNext):
        stats = LoaderStats(
            batches=1, steps=8, bytes=8, elapsed_s=0.01, first_batch_s=0.01, waits_s=(), worker_busy=(0.0, 0.0),
            worker_steps=(4, 4), ready_slots=0, num_slots=4, epoch=0, streams_done=0, streams_total=2, skipped=0,
            copies=0,
        )  # fmt: skip

    assert time_run(Short, batches=2, warmup=0, sample_rss=False).busy_per_worker == ()


@pytest.mark.slow
def test_short_streamcli_run_never_reports_zero_busy() -> None:
    source = ChunkedFrames(8, 20, 40)
    (r,) = run_benchmark(lambda w: StreamLoader(source, 4, 4, num_workers=w), [2], batches=3, warmup=1, repeats=1)
    assert r.busy != r.busy or r.busy > 0
    assert all(b > 0 for b in r.busy_per_worker)


@pytest.mark.slow
def test_a_2_worker_run_reports_how_the_workers_shared_the_streams() -> None:
    # The window the workers wrote ahead in and the rows that moved: what ``streamcli bench`` prints as its
    # "scheduling" line.
    source = ChunkedFrames(8, 20, 40)
    (r,) = run_benchmark(lambda w: StreamLoader(source, 4, 4, num_workers=w), [2], batches=5, warmup=1, repeats=1)
    with StreamLoader(source, 4, 4, num_workers=2) as loader:
        shallow = loader.prefetch
    assert r.window == shallow
    # A row changes hands at a batch boundary, at most once per batch it is written in: the 1 + 5 batches taken
    # and the window written ahead of them, 4 rows each.
    assert r.rows_moved in range(4 * (1 + 5 + shallow) + 1), r.rows_moved
    assert not r.balanced  # cheap steps: each worker keeps its block of rows
    assert scheduling(r) == f"window {shallow} batches ahead; {r.rows_moved} rows moved to an idle worker"
    assert scheduling(dataclasses.replace(r, balanced=True)) == (
        f"window {shallow} batches ahead; balanced: a row's next stream goes to whichever worker is free; "
        f"{r.rows_moved} rows moved to an idle worker"
    )
    assert scheduling(dataclasses.replace(r, workers=0)) is None


@pytest.mark.parametrize("kind", [ChunkedFrames, BlockFrames])
def test_torch_baseline_in_process_is_coherent_for_steps_and_blocks(kind: type[ChunkedFrames]) -> None:
    source = kind(7, 3, 30)
    check = CoherenceCheck(source, 5)
    base = TorchBaseline(source, 5, 4, 0, seed=3)
    try:
        for batch in base:
            assert set(batch) == {"frame"} and batch["frame"].shape == (4, 5, 3, 64, 64)
            check.feed(decode_stamps(batch["frame"].numpy()))
    finally:
        base.close()
    assert check.finish() == []
    assert base.stats.steps == source.total_steps()


@pytest.mark.slow
def test_torch_baseline_with_spawn_workers_reads_a_block_source() -> None:
    source = BlockFrames(6, 3, 30)
    check = CoherenceCheck(source, 4)
    base = TorchBaseline(source, 4, 4, 2)  # uneven work, spawn workers unpickle the source by module name
    try:
        for batch in base:
            check.feed(decode_stamps(batch["frame"].numpy()))
    finally:
        base.close()
    assert check.finish() == []


def test_the_library_bench_module_only_measures_its_peer_and_verdicts_live_outside() -> None:
    import streamcli.bench as lib

    for name in ("TorchBaseline", "run_baseline", "RowsDataset", "bottleneck", "imbalance", "scheduling"):
        assert not hasattr(lib, name), name


def test_bench_has_no_baseline_option_any_more() -> None:
    from typer.testing import CliRunner

    from streamcli.cli import app

    result = CliRunner().invoke(app, ["bench", "sine", "--baseline"])
    assert result.exit_code == 2 and "--baseline" in result.output
