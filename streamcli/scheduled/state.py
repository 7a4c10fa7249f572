"""The loader's state as plain JSON data: the position right after the last batch handed out (the epoch, the next
batch, the tickets taken, every row's cursor and the items skipped so far in the epoch), its fingerprint (what must
not change between the run that saved it and the one that loads it; not the worker count, which changes no batch),
and how a loaded one is checked, in full, before anything is applied.

Where ranks share one schedule (``scheduled.streams``) the rows are the global batch's, so a state saved on any rank
is every rank's; where each rank deals itself streams of unknown length, a state is its rank's alone.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from streamcli import seal as _seal
from streamcli.errors import StateError
from streamcli.scheduled import cursor as _cursor
from streamcli.scheduled.cursor import RowPhase
from streamcli.scheduled.streams import Epochs

log = logging.getLogger("streamcli")

FORMAT = "streamcli-loader-state"
VERSION = 2  # the newest this streamcli reads: 2 holds a re-plan (``streams.Replan``); others are written as 1

# Fingerprint keys in the order a mismatch is reported, with how to name them in a message.
_FINGERPRINT = (
    "source",
    "fields",
    "num_items",
    "items",
    "batch_size",
    "time_steps",
    "seed",
    "shuffle",
    "boundary",
    "epoch_end",
    "layout",
    "segment",
    "batches_per_epoch",
    "rank",
    "world_size",
)
_DEFAULTS = {"segment": 0, "batches_per_epoch": None, "rank": 0, "world_size": 1}
# What a state of one global schedule may change: the global batch may differ too (re-planned).
_WORLD = ("batch_size", "rank", "world_size")


def global_rows(fp: Mapping[str, Any]) -> int | None:
    """The rows of the global batch a fingerprint's state was planned with, or None where its ranks dealt the
    streams among themselves (unknown lengths on several ranks, or a streamcli before the global schedule)."""
    world_size: Any = fp.get("world_size", 1)
    if world_size != 1 and fp.get("deal") != "global":
        return None
    batch_size: Any = fp.get("batch_size")
    if not (_is_int(batch_size) and _is_int(world_size)) or min(batch_size, world_size) < 1:
        return None
    return int(batch_size) * int(world_size)


def items_digest(names: Sequence[str]) -> str:
    """A short stable digest of the item list (its ``repr`` forms, in order)."""
    h = hashlib.sha256()
    for name in names:
        h.update(name.encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    return h.hexdigest()[:16]


def fingerprint(
    *,
    source: str,
    fields: Sequence[Any],
    items: Sequence[Any],
    config: Mapping[str, Any],
    lengths: Sequence[int | None] | None = None,
) -> dict[str, Any]:
    """What must not change between saving and loading a state: the source, its items, their lengths where
    ``length()`` reports them, and the settings that decide the batches' content (``LoaderConfig.content()``)."""
    out: dict[str, Any] = {
        "source": source,
        "fields": [[f.name, list(f.shape), f.dtype] for f in fields],
        "num_items": len(items),
        "items": items_digest([repr(i) for i in items]),
    }
    if lengths is not None:
        out["lengths"] = items_digest([str(-1 if n is None else n) for n in lengths])
    out.update({k: config[k] for k in _FINGERPRINT if k in config})
    return out


def first_difference(old: Mapping[str, Any], new: Mapping[str, Any]) -> str | None:
    """The first fingerprint key, in the order a mismatch is reported, on which two fingerprints differ (``lengths``
    only where both hold it: states saved before it existed still load), or None. Between two states of one global
    schedule the rows (``global_rows``) may differ: ``deal`` when only one of them is of a global schedule."""
    one_schedule = global_rows(old) is not None, global_rows(new) is not None
    for key in _FINGERPRINT:
        if key in _WORLD and (all(one_schedule) or one_schedule[0] != one_schedule[1]):
            continue
        if old.get(key, _DEFAULTS.get(key)) != new.get(key, _DEFAULTS.get(key)):
            return key
    if one_schedule[0] != one_schedule[1]:
        return "deal"
    if "lengths" in old and "lengths" in new and old["lengths"] != new["lengths"]:
        return "lengths"
    return None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def seal(state: dict[str, Any]) -> dict[str, Any]:
    """``state`` with its ``digest`` (``streamcli.seal``): a changed integer (a row's position, a ticket, the
    epoch) no longer passes for a position a real run could reach."""
    try:
        return _seal.seal(state)
    except (TypeError, ValueError) as exc:
        raise StateError(f"the state is not plain JSON data: {exc}") from None


def check_seal(state: Mapping[str, Any], what: str = "loader.state_dict()") -> None:
    """Raise ``StateError`` if ``state``'s content differs from what its digest was computed over; a state without
    one (saved by an older streamcli) passes, with a warning."""
    if _seal.KEY not in state:
        log.warning("the state has no digest (an older streamcli saved it): its values are checked, a change is not")
        return
    try:
        bad = _seal.broken(state)
    except (TypeError, ValueError) as exc:
        raise StateError(f"the state is not plain JSON data: {exc}") from None
    if bad is not None:
        raise StateError(
            f"the state's digest {bad[0][:23]!r}... does not match the sha256 of its content ({bad[1][:23]!r}...): "
            f"it was changed after state_dict() saved it; pass an unmodified {what}"
        )


def check(state: Any, expected_fingerprint: Mapping[str, Any]) -> None:
    """Raise ``StateError`` naming the first thing that makes ``state`` unusable here: not a state, another
    version, another source or settings (``fingerprint``), or a position field of the wrong type."""
    if not isinstance(state, Mapping):
        raise StateError(f"a loader state must be a dict from state_dict(), not {type(state).__name__}")
    if state.get("format") != FORMAT:
        raise StateError(f"not a streamcli loader state (format={state.get('format')!r}); pass loader.state_dict()")
    version = state.get("version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise StateError(
            f"the state's version={version!r} must be an integer (this streamcli reads version {VERSION}); "
            "pass an unmodified loader.state_dict()"
        )
    if version > VERSION:
        raise StateError(
            f"the state is format version {version}, newer than this streamcli reads ({VERSION}); "
            "upgrade streamcli to load it"
        )
    if version < 1:
        raise StateError(f"the state is format version {version}, older than this streamcli reads (1 to {VERSION})")
    missing = [k for k in ("fingerprint", "epoch", "batch", "tickets", "rows", "skipped") if k not in state]
    if missing:
        raise StateError(f"the state lacks {', '.join(missing)}; pass an unmodified loader.state_dict()")
    old = state["fingerprint"]
    if not isinstance(old, Mapping):
        raise StateError("the state's fingerprint must be a dict")
    key = first_difference(old, expected_fingerprint)
    if key == "lengths":
        raise StateError(
            "the state was saved with different stream lengths (the items kept their names, but length() now "
            "reports other numbers): the epoch would differ; resume with the same data"
        )
    if key == "deal":
        raise StateError(
            "the state was saved by ranks that each dealt themselves a share of the streams (streams of unknown "
            "length, or a streamcli before the global batch), and this loader plans one global batch, or the other "
            "way round: the epoch would differ; resume with the same streamcli and settings, or make the lengths "
            "known the same way (`streamcli index`, scan=True)"
        )
    if key is not None:
        what = "item list" if key == "items" else key
        raise StateError(
            f"the state was saved with a different {what}: {old.get(key)!r} there, {expected_fingerprint[key]!r} "
            f"here; resume with the same source and loader settings (num_workers may differ)"
        )
    for key in ("epoch", "batch", "tickets"):
        value = state[key]
        if not _is_int(value) or value < 0:
            raise StateError(f"the state's {key}={value!r} must be an integer >= 0")


def checked(
    state: Mapping[str, Any],
    *,
    fingerprint: dict[str, Any],
    epochs: Epochs,
    rows: int,
    num_items: int,
    count: bool = True,
) -> tuple[dict[str, Any], int]:
    """``state`` checked against this loader, as plain data, and the number of items it says were skipped; a
    ``StateError`` names what differs or what no real run reaches (a row past its stream's length, two rows on one
    stream, more tickets than the epoch has, a batch past its end, a malformed skip). ``rows``: the state's rows;
    ``count``: check its batch against this loader's count of its epoch (not for another global batch)."""
    check(state, fingerprint)
    cursors = _cursor.from_json(state["rows"], rows, num_items)
    c, epoch = epochs.config, int(state["epoch"])
    try:
        batches: int | None = epochs.batches(epoch) if count else None
    except TypeError:  # lengths unknown
        batches = None
    lengths, num_streams, segment, time_steps = epochs.lengths(), len(epochs.streams(epoch)), c.segment, c.time_steps
    B = len(cursors)
    num_items = len(lengths)
    for b, (item, pos, _, _) in enumerate(cursors.tolist()):
        if not -1 <= item < num_items:
            raise StateError(f"the state's rows[{b}] names stream {item}, but the source has {num_items} streams")
        n = lengths[item] if item >= 0 else None
        if n is not None and pos > n:
            raise StateError(
                f"the state's rows[{b}] is at position {pos} of stream {item}, beyond its length {n}: "
                "not a position a run can reach; pass an unmodified loader.state_dict()"
            )
    if not segment:  # (with segments, two rows may read two streams of one item)
        seen: dict[int, int] = {}
        for b, (item, _, state_, flags) in enumerate(cursors.tolist()):
            if state_ in (RowPhase.LIVE, RowPhase.FOLLOW, RowPhase.SHORT) and not flags & _cursor.REPLAYED:
                if item in seen:
                    raise StateError(
                        f"the state's rows[{b}] reads stream {item}, which rows[{seen[item]}] also reads: "
                        "a stream is read by one row at a time; pass an unmodified loader.state_dict()"
                    )
                seen[item] = b
    tickets, batch = state["tickets"], state["batch"]
    # Each claim takes one ticket per stream it passes (empty ones too), plus one when the row goes dry.
    most = num_streams + B
    if c.epoch_end == "restream":  # replays: at most one stream a step per row; a claim passes each empty one once
        most = ((batch + 1) * time_steps * B) * (num_streams + 1) + B
    if tickets > most:
        raise StateError(f"the state's tickets={tickets} is more than this epoch's {num_streams} streams can give")
    if batches is not None and batch > batches:
        raise StateError(f"the state's batch={batch} is past the end of its epoch ({batches} batches)")
    skipped = state["skipped"]
    if not isinstance(skipped, (list, tuple)):
        raise StateError(f"the state's skipped={skipped!r} must be a list of [stream, step] pairs")
    out: list[list[int]] = []
    for i, entry in enumerate(skipped):
        ok = isinstance(entry, (list, tuple)) and len(entry) == 2 and all(_is_int(v) for v in entry)
        if ok:
            item, step = entry
            ok = 0 <= item < num_items and step >= 0 and (lengths[item] is None or step <= int(lengths[item] or 0))
        if not ok:
            raise StateError(
                f"the state's skipped[{i}]={entry!r} must be [stream, step] of one of the {num_items} streams"
            )
        out.append([int(entry[0]), int(entry[1])])
    try:
        plain: dict[str, Any] = json.loads(json.dumps(dict(state)))
    except (TypeError, ValueError) as exc:
        raise StateError(f"the state is not plain JSON data: {exc}") from None
    return plain, len(out)


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
            "format": FORMAT,
            "version": 1,  # (2 where the state holds a re-plan: ``Resume.state``)
            "fingerprint": fingerprint,
            "epoch": max(self.epoch, 0),
            "batch": self.batch,
            "tickets": self.tickets,
            "rows": _cursor.to_json(self.cursors),
            "skipped": [list(s) for s in self.skipped],
        }


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
    check({**state, "fingerprint": {**fp, "rank": c.rank}}, fingerprint)  # all else the same
    raise StateError(
        f"the state was saved on rank {fp['rank']}; taking it on rank {c.rank} needs every stream's length, "
        "as ranks then share one global batch: make the source report lengths (for video: scan=True, or an index: "
        "`streamcli index`), or save every rank's own state_dict() and load each on its rank"
    )
