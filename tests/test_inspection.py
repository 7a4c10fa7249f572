"""Any batch of a run, read alone (``streamcli.inspection``): equal to the K-th batch a plain loader hands out, and
reached without reading the batches before it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from _sources import CountingSource

from streamcli import StreamLoader
from streamcli.batch import Batch
from streamcli.inspection import ExportBatches, LoaderBatches, RunEnded, batch_record

LENGTHS = [60, 45, 80, 33, 71, 52, 64, 29, 90]  # 524 steps: 44 batches of 3 x 4 in epoch 0 and more after
KW = dict(seed=3, segment=0)


class OpenCounting(CountingSource):
    """Counts its ``open()`` calls (in-process only: a class attribute)."""

    opens = 0

    def open(self, item: int, start: int = 0) -> Iterator[dict[str, np.ndarray]]:
        OpenCounting.opens += 1
        return super().open(item, start)


def plain_run(source: object, n: int, **kw: object) -> list[Batch]:
    """The first ``n`` batches a plain loader hands out, epoch after epoch."""
    out: list[Batch] = []
    with StreamLoader(source, 3, 4, **kw) as loader:  # type: ignore[arg-type]
        while len(out) < n:
            for batch in loader:
                out.append(batch.clone())
                if len(out) == n:
                    break
    return out


def same(a: Batch, b: Batch) -> bool:
    flags = ("is_first", "valid", "stream", "position", "reset", "replayed")
    return (
        all(np.array_equal(getattr(a, f).numpy(), getattr(b, f).numpy()) for f in flags)
        and a.epoch == b.epoch
        and a.index == b.index
        and all(np.array_equal(a[k].numpy(), b[k].numpy()) for k in a)
    )


def test_batch_k_is_the_kth_batch_a_plain_loader_hands_out_for_k_0_5_40_and_past_the_epoch() -> None:
    want = plain_run(CountingSource(LENGTHS), 90, **KW)
    nxt = next(k for k, b in enumerate(want) if b.epoch == 1)
    assert 45 < nxt < 80  # the run goes on into the next epoch
    with StreamLoader(CountingSource(LENGTHS), 3, 4, **KW) as loader:  # type: ignore[arg-type]
        batches = LoaderBatches(loader)
        assert batches.seeks
        for k in (40, 41, 5, 0, nxt + 3, 6, nxt - 1, nxt):  # forward, back, on by one (the loader's own iterator)
            assert same(batches.batch(k), want[k]), k
        batches.close()
    assert batches.opened_at == [40, 5, 0, nxt + 3, 6, nxt - 1]  # 41 came from the iterator, with no seek


def test_going_to_batch_40_opens_no_more_streams_than_going_to_batch_0_plus_a_constant() -> None:
    opens = {}
    for k in (0, 40):
        with StreamLoader(OpenCounting(LENGTHS), 3, 4, **KW) as loader:  # type: ignore[arg-type]
            batches = LoaderBatches(loader)
            OpenCounting.opens = 0
            batches.batch(k)
            opens[k] = OpenCounting.opens
            batches.close()
    assert opens[0] >= 3  # every row opened a stream
    assert opens[40] <= opens[0] + 3  # the rows' streams reopened at their positions, none of the 40 batches read


def test_without_lengths_going_to_k_replays_and_reports_progress() -> None:
    want = plain_run(CountingSource(LENGTHS, report_length=False), 12, **KW)
    seen: list[tuple[int, int]] = []
    with StreamLoader(CountingSource(LENGTHS, report_length=False), 3, 4, **KW) as loader:  # type: ignore[arg-type]
        batches = LoaderBatches(loader, progress=lambda done, total: seen.append((done, total)))
        assert not batches.seeks
        assert same(batches.batch(10), want[10])
        assert seen[0] == (0, 10) and seen[-1] == (10, 10)
        assert same(batches.batch(2), want[2])  # back: replayed from the start
        assert seen[-1] == (2, 2)


def test_a_batch_past_the_runs_end_is_refused_naming_the_runs_length() -> None:
    with StreamLoader(CountingSource([5]), 2, 4, epoch_end="drop") as loader:  # a row runs dry at once
        batches = LoaderBatches(loader)
        with pytest.raises(RunEnded, match="batch 3 is past the run's end: it has 0 batches"):
            batches.batch(3)
        batches.close()


def test_counted_from_a_saved_state_batch_k_is_the_kth_after_the_resume() -> None:
    with StreamLoader(CountingSource(LENGTHS), 3, 4, **KW) as loader:  # type: ignore[arg-type]
        it = iter(loader)
        for _ in range(7):
            next(it)
        state = loader.state_dict()
        rest = [next(it).clone() for _ in range(20)]
    with StreamLoader(CountingSource(LENGTHS), 3, 4, **KW) as loader:  # type: ignore[arg-type]
        batches = LoaderBatches(loader, start=state)
        assert same(batches.batch(12), rest[12]) and same(batches.batch(3), rest[3])
        batches.close()


def test_the_json_record_names_each_rows_stream_item_positions_and_flags() -> None:
    with StreamLoader(CountingSource(LENGTHS), 3, 4, **KW) as loader:  # type: ignore[arg-type]
        batches = LoaderBatches(loader)
        batch = batches.batch(5)
        rec = batch_record(batch, 5, loader.stream_name)
        batches.close()
    assert rec["batch"] == 5 and rec["epoch"] == 0 and len(rec["rows"]) == 3
    for row in rec["rows"]:
        b = row["row"]
        assert row["positions"] == batch.position[:, b].tolist()
        assert row["valid"] == batch.valid[:, b].tolist() and row["is_first"] == batch.is_first[:, b].tolist()
        if row["stream"] >= 0:
            assert row["item"] == str(row["stream"])
            assert row["stream"] == int(batch.stream[:, b][batch.valid[:, b]][0])


def test_an_exports_batch_k_is_read_from_its_shard_alone(tmp_path: Path) -> None:
    from streamcli.shards import make_header
    from streamcli.shards.exporting import export_loader

    out = tmp_path / "out"
    with StreamLoader(CountingSource(LENGTHS), 3, 4, **KW) as loader:  # type: ignore[arg-type]
        header = make_header(
            fields=loader.fields,
            batch_size=3,
            time_steps=4,
            layout="TB",
            source={"plugin": "counting"},
            loader={"seed": 3},
            shard_bytes=1,
            compress=False,
        )
        header["batches_per_shard"] = 7
        export_loader(loader, out, header, epochs=2)
    want = plain_run(CountingSource(LENGTHS), 90, **KW)
    batches = ExportBatches(out)
    for k in (0, 5, 40, 80):
        assert same(batches.batch(k), want[k]), k
    with pytest.raises(IndexError, match="it has"):
        batches.batch(len(batches))


def test_a_streams_strip_lists_every_batch_and_row_it_spans_from_the_flags_alone() -> None:
    from streamcli.inspection.strip import first_valid, span_around, strip_of

    want = plain_run(CountingSource(LENGTHS), 40, **KW)
    with StreamLoader(OpenCounting(LENGTHS), 3, 4, **KW) as loader:  # type: ignore[arg-type]
        batches = LoaderBatches(loader)
        batch = batches.batch(20)
        stream, position = first_valid(batch, 1)  # type: ignore[misc]
        OpenCounting.opens = 0
        strip = strip_of(batches.scan(*span_around(20, position, LENGTHS[stream], 4)), stream)
        assert OpenCounting.opens == 0  # the stand-in's flags: no step of the source read
        batches.close()
    real = [(k, b) for k, w in enumerate(want) for b in range(3) if (w.stream[:, b][w.valid[:, b]] == stream).any()]
    assert [(p.batch, p.row) for p in strip] == real
    assert strip[0].first == 0 and strip[0].starts and strip[-1].last == LENGTHS[stream] - 1


def test_an_exports_strip_reads_the_flags_of_the_batches_it_spans(tmp_path: Path) -> None:
    from streamcli.inspection.strip import strip_of
    from streamcli.shards import make_header
    from streamcli.shards.exporting import export_loader

    out = tmp_path / "out"
    with StreamLoader(CountingSource(LENGTHS), 3, 4, **KW) as loader:  # type: ignore[arg-type]
        header = make_header(
            fields=loader.fields,
            batch_size=3,
            time_steps=4,
            layout="TB",
            source={"plugin": "counting"},
            loader={"seed": 3},
            shard_bytes=1,
            compress=False,
        )
        header["batches_per_shard"] = 5
        export_loader(loader, out, header, epochs=1)
    want = plain_run(CountingSource(LENGTHS), 30, **KW)
    batches = ExportBatches(out)
    scanned = list(batches.scan(3, 23))  # across four shards
    assert [k for k, _ in scanned] == list(range(3, 23))
    assert all(np.array_equal(b.stream.numpy(), want[k].stream.numpy()) for k, b in scanned)
    stream = int(want[10].stream[0, 0])
    real = [
        (k, b) for k in range(3, 23) for b in range(3) if (want[k].stream[:, b][want[k].valid[:, b]] == stream).any()
    ]
    assert [(p.batch, p.row) for p in strip_of(scanned, stream)] == real
