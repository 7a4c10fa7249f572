"""The docs' examples teach the fast, light patterns (issue 46, point 9): the table source loads its data once per
worker (not in ``__init__``, never pickled to the workers), and the migration guide's "After" uses ``window()``."""

from __future__ import annotations

import pickle
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_docs_examples import block_with

from streamcli import StreamLoader
from streamcli.source import has_window


def load_block(text: str, monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """The docs block that contains ``text``, run as a module (not as __main__) that pickle can find."""
    module = types.ModuleType("docs_block")
    monkeypatch.setitem(sys.modules, "docs_block", module)
    exec(compile(block_with(text), "docs_block", "exec"), module.__dict__)
    return module


def steps_per_stream(loader: StreamLoader) -> dict[int, np.ndarray]:
    out: dict[int, list[np.ndarray]] = {}
    for batch in loader:
        x, valid, stream = batch["x"].numpy(), batch.valid.numpy(), batch.stream.numpy()
        for b in range(x.shape[1]):  # each row in time order
            for t in range(x.shape[0]):
                if valid[t, b]:
                    out.setdefault(int(stream[t, b]), []).append(x[t, b].copy())
    return {k: np.stack(v) for k, v in out.items()}


def test_the_table_example_loads_its_tables_once_per_process_and_pickles_only_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = load_block("class TableSource", monkeypatch)
    tables = [np.full((50_000 + i, 8), i, dtype=np.float32) for i in range(3)]  # 1.6 MB each
    for i, t in enumerate(tables):
        np.save(tmp_path / f"table{i}.npy", t)
    loads: list[str] = []
    real_load = np.load

    def counted_load(path: Any, *args: Any, **kwargs: Any) -> Any:
        loads.append(str(path))
        return real_load(path, *args, **kwargs)

    monkeypatch.setattr(np, "load", counted_load)
    source: Any = docs.TableSource(str(tmp_path))
    assert loads == []  # constructing reads nothing
    assert source.length(2) == 50_002 and len(loads) == 3  # first use loads every table, once
    source.length(0), source.window(1)
    assert len(loads) == 3
    sent = pickle.dumps(source)
    assert len(sent) < 2_000, len(sent)  # what each worker receives: names, not the 4.8 MB of tables
    worker: Any = pickle.loads(sent)
    worker.setup_worker()  # a worker loads them once, before its first open
    assert len(loads) == 6
    np.testing.assert_array_equal(worker.window(1)["x"], tables[1])


def test_the_migration_guides_after_example_uses_window_and_delivers_every_step(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    docs = load_block("class ArraySource", monkeypatch)
    arrays = [np.random.default_rng(i).standard_normal((20 + 7 * i, 4)).astype(np.float32) for i in range(5)]
    source = docs.ArraySource(arrays)
    assert has_window(source)
    with StreamLoader(source, batch_size=2, time_steps=8) as loader:
        got = steps_per_stream(loader)
    assert sorted(got) == list(range(5))
    for i, a in enumerate(arrays):
        np.testing.assert_array_equal(got[i], a)
