"""``StreamLoader(trace=FILE)`` and ``--trace``: a valid Chrome / Perfetto trace with the consumer's waits on its
thread and every worker's fills, split into plan, open, read and write."""

from __future__ import annotations

import json
import os
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from _sources import CountingSource
from conftest import needs_shared, shared_data
from typer.testing import CliRunner

from streamcli import StreamLoader, load_source
from streamcli.cli import app

KEYS = {"ph", "ts", "dur", "pid", "tid", "name"}


def complete_events(path: Path) -> list[dict[str, Any]]:
    trace = json.loads(path.read_text())
    assert set(trace) >= {"traceEvents"}
    events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert events and all(set(e) >= KEYS and e["dur"] >= 0 for e in events)
    assert not list(path.parent.glob(path.name + ".part-*"))  # the workers' parts were merged and deleted
    return events


def test_an_in_process_trace_has_one_wait_per_batch_and_each_fill_holds_its_read(tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    with StreamLoader(CountingSource([30, 25, 40, 12]), 2, 5, trace=path) as loader:
        n = sum(1 for _ in loader)
        consumer = threading.get_native_id()
    events = complete_events(path)
    waits = [e for e in events if e["name"] == "wait"]
    assert len(waits) == n and {(e["pid"], e["tid"]) for e in waits} == {(os.getpid(), consumer)}
    assert sorted(e["args"]["batch"] for e in waits) == list(range(n))
    fills = [e for e in events if e["name"] == "fill"]
    reads = {e["args"]["batch"]: e for e in events if e["name"] == "read"}
    assert len(fills) >= n - 1 and len(reads) >= n - 1
    for fill in fills:
        read = reads[fill["args"]["batch"]]
        assert fill["ts"] <= read["ts"] and read["ts"] + read["dur"] <= fill["ts"] + fill["dur"] + 1e-3
    assert Counter(e["name"] for e in events)["open"] >= 4  # every stream was opened once at least


def test_without_a_trace_nothing_is_written(tmp_path: Path) -> None:
    with StreamLoader(CountingSource([10, 10]), 2, 5) as loader:
        list(loader)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
@needs_shared("video")
def test_a_trace_with_two_workers_has_events_on_the_consumers_thread_and_on_every_worker(tmp_path: Path) -> None:
    shared = shared_data("video")
    assert shared is not None
    for name in ("realshort.mp4", "homer.avi", "bikes.mp4", "Effet_force_magnetique.ogv"):
        (tmp_path / name).symlink_to(shared / name)
    path = tmp_path / "trace.json"
    with StreamLoader(load_source("video", str(tmp_path), size=(24, 32)), 4, 8, num_workers=2, trace=path) as loader:
        for k, _ in enumerate(loader):
            if k == 20:
                break
        consumer = threading.get_native_id()
    events = complete_events(path)
    by_pid: dict[int, Counter[str]] = {}
    for e in events:
        by_pid.setdefault(e["pid"], Counter())[e["name"]] += 1
    workers = set(by_pid) - {os.getpid()}
    assert len(workers) == 2  # two worker processes, each with events of its own
    assert by_pid[os.getpid()]["wait"] == 21
    assert any(e["name"] == "wait" and e["tid"] == consumer for e in events)
    for w in workers:
        assert {"fill", "plan", "read", "write", "open"} <= set(by_pid[w]), by_pid[w]
    names = {e["args"]["name"] for e in json.loads(path.read_text())["traceEvents"] if e["ph"] == "M"}
    assert {"consumer", "streamcli worker 0", "streamcli worker 1"} <= names


@pytest.mark.slow
@needs_shared("text")
@pytest.mark.parametrize("command", ["preview", "export", "inspect", "bench"])
def test_each_command_writes_a_trace_with_trace(tmp_path: Path, command: str) -> None:
    text = shared_data("text")
    path = tmp_path / f"{command}.json"
    common = ["-b", "2", "-t", "8", "--trace", str(path)]
    args = {
        "preview": ["preview", "text", str(text), "--batches", "3", "-w", "1"],
        "export": ["export", "text", str(text), str(tmp_path / "out"), "--batches", "3", "-w", "1"],
        "inspect": ["inspect", "text", str(text), "--batch", "4", "--json", "-w", "1"],
        "bench": ["bench", "text", str(text), "-w", "1", "--batches", "3", "--warmup", "0", "--repeats", "1"],
    }[command]
    result = CliRunner().invoke(app, [*args, *common])
    assert result.exit_code == 0, result.output
    events = complete_events(path)
    pids = {e["pid"] for e in events}
    assert any(e["name"] == "wait" for e in events) and any(e["name"] == "read" for e in events)
    assert len(pids) == 2  # the consumer and its one worker


def test_tracing_off_costs_no_test_in_the_loops_that_copy_steps() -> None:
    """The tracer is tested once per batch and per stream opened (``streamcli.trace``), never inside the loops
    that read and copy the steps: no loop of the per-step fill modules names it."""
    import ast
    import inspect

    from streamcli.fills import iterators, windows

    for module in (iterators, windows):
        tree = ast.parse(inspect.getsource(module))
        loops = [n for n in ast.walk(tree) if isinstance(n, ast.For | ast.While | ast.comprehension)]
        assert len(loops) >= 3, module.__name__  # the copy loops are there to be checked
        named = [
            getattr(n, "lineno", 0)
            for loop in loops
            for n in ast.walk(loop)
            if (isinstance(n, ast.Attribute) and n.attr == "tracer") or (isinstance(n, ast.Name) and n.id == "tracer")
        ]
        assert named == [], f"{module.__name__} tests the tracer inside a loop, at lines {named}"
    assert "tracer" in inspect.getsource(iterators.Rows.fill)  # where it is tested: once per batch
