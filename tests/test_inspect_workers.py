"""``streamcli inspect`` names the worker that made each row: from the loader's options (fixed row blocks,
``split_rows``; random-access sources batch by batch), checked against the workers themselves (each step written
by a source that records its process id, and the trace that names each worker's process); under balance, from
the batch's record of who wrote each row; ``"main"`` without workers."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from _sources import CountingSource, PidSource, PidWindowSource
from typer.testing import CliRunner

from streamcli import StreamLoader
from streamcli.batch import Batch
from streamcli.cli import app
from streamcli.inspection import LoaderBatches, batch_record
from streamcli.inspection.workers import RowWorkers

LENGTHS = [9, 14, 7, 12, 10, 8, 11, 13]


def policy(workers: int, *, whole: bool = False, balance: bool | None = False, known: bool = True) -> RowWorkers:
    return RowWorkers(workers, 5, whole and known, balance, known)


def at(index: int) -> Batch:
    return cast(Batch, SimpleNamespace(index=index, batch_size=5))


def test_the_worker_of_a_row_follows_from_the_loaders_options() -> None:
    assert [policy(0).worker(at(3), b) for b in range(5)] == ["main"] * 5
    assert [policy(2).worker(at(3), b) for b in range(5)] == [0, 0, 1, 1, 1]  # split_rows(5, 2): rows 0-1, 2-4
    assert [policy(3).worker(at(0), b) for b in range(5)] == [0, 0, 1, 2, 2]
    assert {policy(2, whole=True).worker(at(k), 4) for k in (0, 2, 8)} == {0}  # batch by batch
    assert {policy(2, whole=True).worker(at(k), 0) for k in (1, 3)} == {1}
    assert policy(2, balance=True).worker(at(0), 0) == "moves"
    assert policy(2, balance=None, known=False).worker(at(0), 0) == "moves"  # unknown lengths balance
    assert policy(2, balance=False, known=False).worker(at(0), 4) == 1  # unless told not to
    assert policy(2, balance=None).worker(at(0), 4) == 1 and policy(2, balance=None).worker(at(0), 4, True) == "moves"
    assert policy(1, balance=True).worker(at(7), 4) == 0  # one worker has no one to balance with


def pids_of_workers(trace: Path) -> dict[int, int]:
    """pid -> worker number, from the trace's process names ("streamcli worker W")."""
    events = json.loads(trace.read_text())["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "process_name"}
    return {pid: int(n.rsplit(" ", 1)[1]) for pid, n in names.items() if n.startswith("streamcli worker")}


@pytest.mark.slow
@pytest.mark.parametrize("source", [PidSource(LENGTHS), PidWindowSource(LENGTHS)], ids=["row blocks", "batches"])
def test_each_rows_worker_is_the_process_that_wrote_its_steps(tmp_path: Path, source: CountingSource) -> None:
    trace = tmp_path / "trace.json"
    got: dict[int, tuple[Any, list[Any]]] = {}
    with StreamLoader(source, 3, 4, num_workers=2, balance=False, seed=1, trace=trace) as loader:
        batches = LoaderBatches(loader)
        try:
            for k in (0, 1, 5, 6):
                batch = batches.batch(k)
                got[k] = (batch.clone(), batches.workers_of(k, batch) or [])
        finally:
            batches.close()
    worker_of_pid = pids_of_workers(trace)
    assert sorted(worker_of_pid.values()) == [0, 1]
    for k, (batch, workers) in got.items():
        x, valid = batch["x"].numpy(), batch.valid.numpy()
        for b in range(3):
            pids = set(x[:, b, 0][valid[:, b]].tolist())
            assert len(pids) == 1, (k, b, pids)
            assert workers[b] == worker_of_pid[pids.pop()], (k, b)
    if isinstance(source, PidWindowSource):
        assert [got[k][1] for k in (0, 1)] == [[0, 0, 0], [1, 1, 1]]
    else:
        assert got[0][1] == [0, 0, 1]


@pytest.mark.slow
@pytest.mark.parametrize("known", [True, False], ids=["known lengths", "unknown lengths"])
def test_under_balance_each_rows_worker_is_the_process_that_wrote_it(tmp_path: Path, known: bool) -> None:
    trace = tmp_path / "trace.json"
    source = PidSource([40, 3, 5, 36, 4, 6, 30, 5, 7, 4, 33, 6], report_length=known)  # uneven: rows move
    seen: list[tuple[int, int, int]] = []  # (batch, row, pid) of each row's steps
    workers: list[Any] = []
    with StreamLoader(source, 4, 3, num_workers=2, balance=True, seed=2, trace=trace) as loader:
        row_workers = RowWorkers.of(loader, lengths_known=known)
        for k, batch in enumerate(loader):
            x, valid = batch["x"].numpy(), batch.valid.numpy()
            for b in range(4):
                pids = set(x[:, b, 0][valid[:, b]].tolist())
                assert len(pids) <= 1, (k, b, pids)  # a row moves only between batches
                if pids:
                    seen.append((k, b, pids.pop()))
                    workers.append(row_workers.worker(batch, b, balanced_now=True))
    worker_of_pid = pids_of_workers(trace)
    assert "moves" not in workers
    assert workers == [worker_of_pid[pid] for _, _, pid in seen]
    assert set(workers) == {0, 1}


def test_the_json_of_batch_k_names_each_rows_worker(tmp_path: Path) -> None:
    book = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "text"
    args = ["inspect", "text", str(book), "-b", "3", "-t", "8", "-w", "0", "--batch", "2", "--json"]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)["rows"]
    assert [row["worker"] for row in rows] == ["main"] * 3


def test_a_record_without_workers_has_no_worker_key() -> None:
    with StreamLoader(CountingSource(LENGTHS), 3, 4) as loader:
        batch = next(iter(loader))
        assert all("worker" not in r for r in batch_record(batch, 0, loader.stream_name)["rows"])
        assert [r["worker"] for r in batch_record(batch, 0, str, [0, 0, 1])["rows"]] == [0, 0, 1]
