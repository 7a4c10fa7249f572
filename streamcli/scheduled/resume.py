"""How a loader's position becomes a saved state and a saved state a position: the fingerprint that ties a state
to its source and settings, and a loaded state kept until the next epoch starts from it (``scheduled.position``
checks it, ``scheduled.seek`` moves another rank's state to this one).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from streamcli.config import LoaderConfig
from streamcli.scheduled import position as _position
from streamcli.scheduled import state as _state
from streamcli.scheduled.epochs import Epochs
from streamcli.scheduled.position import Position
from streamcli.scheduled.seek import state_after
from streamcli.source import Field


class Resume:
    """A loader's resume plumbing; ``loaded`` is a checked state the next epoch starts from (None: none).

    ``loader_type`` is the loader's class, which ``scheduled.seek`` runs over lengths alone: the engine does not
    import the loader above it."""

    def __init__(
        self,
        loader_type: Callable[..., Any],
        *,
        plugin: str,
        fields: Sequence[Field],
        items: Sequence[Any],
        config: LoaderConfig,
        epochs: Epochs,
    ) -> None:
        self.loader_type, self.plugin, self.fields, self.items = loader_type, plugin, fields, items
        self.config, self.epochs = config, epochs
        self.loaded: dict[str, Any] | None = None
        self._fingerprint: dict[str, Any] | None = None

    def state(self, position: Position) -> dict[str, Any]:
        """The state at ``position``, or the loaded one while no epoch has started from it."""
        if self.loaded is not None:
            return dict(json.loads(json.dumps(self.loaded)))
        return position.to_state(self.fingerprint())

    def load(self, state: Mapping[str, Any]) -> int:
        """Check ``state`` and keep it for the next epoch; returns the items it says were skipped. A refused state
        changes nothing."""
        state = _position.for_this_rank(state, fingerprint=self.fingerprint(), epochs=self.epochs, seek=self._seek)
        self.loaded, skipped = _position.checked(
            state,
            fingerprint=self.fingerprint(),
            epochs=self.epochs,
            batch_size=self.config.batch_size,
            num_items=len(self.items),
        )
        return skipped

    def take(self) -> dict[str, Any] | None:
        """The loaded state, for the epoch that starts now (then no longer loaded)."""
        loaded, self.loaded = self.loaded, None
        return loaded

    def _seek(self, lengths: list[int], batches: int) -> dict[str, Any]:
        return state_after(
            self.loader_type, lengths, batches, self.fingerprint(), order=self.epochs.all.order, **self.config.content()
        )

    def fingerprint(self) -> dict[str, Any]:
        if self._fingerprint is None:
            self._fingerprint = _state.fingerprint(
                source=self.plugin,
                fields=self.fields,
                items=self.items,
                config=self.config.content(),
                lengths=self.epochs.lengths(),
            )
        return self._fingerprint
