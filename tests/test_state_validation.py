"""A state whose values cannot come from a real run is refused, naming the field, before anything is applied."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from _resume import run_epochs
from _sources import CountingSource
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamcli import StreamLoader
from streamcli.errors import StateError

LENGTHS = [4, 6, 3, 5, 7, 2]


def _state(after: int = 1) -> dict[str, Any]:
    with StreamLoader(CountingSource(LENGTHS), 2, 3, shuffle=False) as loader:
        it = iter(loader)
        for _ in range(after):
            next(it)
        return loader.state_dict()


def _live_row(state: dict[str, Any]) -> int:
    return next(b for b, row in enumerate(state["rows"]) if row[2] == 1)


def _beyond_length(s: dict[str, Any]) -> str:
    b = _live_row(s)
    s["rows"][b][1] = LENGTHS[s["rows"][b][0]] + 5
    return rf"rows\[{b}\].*position {s['rows'][b][1]}.*beyond"


def _tickets_beyond(s: dict[str, Any]) -> str:
    s["tickets"] = 40
    return r"tickets=40"


def _duplicate_item(s: dict[str, Any]) -> str:
    b = _live_row(s)
    s["rows"][1 - b] = list(s["rows"][b])
    return rf"rows\[\d\].*stream {s['rows'][b][0]}.*also"


def _garbage_skipped(s: dict[str, Any]) -> str:
    s["skipped"] = 5
    return r"skipped"


def _garbage_skip_entry(s: dict[str, Any]) -> str:
    s["skipped"] = [[99, 0]]
    return r"skipped\[0\]"


def _bool_in_rows(s: dict[str, Any]) -> str:
    s["rows"][0][1] = True
    return r"rows\[0\].*integers"


def _bool_batch(s: dict[str, Any]) -> str:
    s["batch"] = True
    return r"batch=True"


def _batch_beyond(s: dict[str, Any]) -> str:
    s["batch"] = 50
    return r"batch=50"


def _unknown_item(s: dict[str, Any]) -> str:
    s["rows"][0] = [17, 0, 0, 0]
    return r"rows\[0\].*stream 17"


TAMPERINGS = [_beyond_length, _tickets_beyond, _duplicate_item, _garbage_skipped, _garbage_skip_entry, _bool_in_rows,
              _bool_batch, _batch_beyond, _unknown_item]  # fmt: skip


@pytest.mark.parametrize("tamper", TAMPERINGS, ids=lambda f: f.__name__.strip("_"))
def test_a_tampered_state_is_refused_naming_the_field(tamper: Any) -> None:
    state = _state()
    match = tamper(state)
    with StreamLoader(CountingSource(LENGTHS), 2, 3, shuffle=False) as loader:
        with pytest.raises(StateError, match=match):
            loader.load_state_dict(state)


@pytest.mark.parametrize("tamper", TAMPERINGS, ids=lambda f: f.__name__.strip("_"))
def test_the_loader_runs_its_own_epoch_unchanged_after_a_refused_state(tamper: Any) -> None:
    with StreamLoader(CountingSource(LENGTHS), 2, 3, shuffle=False) as ref:
        want = run_epochs(ref, 1)
    state = _state()
    tamper(state)
    with StreamLoader(CountingSource(LENGTHS), 2, 3, shuffle=False) as loader:
        before = copy.deepcopy(loader.state_dict())
        with pytest.raises(StateError):
            loader.load_state_dict(state)
        assert loader.state_dict() == before and loader.stats.skipped == 0
        got = run_epochs(loader, 1)
    assert len(got) == len(want) and all((a["x"] == b["x"]).all() for a, b in zip(want, got, strict=True))


def test_every_real_state_of_two_epochs_is_accepted() -> None:
    for kw in ({}, {"boundary": "pack"}, {"epoch_end": "restream"}, {"epoch_end": "drop"}, {"segment": 2}):
        with StreamLoader(CountingSource(LENGTHS), 2, 3, **kw) as loader:  # type: ignore[arg-type]
            states = [loader.state_dict()]
            for _ in range(2):
                for _ in loader:
                    states.append(loader.state_dict())
        with StreamLoader(CountingSource(LENGTHS), 2, 3, **kw) as other:  # type: ignore[arg-type]
            for s in states:
                other.load_state_dict(s)


def test_a_state_from_items_of_other_lengths_is_refused() -> None:
    state = _state()
    with StreamLoader(CountingSource([*LENGTHS[:-1], 9]), 2, 3, shuffle=False) as loader:
        with pytest.raises(StateError, match="different stream lengths"):
            loader.load_state_dict(state)


@pytest.mark.parametrize(("version", "match"), [("1", r"version='1' must be an integer"), (0, r"older"),
                                                (True, r"must be an integer"), (99, r"newer.*\(2\)")])  # fmt: skip
def test_a_state_version_of_the_wrong_kind_or_age_says_so(version: object, match: str) -> None:
    state = _state()
    state["version"] = version
    with StreamLoader(CountingSource(LENGTHS), 2, 3, shuffle=False) as loader:
        with pytest.raises(StateError, match=match):
            loader.load_state_dict(state)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    lengths=st.lists(st.integers(0, 12), min_size=1, max_size=8),
    B=st.integers(1, 3),
    T=st.integers(1, 4),
    boundary=st.sampled_from(["pad", "pack"]),
    epoch_end=st.sampled_from(["pad", "restream", "drop"]),
    segment=st.sampled_from([0, 3]),
    bad=st.integers(-1, 7),
)
def test_no_state_a_real_run_makes_is_refused(
    lengths: list[int], B: int, T: int, boundary: str, epoch_end: str, segment: int, bad: int
) -> None:
    from _sources import RaisingSource

    kw: dict[str, Any] = dict(boundary=boundary, epoch_end=epoch_end, segment=segment, on_error="skip", seed=1)

    def make() -> RaisingSource:  # stream ``bad`` (if any) fails at its step 1: skips and short rows too
        return RaisingSource(lengths, bad=bad, at=1)

    with StreamLoader(make(), B, T, **kw) as loader:
        states = [loader.state_dict()]
        for _ in range(2):
            for _ in loader:
                states.append(loader.state_dict())
    with StreamLoader(make(), B, T, **kw) as other:
        for s in states:
            other.load_state_dict(s)
