"""The flags of format 2: stored per run, not per step, and integer members stored in the narrowest dtype that holds
them. ``shard_arrays`` builds a shard's members from its batches; ``as_steps`` gives a shard read back the per-step
flags and the field dtypes every reader of format 1 already knows.

A *run* is a stretch of one row of one batch where one stream's steps follow each other: the same stream, ``valid``
and ``replayed`` (and mixed source), positions rising by one (padding: the same position, -1), ``is_first`` at most
on its first step. Its record is (batch, row, first step, length, stream, first position, bits: 1 is_first,
2 replayed, 4 valid, and the source where the export has ``sources``). The runs of a shard cover each of its steps
once, whatever the flags hold, so any batch is stored exactly. A row of a loader's batch holds one run or a few (its
stream's steps, the next stream's, padding), where per-step flags cost 19 bytes a step.

Integer members (fields such as token ids or byte counts, and the run columns) are written in the narrowest integer
dtype that holds every value of the member in that shard and casts back exactly; reading widens them to the dtype
the manifest names, so replay is bit-identical. The choice depends on the shard's values only, so a resumed or a
Ray export writes the same bytes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from streamcli.errors import ShardError
from streamcli.shards.constant import folded, is_folded, step_valid, unfolded

COLUMNS = ("batch", "row", "start", "length", "stream", "position", "bits")
"""The run columns of every export of format 2 (``run.<column>``), and ``run.source`` where it has ``sources``."""

STEP_FLAGS = ("is_first", "valid", "stream", "position", "replayed")
_NARROW = tuple(np.dtype(d) for d in ("u1", "i1", "<u2", "<i2", "<u4", "<i4"))


def run_columns(sources: bool) -> tuple[str, ...]:
    return (*COLUMNS, "source") if sources else COLUMNS


def batch_runs(flags: Mapping[str, np.ndarray], layout: str) -> dict[str, np.ndarray]:
    """The runs of one batch from its per-step flags (``(T, B)`` for layout TB, ``(B, T)`` for BT; ``source``
    optional), as ``run.<column>`` int64 arrays with batch 0; ``ShardError`` if padding carries flags."""

    def rows(name: str) -> np.ndarray:
        a = np.asarray(flags[name])
        return a.T if layout == "TB" else a

    valid = rows("valid").astype(bool)
    stream, position = rows("stream").astype(np.int64), rows("position").astype(np.int64)
    first, replayed = rows("is_first").astype(bool), rows("replayed").astype(bool)
    source = rows("source").astype(np.int64) if "source" in flags else None
    goes_on = (valid[:, 1:] == valid[:, :-1]) & ~first[:, 1:] & (replayed[:, 1:] == replayed[:, :-1])
    goes_on &= (stream[:, 1:] == stream[:, :-1]) & (position[:, 1:] == position[:, :-1] + valid[:, 1:])
    if source is not None:
        goes_on &= source[:, 1:] == source[:, :-1]
    starts = np.ones(valid.shape, bool)
    starts[:, 1:] = ~goes_on
    row, start = np.nonzero(starts)  # row by row, then in time: each run's steps follow its start
    length = np.diff(np.append(np.flatnonzero(starts.ravel()), starts.size))
    bits = first[row, start].astype(np.int64) | (replayed[row, start].astype(np.int64) << 1)
    out = {
        "run.batch": np.zeros(len(row), np.int64),
        "run.row": row.astype(np.int64),
        "run.start": start.astype(np.int64),
        "run.length": length.astype(np.int64),
        "run.stream": stream[row, start],
        "run.position": position[row, start],
        "run.bits": bits | (valid[row, start].astype(np.int64) << 2),
    }
    if source is not None:
        out["run.source"] = source[row, start]
    return out


def narrowed(a: np.ndarray) -> np.ndarray:
    """``a`` in the narrowest integer dtype that holds its values and casts back to its own exactly."""
    if a.dtype.kind not in "iu" or a.dtype.itemsize == 1 or a.size == 0:
        return a
    lo, hi = int(a.min()), int(a.max())
    for d in _NARROW:
        if d.itemsize >= a.dtype.itemsize:
            break
        info = np.iinfo(d)
        if info.min <= lo and hi <= info.max and np.can_cast(d, a.dtype, "safe"):
            return a.astype(d)
    return a


def shard_arrays(
    pending: Sequence[Mapping[str, np.ndarray]], names: Sequence[str], header: Mapping[str, Any]
) -> dict[str, np.ndarray]:
    """A shard's members, in the order ``names`` gives (``format.member_names(header)``), from its batches' arrays
    (``writer.batch_arrays``): per-batch members stacked, runs concatenated with their batch, integers narrowed, and
    from format 3 a field constant over the shard's real steps stored once (``constant``)."""
    out: dict[str, np.ndarray] = {}
    for name in names:
        try:
            parts = [b[name] for b in pending]
        except KeyError:
            raise ShardError(f"a batch lacks {name}, which the export's header names") from None
        if name == "run.batch":
            out[name] = np.concatenate([np.full(len(p), k, np.int64) for k, p in enumerate(parts)])
        elif name.startswith("run."):
            out[name] = np.concatenate(parts)
        else:
            out[name] = np.stack(parts)
    if int(header.get("format_version", 0)) >= 3:
        valid = step_valid(header, out, len(pending))
        for name in out:
            if name.startswith("data."):
                value = folded(out[name], valid)
                out[name] = out[name] if value is None else value
    return {name: narrowed(a) if name.startswith(("run.", "data.")) else a for name, a in out.items()}


def stored_members(m: Mapping[str, Any], only: Sequence[str]) -> list[str]:
    """The members to read for the per-step members ``only`` (the run columns stand for the step flags, and from
    format 3 a field may be folded, which its rebuilding needs the runs' ``valid`` for)."""
    if m.get("format_version") == 1:
        return list(only)
    runs = [f"flag.{n}" for n in (*STEP_FLAGS, "source")]
    out = [n for n in only if n not in runs]
    folds = int(m.get("format_version", 0)) >= 3 and any(n.startswith("data.") for n in only)
    if folds or any(n in runs for n in only):
        out += [f"run.{c}" for c in run_columns(bool(m.get("sources")))]
    return out


def as_steps(
    m: Mapping[str, Any], arrays: Mapping[str, np.ndarray], k: int, only: Sequence[str] | None = None
) -> dict[str, np.ndarray]:
    """A shard's members as format 1 laid them out: per-step ``flag.*`` arrays from the runs, fields in their own
    dtypes and per step (a folded one rebuilt, ``constant``) (``only``: those members). Format 1 shards are returned
    as they are."""
    if m.get("format_version") == 1:
        return dict(arrays)
    fields = {f"data.{f.name}": f for f in m["_fields"]}
    flags = step_flags(m, arrays, k) if any(n.startswith("run.") for n in arrays) else {}
    out = {}
    for name, a in arrays.items():
        if name.startswith("run."):
            continue
        f = fields.get(name)
        if f is not None and is_folded(a, len(f.shape)):
            if "flag.valid" not in flags:
                raise ShardError(f"the shard stores {name} once, but its runs were not read")
            out[name] = unfolded(a, flags["flag.valid"], f.np_dtype)
        else:
            out[name] = a.astype(f.np_dtype) if f is not None and a.dtype != f.np_dtype else a
    out.update(flags)
    if only is not None:
        out = {n: out[n] for n in only}
    return out


def step_flags(m: Mapping[str, Any], arrays: Mapping[str, np.ndarray], k: int) -> dict[str, np.ndarray]:
    """The per-step flags of a shard of ``k`` batches from its runs; ``ShardError`` for runs outside the batches,
    over one another or leaving steps out (a corrupted or hostile shard)."""
    sources = bool(m.get("sources"))
    T, B, tb = int(m["time_steps"]), int(m["batch_size"]), m["layout"] == "TB"
    cols = {c: np.asarray(arrays[f"run.{c}"]).astype(np.int64) for c in run_columns(sources)}
    batch, row, start, length = cols["batch"], cols["row"], cols["start"], cols["length"]
    if len({len(c) for c in cols.values()}) > 1:
        raise ShardError("the shard's run columns differ in length; it is corrupted")
    bad = (batch < 0) | (batch >= k) | (row < 0) | (row >= B) | (start < 0) | (length < 1) | (start + length > T)
    bad |= (cols["bits"] < 0) | (cols["bits"] > 7)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ShardError(f"run {i} of the shard lies outside its {k} batches of {T}x{B} steps; it is corrupted")
    # The writer puts the runs in the order of the steps they cover, batch by batch, row by row, in time: each
    # starts where the one before ends, so every per-step array is its column repeated by the lengths.
    ends = np.cumsum(length)
    if len(length) and (ends[-1] != k * T * B or ((batch * B + row) * T + start != ends - length).any()):
        raise ShardError("the runs of the shard do not cover each of its steps once, in order; it is corrupted")
    if not len(length) and k * T * B:
        raise ShardError("the shard has no runs for its steps; it is corrupted")
    bits = cols["bits"]
    offset = np.arange(k * T * B) - np.repeat(ends - length, length)
    valid = np.repeat((bits & 4) != 0, length)
    first = np.zeros(k * T * B, bool)
    first[(ends - length)[(bits & 1) == 1]] = True
    out = {
        "is_first": first,
        "valid": valid,
        "stream": np.repeat(cols["stream"], length),
        "position": np.repeat(cols["position"], length) + offset * valid,
        "replayed": np.repeat((bits & 2) != 0, length),
    }
    if sources:
        out["source"] = np.repeat(cols["source"], length)
    if not tb:
        return {f"flag.{n}": a.reshape(k, B, T) for n, a in out.items()}
    return {f"flag.{n}": np.ascontiguousarray(a.reshape(k, B, T).transpose(0, 2, 1)) for n, a in out.items()}
