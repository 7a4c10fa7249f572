"""A state is sealed with a digest of its content: one integer changed anywhere is refused, even where the value it
takes could come from a real run (issue 46 §11). A state saved before the seal existed still loads."""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
import torch
from _resume import assert_same, run_epochs
from _sources import CountingSource

from streamcli import StreamLoader
from streamcli.errors import StateError
from streamcli.tbptt import RowState

LENGTHS = [4, 6, 3, 5, 7, 2, 9, 1]


def _saved(batch_size: int = 2, after: int = 3, **kw: Any) -> dict[str, Any]:
    with StreamLoader(CountingSource(LENGTHS), batch_size, 3, seed=3, **kw) as loader:
        it = iter(loader)
        for _ in range(after):
            next(it)
        return json.loads(json.dumps(loader.state_dict()))


def _integer_paths(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every place in ``node`` that holds an integer (not a bool), as a path of keys and indices."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _integer_paths(value, (*path, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _integer_paths(value, (*path, i))
    elif isinstance(node, int) and not isinstance(node, bool):
        yield path


def _changed(state: dict[str, Any], path: tuple[Any, ...], delta: int) -> dict[str, Any]:
    out = copy.deepcopy(state)
    node = out
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] += delta
    return out


def test_every_single_integer_change_of_a_real_state_is_refused() -> None:
    state = _saved()
    paths = list(_integer_paths(state))
    assert len(paths) >= 20  # the rows' cursors, tickets, batch, epoch, the fingerprint's settings
    accepted = []
    for path in paths:
        for delta in (-1, 1):
            with StreamLoader(CountingSource(LENGTHS), 2, 3, seed=3) as loader:
                try:
                    loader.load_state_dict(_changed(state, path, delta))
                except StateError:
                    continue
                accepted.append((path, delta))
    assert not accepted, f"changed states accepted: {accepted}"


def test_a_changed_state_is_refused_naming_its_digest() -> None:
    state = _saved()
    assert isinstance(state["digest"], str) and state["digest"].startswith("sha256:")
    row = next(b for b, r in enumerate(state["rows"]) if r[2] == 1)
    state["rows"][row][1] -= 1  # a position a real run passes through: only the seal can tell
    with StreamLoader(CountingSource(LENGTHS), 2, 3, seed=3) as loader:
        with pytest.raises(StateError, match=r"digest.*sha256.*changed after state_dict\(\)"):
            loader.load_state_dict(state)
        assert loader.state_dict()["batch"] == 0  # a refused state changes nothing


def test_a_tampered_re_plan_is_refused_by_the_seal() -> None:
    with StreamLoader(CountingSource(LENGTHS), 3, 3, seed=3) as b:
        b.load_state_dict(_saved(batch_size=2, after=3))  # another global batch: the rest is re-planned
        state = json.loads(json.dumps(b.state_dict()))
    assert state["replan"]["streams"], "the state holds a re-plan with streams in flight"
    dropped = copy.deepcopy(state)
    dropped["replan"]["streams"].pop()  # a stream removed
    more = copy.deepcopy(state)
    more["replan"]["tickets"] += 2
    for bad in (dropped, more):
        with StreamLoader(CountingSource(LENGTHS), 3, 3, seed=3) as c:
            with pytest.raises(StateError, match="digest"):
                c.load_state_dict(bad)
    with StreamLoader(CountingSource(LENGTHS), 3, 3, seed=3) as c:
        c.load_state_dict(state)  # the untouched re-plan loads
        assert sum(1 for _ in c) > 0


def test_a_state_from_before_the_seal_still_loads_and_resumes_exactly(caplog: pytest.LogCaptureFixture) -> None:
    with StreamLoader(CountingSource(LENGTHS), 2, 3, seed=3) as ref:
        want = run_epochs(ref, 1)
    state = _saved()
    del state["digest"]  # as a streamcli before the seal saved it
    with StreamLoader(CountingSource(LENGTHS), 2, 3, seed=3) as loader:
        with caplog.at_level(logging.WARNING, logger="streamcli"):
            loader.load_state_dict(state)
        assert any("no digest" in r.getMessage() for r in caplog.records)
        assert_same(want[3:], run_epochs(loader, 1), "an unsealed state")


def test_a_row_states_changed_key_is_refused() -> None:
    rs = RowState()
    with StreamLoader(CountingSource(LENGTHS), 2, 3, seed=3) as loader:
        batch = next(iter(loader))
        assert rs.begin(batch) is None
        rs.update(torch.ones(1, 2, 4))
    state = rs.state_dict()
    assert state["digest"].startswith("sha256:")
    state["keys"][0][2] += 1  # the row's position
    with pytest.raises(StateError, match="digest"):
        RowState().load_state_dict(state)
    old = rs.state_dict()
    del old["digest"]
    RowState().load_state_dict(old)  # a state from before the seal loads
