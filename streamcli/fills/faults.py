"""How a filler reports a source that fails (a ``SourceError`` under ``on_error="raise"``; under ``"skip"`` the item
ends where it failed, a ``Skip``) or breaks its promised length (a ``Skip`` of kind "length"). A step that breaks the
declared fields (``StepSpecError``) is the plugin's bug: it is never skipped nor wrapped.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from streamcli.errors import SourceError, StepSpecError
from streamcli.fills.spec import Skip
from streamcli.index_stamps import Stamps
from streamcli.source import StreamSource, item_name

SOURCE_ERRORS = (Exception, SystemExit)  # ``sys.exit()`` inside a source is an error of the source too


def item_file(item: Any) -> str | None:
    """The file behind an item, to name in a message: the item when it is a path, or a tuple's first member; None
    for an item that names no file (a count, a text)."""
    first = item[0] if isinstance(item, (tuple, list)) and item else item
    if not isinstance(first, (str, os.PathLike)):
        return None
    path = os.fspath(first)
    if not isinstance(path, str) or len(path) > 4096 or "\n" in path:
        return None
    return path if "://" in path or os.path.exists(path) else None


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
        """Refuse item ``item`` if it changed since the loader's index measured it (the index is stale: no skip)."""
        if self.stamps is not None:
            self.stamps.check(item)

    def name(self, item: int) -> str:
        return item_name(self.source, self.items[item])

    def fail(self, item: int, pos: int, exc: BaseException, doing: str) -> None:
        """The source raised ``exc`` while ``doing`` item ``item`` at step ``pos``: skip it, or raise."""
        if isinstance(exc, StepSpecError):
            raise exc
        name, file = self.name(item), item_file(self.items[item])
        if self.on_error == "skip":
            error = f"{type(exc).__name__}: {exc}"
            self.on_skip(Skip(batch=self.k, item=item, name=name, step=pos, error=error, file=file or ""))
            return
        where = f"stream {item}, file {file}" if file and file != name else f"stream {item}"
        raise SourceError(
            f"plugin {self.plugin!r} failed {doing} item {name!r} ({where}) at step {pos}: "
            f"{type(exc).__name__}: {exc}; on_error='skip' skips an item that fails"
        ) from exc

    def mismatch(self, item: int, pos: int, expect: int, what: str) -> None:
        name = self.name(item)
        msg = f"item {name!r} (stream {item}): length() said {expect} steps but it {what}"
        self.on_skip(Skip(batch=self.k, item=item, name=name, step=pos, error=msg, kind="length"))

    def where(self, item: int, pos: int, what: str) -> str:
        """Where a step broke the contract: "plugin ... item ... step N" (or "block at step N")."""
        return f"plugin {self.plugin!r} item {self.name(item)!r} {what} {pos}"
