"""The rest of an epoch re-planned for another global batch: what a state saved with ``G`` rows becomes on ``G'``.

The rest of the epoch is planned afresh from the state's batch, every row idle: first the streams in flight, each
continued from its position as a stream of its own (in the order of the rows that held them), then the streams not
yet started, in ticket order; so every step is delivered once. A ``Replan`` is plain data saved in the state.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from streamcli.errors import StateError
from streamcli.scheduled import cursor as _cursor
from streamcli.scheduled.cursor import RowPhase
from streamcli.scheduled.streams import Streams


@dataclass(frozen=True)
class Replan:
    """Epoch ``epoch`` goes on from batch ``batch``: the ``streams`` in flight as ``[item, first step]``, then the
    epoch's own streams from ticket ``tickets`` on."""

    epoch: int
    batch: int
    tickets: int
    streams: tuple[tuple[int, int], ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "epoch": self.epoch,
            "batch": self.batch,
            "tickets": self.tickets,
            "streams": [list(s) for s in self.streams],
        }

    @classmethod
    def of_json(cls, data: Any, num_items: int) -> Replan:
        """A saved re-plan, checked (``StateError`` naming what is wrong)."""
        keys = ("epoch", "batch", "tickets", "streams")
        if not isinstance(data, Mapping) or any(k not in data for k in keys):
            raise StateError(f"the state's replan={data!r} must hold {', '.join(keys)}; pass an unmodified state")
        ints = [data[k] for k in keys[:3]]
        if any(isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in ints):
            raise StateError(f"the state's replan {ints!r} must be integers >= 0; pass an unmodified state")
        streams = data["streams"]
        ok = isinstance(streams, (list, tuple)) and all(
            isinstance(s, (list, tuple)) and len(s) == 2 and all(type(v) is int for v in s) for s in streams
        )
        if not ok or any(not 0 <= s[0] < num_items or s[1] < 0 for s in streams):
            raise StateError(f"the state's replan streams must be [item, step] pairs of the {num_items} items")
        return cls(int(ints[0]), int(ints[1]), int(ints[2]), tuple((int(a), int(b)) for a, b in streams))

    def apply(self, own: Streams, lengths: Sequence[int | None], segment: int) -> Streams:
        """The re-planned epoch's streams in ticket order; ``own``: the epoch's streams as planned at its start."""
        assert own.lengths is not None
        cont = np.asarray(self.streams, np.int64).reshape(-1, 2)
        items, starts = cont[:, 0], cont[:, 1]
        promised = np.asarray([-1 if lengths[i] is None else lengths[i] for i in items.tolist()], np.int64)
        ends = np.minimum((starts // segment + 1) * segment, promised) if segment else promised
        rest = slice(min(self.tickets, len(own)), None)
        return Streams(
            np.concatenate([items, own.items[rest]]),
            np.concatenate([starts, own.starts[rest]]),
            np.concatenate([np.zeros(len(cont), bool), own.open_ended[rest]]),
            np.concatenate([np.maximum(ends - starts, 0), own.lengths[rest]]),
        )


def replan(cursors: np.ndarray, *, epoch: int, batch: int, tickets: int, before: Replan | None) -> Replan:
    """The re-plan of epoch ``epoch`` from a state at ``batch`` whose rows stand at ``cursors`` after ``tickets``
    tickets; ``before``: the re-plan that state's epoch already followed, if any (its streams then come first in
    that epoch's ticket order)."""
    state, flags = cursors[:, _cursor.STATE], cursors[:, _cursor.FLAGS]
    live = (state == RowPhase.LIVE) & (flags & _cursor.REPLAYED == 0)  # a replay is no step owed
    flying = [(int(i), int(p)) for i, p in cursors[live][:, [_cursor.ITEM, _cursor.POS]].tolist()]
    if before is None or before.epoch != epoch:
        return Replan(epoch, batch, tickets, tuple(flying))
    # The tickets of the re-planned order: its continued streams first, then the epoch's own from before.tickets.
    taken = len(before.streams)
    pending = before.streams[min(tickets, taken) :]
    return Replan(epoch, batch, before.tickets + max(0, tickets - taken), (*flying, *pending))
