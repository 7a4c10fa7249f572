"""Every item's length, each asked once: from the loader's index when it has one, else of the source.

Separate from ``loader`` because the epochs (``scheduled.streams``, every length at once) and
``StreamLoader.stream_length`` (one item's) share the answers: a failure's warning (``on_error="skip"``) is then
said once, not again by the epoch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from streamcli.caller import at_user_line
from streamcli.declared import length_of
from streamcli.source import StreamSource


class Lengths:
    """The items' lengths, from ``indexed`` (an index's, one per item) or asked of ``source`` once per item."""

    def __init__(
        self,
        source: StreamSource,
        plugin: str,
        items: Sequence[Any],
        on_error: str,
        indexed: list[int | None] | None,
    ) -> None:
        self.source, self.plugin, self.items, self.on_error = source, plugin, items, on_error
        self.indexed = indexed
        self._known: dict[int, int | None] = {}

    def all(self) -> list[int | None]:
        """Every item's length, asked of the source (its warnings point at the user's line: ``caller``)."""
        if self.indexed is not None:
            return self.indexed
        return at_user_line(lambda: [self.of(i) for i in range(len(self.items))])

    def of(self, stream: int) -> int | None:
        """Item ``stream``'s length; ``source.length()`` is asked at most once per item."""
        if self.indexed is not None:
            return self.indexed[stream]
        if stream not in self._known:
            self._known[stream] = length_of(self.source, self.plugin, self.items, self.on_error, stream)
        return self._known[stream]
