"""An epoch starts at an iterator's first ``next()``: an iterator made and dropped (as Lightning does) takes none."""

from __future__ import annotations

import pytest
from _resume import run_epochs
from _sources import CountingSource

from streamcli import StreamLoader


@pytest.mark.parametrize("workers", [0, pytest.param(1, marks=pytest.mark.slow)])
def test_an_iterator_never_advanced_does_not_consume_an_epoch(workers: int, no_leaks: None) -> None:
    with StreamLoader(CountingSource([4, 5, 6]), 2, 3, num_workers=workers) as loader:
        n = len(loader)
        it = iter(loader)
        it2 = iter(loader)
        assert len(loader) == n and loader.state_dict()["epoch"] == 0
        first = next(it2)
        assert first.epoch == 0 and first.index == 0
        del first
        assert sum(1 for _ in it2) == n - 1
        del it
        assert next(iter(loader)).epoch == 1


def test_a_dropped_iterator_leaves_a_loaded_state_for_the_one_that_runs() -> None:
    with StreamLoader(CountingSource([4, 5, 6, 7]), 2, 3) as a:
        want = run_epochs(a, 1)
    with StreamLoader(CountingSource([4, 5, 6, 7]), 2, 3) as a:
        it = iter(a)
        next(it)
        next(it)
        state = a.state_dict()
    with StreamLoader(CountingSource([4, 5, 6, 7]), 2, 3) as b:
        b.load_state_dict(state)
        iter(b)  # a check, dropped
        assert b.state_dict() == state
        got = run_epochs(b, 1)
    assert len(got) == len(want) - 2
    assert all((x["x"] == y["x"]).all() for x, y in zip(want[2:], got, strict=True))


def test_an_older_iterator_is_superseded_when_a_newer_one_starts() -> None:
    with StreamLoader(CountingSource([9, 9]), 2, 3) as loader:
        old = iter(loader)
        next(old)
        new = iter(loader)
        next(old)  # the newer one has not started: the older goes on
        assert next(new).epoch == 1
        with pytest.raises(RuntimeError, match="superseded"):
            next(old)
