"""The one reader of iterator sources (issue 49, concept 3): one open stream per row, whether its length is known
(read as the plan says) or open (read by ``Rows.probe`` as the batch is planned, one step looked ahead), each step
checked where it is copied, the step read ahead included."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from _sources import CountingBlocks, CountingSource

from streamcli.errors import StepSpecError
from streamcli.fills.flags import Views
from streamcli.fills.iterators import Rows
from streamcli.fills.spec import Faults, Skip
from streamcli.scheduled import cursor as _cursor
from streamcli.scheduled.claims import OPEN

T, B = 4, 2


class BadStep(CountingSource):
    """Step ``at`` of every stream has a float field: the plugin breaks its declared fields there."""

    def __init__(self, lengths: list[int], at: int) -> None:
        super().__init__(lengths)
        self.at = at

    def open(self, item: int, start: int = 0) -> Iterator[dict[str, np.ndarray]]:
        for step in super().open(item, start):
            if int(step["x"][1]) == self.at:
                step = {"x": step["x"].astype(np.float32)}
            yield step


def _views() -> Views:
    return Views(
        data=[np.full((T, B, 2), -7, np.int64)],
        first=np.zeros((T, B), bool),
        valid=np.zeros((T, B), bool),
        stream=np.zeros((T, B), np.int64),
        position=np.zeros((T, B), np.int64),
        replayed=np.zeros((T, B), bool),
        claims=np.zeros(B, np.int64),
        cursor=np.zeros((B, _cursor.WIDTH), np.int64),
    )


def _rows(source: CountingSource) -> tuple[Rows, list[Skip]]:
    skips: list[Skip] = []
    faults = Faults("test", source, source.items(), "skip", skips.append)
    blocks = bool(getattr(source, "block_steps", False))
    return Rows(source, source.fields(), blocks, faults, np.zeros(3, np.int64)), skips


@pytest.mark.parametrize("source", [CountingSource([10, 7]), CountingBlocks([10, 7])], ids=["steps", "blocks"])
def test_a_stream_of_open_length_is_read_on_from_its_look_ahead_until_it_ends(source: CountingSource) -> None:
    rows, skips = _rows(source)
    got: list[list[int]] = []
    for k, (t0, n, fresh) in enumerate([(1, 3, True), (0, 4, False), (0, 4, False)]):
        rows.v = v = _views()
        left = rows.probe(1, 0, 0, t0, n, fresh)
        assert (1, t0) in rows.read
        rows.read.clear()
        # Stream 0 has 10 steps: 3 and 4 are read with a step after them, then the last 3 end it.
        assert left == (OPEN if k < 2 else 3)
        got.append(v.data[0][t0 : t0 + (n if left == OPEN else left), 1, 1].tolist())
        assert (v.data[0][:, 0] == -7).all()  # row 0 untouched
    assert got == [[0, 1, 2], [3, 4, 5, 6], [7, 8, 9]]
    assert 1 not in rows.readers  # it ended: its reader is closed
    assert rows.steps == 10 and not skips


def test_the_step_read_ahead_is_checked_where_it_is_copied() -> None:
    rows, _ = _rows(BadStep([10], at=4))
    rows.v = _views()
    assert rows.probe(0, 0, 0, 0, 4, True) == OPEN  # steps 0-3 read, step 4 held: not copied, not checked yet
    rows.v = _views()
    with pytest.raises(StepSpecError, match=r"item '0' step 4: field 'x' is float32\[2\]"):
        rows.probe(0, 0, 4, 0, 4, False)


def test_a_row_reopened_at_a_claim_drops_the_step_it_read_ahead() -> None:
    rows, _ = _rows(CountingSource([10, 7]))
    rows.v = v = _views()
    assert rows.probe(0, 0, 0, 0, 2, True) == OPEN  # stream 0's step 2 is held
    assert rows.probe(0, 1, 5, 2, 2, True) == 2  # a claim: stream 1 from step 5, its last two steps
    assert v.data[0][:, 0].tolist() == [[0, 0], [0, 1], [1, 5], [1, 6]]
    assert 0 not in rows.readers


class Watching(CountingSource):
    """``CountingSource`` that notes the reader's mark (stream, step) as each step is asked for."""

    def __init__(self, lengths: list[int], mark: np.ndarray) -> None:
        super().__init__(lengths)
        self.mark = mark
        self.seen: list[tuple[int, int]] = []

    def open(self, item: int, start: int = 0) -> Iterator[dict[str, np.ndarray]]:
        for step in super().open(item, start):
            self.seen.append((int(self.mark[0]), int(self.mark[1])))
            yield step


@pytest.mark.parametrize("per_step", [True, False], ids=["workers", "in-process"])
def test_the_mark_names_each_step_for_workers_and_the_row_once_in_process(per_step: bool) -> None:
    mark = np.full(3, -1, np.int64)
    source = Watching([10, 7], mark)
    faults = Faults("test", source, source.items(), "raise", lambda s: None)
    rows = Rows(source, source.fields(), False, faults, mark)
    rows.steps_marked = per_step
    rows.v = v = _views()
    assert rows.probe(0, 1, 2, 0, 3, True) == OPEN  # stream 1 from step 2: steps 2-4 copied, step 5 looked ahead
    assert rows.probe(0, 1, 5, 3, 1, False) == OPEN  # step 5 from the look-ahead, step 6 looked ahead
    assert v.data[0][:, 0, 1].tolist() == [2, 3, 4, 5]
    # The look-ahead's next() names its own step; a run in process names its stream and first step only.
    first_run = [(1, 2), (1, 3), (1, 4)] if per_step else [(1, 2), (1, 2), (1, 2)]
    assert source.seen == [*first_run, (1, 5), (1, 6)]
