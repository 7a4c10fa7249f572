"""A loader's state in and out: a loaded state kept until the next epoch starts from it (re-planned where it was
saved with another global batch), every global row's cursor for a rank that writes only its own (``World``), and
the state at any batch from the lengths alone (``state_after``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from streamcli.config import LoaderConfig
from streamcli.errors import StateError
from streamcli.scheduled import cursor as _cursor
from streamcli.scheduled import state as _state
from streamcli.scheduled.schedule import Schedule
from streamcli.scheduled.state import Position
from streamcli.scheduled.streams import Epochs, Replan, replan
from streamcli.source import BaseSource, Field, Step, StreamOrder

log = logging.getLogger("streamcli")


class Resume:
    """A loader's resume plumbing; ``loaded`` is a checked state the next epoch starts from (None: none)."""

    def __init__(
        self,
        *,
        plugin: str,
        fields: Sequence[Field],
        items: Sequence[Any],
        config: LoaderConfig,
        epochs: Epochs,
    ) -> None:
        self.plugin, self.fields, self.items = plugin, fields, items
        self.config, self.epochs = config, epochs
        self.loaded: dict[str, Any] | None = None
        self._fingerprint: dict[str, Any] | None = None

    def state(self, position: Position) -> dict[str, Any]:
        """The state at ``position``, or the loaded one while no epoch has started from it."""
        if self.loaded is not None:
            return _state.seal(dict(json.loads(json.dumps(self.loaded))))
        out = position.to_state(self.fingerprint())
        again = self.epochs.replanned(position.epoch)
        if again is not None and position.batch:  # (batch 0: the next epoch, which follows no re-plan)
            out["version"], out["replan"] = 2, again.to_json()
        return _state.seal(out)

    def load(self, state: Mapping[str, Any]) -> int:
        """Check ``state`` and keep it for the next epoch; returns the items it says were skipped. A refused state
        changes nothing."""
        epochs, fp, n = self.epochs, self.fingerprint(), len(self.items)
        if not epochs.shared:  # each rank deals its own streams
            _state.refuse_another_rank(state, fingerprint=fp, epochs=epochs)
            plain, skipped = _state.checked(state, fingerprint=fp, epochs=epochs, rows=epochs.rows, num_items=n)
            _state.check_seal(state)  # last: a value no run reaches, or other settings, is named as such first
            self.loaded = plain
            return skipped
        _state.check(state, fp)
        rows = _state.global_rows(state["fingerprint"])
        assert rows is not None  # (``check`` refuses a per-rank state here)
        before = Replan.of_json(state["replan"], n) if "replan" in state else None
        kept, epochs.replan = epochs.replan, before
        try:
            plain, skipped = _state.checked(
                state, fingerprint=fp, epochs=epochs, rows=rows, num_items=n, count=rows == epochs.rows
            )
            _state.check_seal(state)  # (the re-plan with it)
            if rows != epochs.rows:
                plain = self._replanned(plain, rows, before)
        finally:
            epochs.replan = kept
        self.loaded = plain
        return skipped

    def _replanned(self, state: dict[str, Any], rows: int, before: Replan | None) -> dict[str, Any]:
        """``state``, saved with a global batch of ``rows`` rows, as this loader's: the rest of its epoch re-planned
        (``streams.replan``), said in one log line."""
        epoch, batch, tickets = int(state["epoch"]), int(state["batch"]), int(state["tickets"])
        out = {**state, "fingerprint": self.fingerprint(), "rows": _cursor.to_json(_cursor.fresh(self.epochs.rows))}
        out.pop("replan", None)
        if batch == 0 and tickets == 0 and before is None:  # an epoch's start: nothing to re-plan
            out["version"] = 1
            return out
        if not self.epochs.known:
            raise StateError(
                f"the state was saved with a global batch of {rows} rows (world_size x batch_size), this loader has "
                f"{self.epochs.rows}; re-planning the rest of the epoch needs every stream's length, but source "
                f"{self.plugin!r} does not report them all: make it report lengths (for video: scan=True, or an "
                "index: `streamcli index`), or resume with the same global batch"
            )
        cursors = _cursor.from_json(state["rows"], rows, len(self.items))
        again = replan(cursors, epoch=epoch, batch=batch, tickets=tickets, before=before)
        self.epochs.replan = again
        left = len(self.epochs.streams(epoch)) - len(again.streams)
        log.warning(
            "resuming epoch %d at batch %d on a global batch of %d rows (the state's had %d): %d streams in flight go "
            "on from their positions in new rows (is_first set, hidden state reset), then %d streams not yet started",
            epoch,
            batch,
            self.epochs.rows,
            rows,
            len(again.streams),
            left,
        )
        out.update(version=2, tickets=0, replan=again.to_json())
        return out

    def loaded_replan(self) -> Replan | None:
        """The re-plan the loaded state's epoch will follow, if it holds one (a resume on another global batch)."""
        again = None if self.loaded is None else self.loaded.get("replan")
        return None if again is None else Replan.of_json(again, len(self.items))

    def take(self) -> dict[str, Any] | None:
        """The loaded state, for the epoch that starts now (then no longer loaded); its re-plan, if any, is the
        epochs' from now on."""
        loaded, self.loaded = self.loaded, None
        if loaded is not None:
            again = loaded.get("replan")
            self.epochs.replan = None if again is None else Replan.of_json(again, len(self.items))
        return loaded

    def fingerprint(self) -> dict[str, Any]:
        if self._fingerprint is None:
            self._fingerprint = _state.fingerprint(
                source=self.plugin,
                fields=self.fields,
                items=self.items,
                config=self.config.content(),
                lengths=self.epochs.lengths(),
            )
            assert self.config.world_size is not None
            if self.epochs.shared and self.config.world_size > 1:
                self._fingerprint["deal"] = "global"
        return self._fingerprint


class World:
    """Every global row's cursor at any batch of an epoch that starts (or resumes) at batch ``first`` from ``cursors``
    after ``tickets`` tickets (``order``: the ring's order table), for a rank that writes only its own rows: the
    others follow from the lengths alone, so the schedule of all rows is run along, lazily, to the batch asked."""

    def __init__(self, order: np.ndarray, cursors: np.ndarray, first: int, tickets: int, config: LoaderConfig) -> None:
        self._start, self.config = (order, cursors.copy(), first, tickets), config
        self._sched: Schedule | None = None
        self._at = (first, tickets, cursors.copy())  # (batch, tickets, cursors) before that batch

    def at(self, batch: int, own: np.ndarray, offset: int) -> tuple[int, np.ndarray]:
        """(tickets, every row's cursor) right before ``batch``, with ``own`` for the rows from ``offset``."""
        if batch < self._at[0]:  # (not within one epoch's run; planned again from its start)
            _, cursors, first, tickets = self._start
            self._sched, self._at = None, (first, tickets, cursors.copy())
        if self._sched is None:
            c = self.config
            pack, restream = c.boundary == "pack", c.epoch_end == "restream"
            self._sched = Schedule(*self._start, T=c.time_steps, pack=pack, segment=c.segment, restream=restream)
        sched = self._sched
        while self._at[0] < batch:
            plan = sched.next_plan()
            self._at = (plan.k + 1, sched.claim_order.taken, plan.cursors)
        cursors = self._at[2].copy()
        cursors[offset : offset + len(own)] = own
        return self._at[1], cursors


_ZERO = {"z": np.zeros((), np.uint8)}


class LengthsOnly(BaseSource):
    """``len(lengths)`` streams whose steps are a single zero byte; stream ``i`` has ``lengths[i]`` steps.
    ``order``: the real source's ``stream_order`` hook (a mix), so that the stand-in's epochs hold the same streams."""

    def __init__(self, lengths: Sequence[int], order: StreamOrder | None = None) -> None:
        self.lengths = [int(n) for n in lengths]
        if order is not None:
            self.stream_order = order

    def items(self) -> list[int]:
        return list(range(len(self.lengths)))

    def fields(self) -> Sequence[Field]:
        return (Field("z", (), "uint8"),)

    def length(self, item: int) -> int:
        return self.lengths[item]

    def open(self, item: int, start: int = 0) -> Iterator[Step]:
        for _ in range(start, self.lengths[item]):
            yield _ZERO


def state_after(
    loader_type: Callable[..., Any],
    lengths: Sequence[int],
    batches: int,
    fingerprint: dict[str, Any],
    *,
    order: StreamOrder | None = None,
    **loader_kw: Any,
) -> dict[str, Any]:
    """The state of a loader over streams of these ``lengths`` after it has handed out ``batches`` batches
    (counted across epochs, as an export counts them), carrying ``fingerprint`` (the real loader's); ``order``: the
    real source's ``stream_order`` hook, if it has one.

    ``loader_type`` is ``StreamLoader``, passed in by the caller: the engine does not import the loader above it."""
    kw = {k: v for k, v in loader_kw.items() if k not in ("num_workers", "pin_memory", "prefetch", "timeout")}
    B, T = kw.pop("batch_size"), kw.pop("time_steps")
    with loader_type(LengthsOnly(lengths, order), B, T, num_workers=0, **kw) as loader:
        n = 0
        while n < batches:
            got = 0
            for _ in loader:
                n += 1
                got += 1
                if n >= batches:
                    break
            if not got:
                raise ValueError(f"the run has fewer than {batches} batches (it ended after {n})")
        state: dict[str, Any] = loader.state_dict()
    state["fingerprint"] = dict(fingerprint)
    return _state.seal(state)
