"""Where a loader stands: right after the last batch handed out, as the ``state_dict`` saves it and
``load_state_dict`` takes it back (checked in full before anything is applied).

A position is the epoch, the next batch, the tickets taken, every row's cursor and the items skipped so far in
the epoch. Where ranks share one schedule (``scheduled.epochs``) the rows are the global batch's, so a state saved
on any rank is every rank's. Where each rank deals itself streams of unknown length, a state is its rank's alone.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from streamcli.errors import StateError
from streamcli.scheduled import cursor as _cursor
from streamcli.scheduled import state as _state
from streamcli.scheduled.epochs import Epochs


@dataclass
class Position:
    """Epoch ``epoch``'s next batch is ``batch``; ``tickets`` were taken and the rows stand at ``cursors``."""

    epoch: int
    batch: int
    tickets: int
    cursors: np.ndarray
    skipped: list[list[int]] = field(default_factory=list)  # [item, step] of this epoch's skipped items

    @classmethod
    def start_of(cls, epoch: int, rows: int) -> Position:
        return cls(epoch, 0, 0, _cursor.fresh(rows), [])

    @classmethod
    def of_state(cls, state: Mapping[str, Any], rows: int, num_items: int) -> Position:
        """The position a checked state holds."""
        cursors = _cursor.from_json(state["rows"], rows, num_items)
        skipped = [list(s) for s in state["skipped"]]
        return cls(int(state["epoch"]), int(state["batch"]), int(state["tickets"]), cursors, skipped)

    def to_state(self, fingerprint: dict[str, Any]) -> dict[str, Any]:
        return {
            "format": _state.FORMAT,
            "version": 1,  # (2 where the state holds a re-plan: ``Resume.state``)
            "fingerprint": fingerprint,
            "epoch": max(self.epoch, 0),
            "batch": self.batch,
            "tickets": self.tickets,
            "rows": _cursor.to_json(self.cursors),
            "skipped": [list(s) for s in self.skipped],
        }


def checked(
    state: Mapping[str, Any],
    *,
    fingerprint: dict[str, Any],
    epochs: Epochs,
    rows: int,
    num_items: int,
    count: bool = True,
) -> tuple[dict[str, Any], int]:
    """``state`` checked against this loader (``StateError`` naming what differs or cannot be), as plain data,
    and the number of items it says were skipped. ``rows``: the state's rows; ``count``: check its batch against
    this loader's count of its epoch (not for a state of another global batch)."""
    _state.check(state, fingerprint)
    cursors = _cursor.from_json(state["rows"], rows, num_items)
    epoch = int(state["epoch"])
    c = epochs.config
    try:
        batches: int | None = epochs.batches(epoch) if count else None
    except TypeError:  # lengths unknown
        batches = None
    skipped = _state.check_values(
        state,
        cursors,
        lengths=epochs.lengths(),
        num_streams=len(epochs.streams(epoch)),
        batches=batches,
        segment=c.segment,
        restream=c.epoch_end == "restream",
        time_steps=c.time_steps,
    )
    try:
        plain: dict[str, Any] = json.loads(json.dumps(dict(state)))
    except (TypeError, ValueError) as exc:
        raise StateError(f"the state is not plain JSON data: {exc}") from None
    return plain, len(skipped)


def refuse_another_rank(state: Mapping[str, Any], *, fingerprint: dict[str, Any], epochs: Epochs) -> None:
    """Where each rank deals itself a share of streams of unknown length, refuse a state saved by another rank of
    the same run (``StateError``): this rank's position cannot be found without the lengths. (A shared schedule's
    state is every rank's as it is.)"""
    c = epochs.config
    fp = state.get("fingerprint") if isinstance(state, Mapping) else None
    if epochs.shared or c.world_size == 1 or not isinstance(fp, Mapping) or fp.get("world_size") != c.world_size:
        return
    if fp.get("rank") == c.rank or not isinstance(fp.get("rank"), int):
        return
    _state.check({**state, "fingerprint": {**fp, "rank": c.rank}}, fingerprint)  # all else the same
    raise StateError(
        f"the state was saved on rank {fp['rank']}; taking it on rank {c.rank} needs every stream's length, "
        "as ranks then share one global batch: make the source report lengths (for video: scan=True, or an index: "
        "`streamcli index`), or save every rank's own state_dict() and load each on its rank"
    )
