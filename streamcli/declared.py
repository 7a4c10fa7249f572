"""What a source declares, read once in the main process: its fields (after the transform), its items and their
lengths. A failure in any of these calls is the plugin's, so it becomes a ``SourceError`` naming the plugin (and the
item, for a length).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from streamcli.batch import FLAGS
from streamcli.caller import at_user_line
from streamcli.errors import ConfigError, SourceError
from streamcli.source import Field, StreamSource, item_name, plugin_name
from streamcli.transforms import output_fields
from streamcli.transforms import resolve as resolve_transform

log = logging.getLogger("streamcli")
RESERVED = {*FLAGS, "reset", "claims", "cursor", "writer"}  # (slot entries of their own)


def check_fields(fields: tuple[Field, ...]) -> None:
    """The declared fields, when a loader is made: at least one, unique names, none a batch flag's."""
    if not fields:
        raise ValueError("the source declares no fields; fields() must return at least one Field")
    names = [f.name for f in fields]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise ValueError(f"the source declares field(s) {sorted(dup)} more than once; give each a unique name")
    bad = RESERVED.intersection(names)
    if bad:
        raise ValueError(f"field name(s) {sorted(bad)} clash with batch flags; rename them in fields()")


def calling(plugin: str, doing: str, fn: Callable[[], Any]) -> Any:
    """``fn()``, a call into the source in the main process; what it raises becomes a ``SourceError``, and the
    warnings it raises point at the user's line (``caller``). A ``ConfigError`` (a mix refusing its settings) is
    the user's to fix, not the plugin's failure: it passes as it is."""
    try:
        return at_user_line(fn)
    except ConfigError:
        raise
    except (Exception, SystemExit) as exc:
        raise SourceError(f"plugin {plugin!r} failed {doing}: {type(exc).__name__}: {exc}") from exc


@dataclass(frozen=True)
class Declared:
    """A source's plugin name, the batch's fields, the source's own fields and the transform (None: no transform;
    then both field lists are the same), and the items."""

    plugin: str
    fields: tuple[Field, ...]
    source_fields: tuple[Field, ...]
    transform: Callable[..., Any] | None
    items: Sequence[Any]

    @classmethod
    def read(
        cls, source: StreamSource, transform: Callable[..., Any] | str | None, items: Sequence[Any] | None = None
    ) -> Declared:
        """Ask ``source`` for its fields and items; ``transform`` is a callable or a CLI spelling ("crop=112,flip");
        ``items``: an index's (then ``items()`` is not called)."""
        plugin = plugin_name(source)
        source_fields = tuple(calling(plugin, "declaring its fields", lambda: tuple(source.fields())))
        check_fields(source_fields)
        resolved = resolve_transform(transform)
        fields = source_fields if resolved is None else output_fields(resolved, source_fields)
        check_fields(fields)
        if items is None:
            items = calling(plugin, "listing its items", lambda: list(source.items()))
        return cls(plugin, fields, source_fields, resolved, items)


def length_of(source: StreamSource, plugin: str, items: Sequence[Any], on_error: str, stream: int) -> int | None:
    """``source.length()`` of item ``stream``; what it raises is a ``SourceError`` naming the item, or under
    ``on_error="skip"`` an unknown length (the item's open fails then, and it is skipped as usual)."""
    item = items[stream]
    try:
        n = source.length(item)
    except (Exception, SystemExit) as exc:
        name = item_name(source, item)
        if on_error == "skip":
            log.warning("length() of item %r (stream %d) failed: %s: %s", name, stream, type(exc).__name__, exc)
            return None
        raise SourceError(
            f"plugin {plugin!r} failed measuring item {name!r} (stream {stream}): {type(exc).__name__}: {exc}"
        ) from exc
    return checked_length(n, plugin, item_name(source, item), stream)


def checked_length(n: Any, plugin: str, name: str, stream: int | None = None) -> int | None:
    """``n``, a ``length()``'s answer, as an int, or None (unknown); ``SourceError`` naming the plugin and the item
    for anything else: a float, a string, a bool (an int to Python, but never a count) or a negative number would
    silently become another length. numpy integers are ints. Never skipped: it is the plugin's bug, not the item's."""
    if n is None:
        return None
    if isinstance(n, (int, np.integer)) and not isinstance(n, (bool, np.bool_)) and n >= 0:
        return int(n)
    where = f"item {name!r}" + ("" if stream is None else f" (stream {stream})")
    raise SourceError(
        f"plugin {plugin!r}'s length() of {where} returned {n!r} ({type(n).__name__}); length() must return an "
        "int >= 0, the item's number of steps, or None when it cannot tell"
    )
