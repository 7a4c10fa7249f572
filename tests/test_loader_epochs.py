"""Epochs: iterating again starts the next one; empty sources and empty streams."""

from __future__ import annotations

from pathlib import Path

import pytest
from _invariants import collect
from _sources import CountingSource

from streamcli import StreamLoader

HERE = Path(__file__).resolve().parent


def test_epochs_restart_and_superseded_iterators() -> None:
    with StreamLoader(CountingSource([5, 9, 3, 7]), 2, 2, seed=3) as loader:
        it = iter(loader)
        next(it)
        second = collect(loader)  # abandons epoch 0 mid-way; epoch 1 is whole
        assert sum(int(b["valid"].sum()) for b in second) == 24
        with pytest.raises(RuntimeError, match="superseded"):
            next(it)
        assert next(b.epoch for b in loader) == 2


def test_empty_source_and_all_empty_streams() -> None:
    for lengths in ([], [0, 0, 0]):
        for end in ("pad", "restream", "drop"):
            with StreamLoader(CountingSource(lengths), 2, 2, epoch_end=end) as loader:
                assert list(loader) == [] and len(loader) == 0
