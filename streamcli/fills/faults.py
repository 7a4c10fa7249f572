"""How a filler reports a source that fails or breaks its promised length: a ``SourceError``, or a ``Skip``.

Under ``on_error="raise"`` an exception from the source stops the epoch with a ``SourceError`` naming the plugin,
the item and the step; under ``"skip"`` the item ends where it failed and is reported with the batch. A stream
whose length differs from what ``length()`` promised is reported as a length mismatch. A step or block that
breaks the declared fields (``StepSpecError``) is the plugin's bug: it is never skipped nor wrapped.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from streamcli.errors import SourceError, StepSpecError
from streamcli.fills.spec import Skip
from streamcli.index_stamps import Stamps
from streamcli.source import StreamSource, item_name

SOURCE_ERRORS = (Exception, SystemExit)  # ``sys.exit()`` inside a source is an error of the source too


@dataclass
class Faults:
    """The reporting context of one producer; ``k`` is the batch being filled."""

    plugin: str
    source: StreamSource
    items: Sequence[Any]
    on_error: str
    on_skip: Callable[[Skip], None]
    k: int = 0
    stamps: Stamps | None = None

    def check_data(self, item: int) -> None:
        """Refuse item ``item`` if it changed since the loader's index measured it (never skipped: the index is
        stale, not the item damaged)."""
        if self.stamps is not None:
            self.stamps.check(item)

    def name(self, item: int) -> str:
        return item_name(self.source, self.items[item])

    def fail(self, item: int, pos: int, exc: BaseException, doing: str) -> None:
        """The source raised ``exc`` while ``doing`` item ``item`` at step ``pos``: skip it, or raise."""
        if isinstance(exc, StepSpecError):
            raise exc
        name = self.name(item)
        if self.on_error == "skip":
            self.on_skip(Skip(batch=self.k, item=item, name=name, step=pos, error=f"{type(exc).__name__}: {exc}"))
            return
        raise SourceError(
            f"plugin {self.plugin!r} failed {doing} item {name!r} (stream {item}) at step {pos}: "
            f"{type(exc).__name__}: {exc}"
        ) from exc

    def mismatch(self, item: int, pos: int, expect: int, what: str) -> None:
        name = self.name(item)
        msg = f"item {name!r} (stream {item}): length() said {expect} steps but it {what}"
        self.on_skip(Skip(batch=self.k, item=item, name=name, step=pos, error=msg, kind="length"))

    def where(self, item: int, pos: int, what: str) -> str:
        """Where a step broke the contract: "plugin ... item ... step N" (or "block at step N")."""
        return f"plugin {self.plugin!r} item {self.name(item)!r} {what} {pos}"
