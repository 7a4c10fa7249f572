"""The loader's resumable state as plain JSON data: what it holds, its fingerprint, and how it is checked.

A state describes the position right after the last batch handed out: the epoch, the next batch index, the
tickets taken, every row's cursor (see ``engine.cursor``) and the items skipped so far. Its fingerprint holds what
must not change between the run that saved it and the one that loads it; the worker count is not part of it,
since batches are identical for every worker count.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

FORMAT = "streamcli-loader-state"
VERSION = 1

# Fingerprint keys in the order a mismatch is reported, with how to name them in a message.
_FINGERPRINT = ("source", "fields", "num_items", "items", "batch_size", "time_steps", "seed", "shuffle",
                "boundary", "epoch_end", "layout", "segment", "batches_per_epoch", "rank", "world_size")  # fmt: skip


_DEFAULTS = {"segment": 0, "batches_per_epoch": None, "rank": 0, "world_size": 1}


def items_digest(names: Sequence[str]) -> str:
    """A short stable digest of the item list (its ``repr`` forms, in order)."""
    h = hashlib.sha256()
    for name in names:
        h.update(name.encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    return h.hexdigest()[:16]


def fingerprint(
    *, source: str, fields: Sequence[Any], items: Sequence[Any], config: Mapping[str, Any]
) -> dict[str, Any]:
    """What must not change between saving and loading a state: the source, its items and the settings that
    decide the batches' content (``LoaderConfig.content()``)."""
    out: dict[str, Any] = {
        "source": source,
        "fields": [[f.name, list(f.shape), f.dtype] for f in fields],
        "num_items": len(items),
        "items": items_digest([repr(i) for i in items]),
    }
    out.update({k: config[k] for k in _FINGERPRINT if k in config})
    return out


def check(state: Any, expected_fingerprint: Mapping[str, Any]) -> None:
    """Raise ``ValueError`` naming the first thing that makes ``state`` unusable here."""
    if not isinstance(state, Mapping):
        raise ValueError(f"a loader state must be a dict from state_dict(), not {type(state).__name__}")
    if state.get("format") != FORMAT:
        raise ValueError(f"not a streamcli loader state (format={state.get('format')!r}); pass loader.state_dict()")
    version = state.get("version")
    if not isinstance(version, int) or version > VERSION:
        raise ValueError(
            f"the state is format version {version!r}, newer than this streamcli reads ({VERSION}); "
            "upgrade streamcli to load it"
        )
    missing = [k for k in ("fingerprint", "epoch", "batch", "tickets", "rows", "skipped") if k not in state]
    if missing:
        raise ValueError(f"the state lacks {', '.join(missing)}; pass an unmodified loader.state_dict()")
    old = state["fingerprint"]
    if not isinstance(old, Mapping):
        raise ValueError("the state's fingerprint must be a dict")
    for key in _FINGERPRINT:
        if old.get(key, _DEFAULTS.get(key)) != expected_fingerprint[key]:
            what = "item list" if key == "items" else key
            raise ValueError(
                f"the state was saved with a different {what}: {old.get(key)!r} there, {expected_fingerprint[key]!r} "
                f"here; resume with the same source and loader settings (num_workers may differ)"
            )
    for key in ("epoch", "batch", "tickets"):
        value = state[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"the state's {key}={value!r} must be an integer >= 0")
