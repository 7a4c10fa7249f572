"""``len(loader)`` after a resume on another global batch is the number of batches that epoch delivers (issue 46 §7):
asked after ``load_state_dict`` and before the epoch starts (as Lightning asks it), during it, and for the next."""

from __future__ import annotations

import json
from typing import Any

import pytest
from _sources import CountingSource

from streamcli import StreamLoader

LENGTHS = [17, 3, 0, 25, 9, 14, 6, 30, 1, 11, 8, 21, 4, 40, 2, 19]
T = 4
MODES = [
    {},
    {"boundary": "pack"},
    {"segment": 5},
    {"epoch_end": "restream", "boundary": "pack"},
    {"epoch_end": "drop", "segment": 4},
]


def _state(G: int, cut: int, **kw: Any) -> dict[str, Any]:
    with StreamLoader(CountingSource(LENGTHS), G, T, seed=5, **kw) as loader:
        it = iter(loader)
        for _ in range(cut):
            next(it)
        return json.loads(json.dumps(loader.state_dict()))


@pytest.mark.parametrize("mode", MODES, ids=lambda m: ",".join(f"{k}={v}" for k, v in m.items()) or "default")
@pytest.mark.parametrize(("before", "after", "cut"), [(4, 2, 3), (2, 4, 5), (3, 5, 1), (6, 4, 2)])
def test_len_after_a_resume_on_another_global_batch_is_the_batches_the_epoch_delivers(
    mode: dict[str, Any], before: int, after: int, cut: int
) -> None:
    state = _state(before, cut, **mode)
    with StreamLoader(CountingSource(LENGTHS), after, T, seed=5, **mode) as loader:
        loader.load_state_dict(state)
        said_before = len(loader)
        during = []
        delivered = 0
        for batch in loader:
            during.append(len(loader))
            delivered = batch.index + 1
        assert said_before == delivered, f"len() said {said_before} before the epoch, which had {delivered} batches"
        assert set(during) == {delivered}, f"len() said {sorted(set(during))} during the epoch of {delivered}"
        said_next = len(loader)
        delivered_next = sum(1 for _ in loader)
        assert said_next == delivered_next, f"the next epoch: len() said {said_next}, it had {delivered_next}"
