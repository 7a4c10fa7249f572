"""How a loader's position becomes a saved state and a saved state a position: the fingerprint that ties a state
to its source and settings, and a loaded state kept until the next epoch starts from it (``scheduled.position``
checks it, and ``scheduled.replan`` re-plans the rest of an epoch saved with another global batch).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from streamcli.config import LoaderConfig
from streamcli.errors import StateError
from streamcli.scheduled import cursor as _cursor
from streamcli.scheduled import position as _position
from streamcli.scheduled import state as _state
from streamcli.scheduled.epochs import Epochs
from streamcli.scheduled.position import Position
from streamcli.scheduled.replan import Replan, replan
from streamcli.source import Field

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
            _position.refuse_another_rank(state, fingerprint=fp, epochs=epochs)
            plain, skipped = _position.checked(state, fingerprint=fp, epochs=epochs, rows=epochs.rows, num_items=n)
            _state.check_seal(state)  # last: a value no run reaches, or other settings, is named as such first
            self.loaded = plain
            return skipped
        _state.check(state, fp)
        rows = _state.global_rows(state["fingerprint"])
        assert rows is not None  # (``check`` refuses a per-rank state here)
        before = Replan.of_json(state["replan"], n) if "replan" in state else None
        kept, epochs.replan = epochs.replan, before
        try:
            plain, skipped = _position.checked(
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
        (``scheduled.replan``), said in one log line."""
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
