"""The shard format, in one place: file names, members, dtypes, the manifest and the partial record (the files
themselves are read and written by ``records``).

An export folder holds ``shard-00000.npz``, ``shard-00001.npz``, ... and, once finished, ``index.json``
(the manifest: the header below plus the list of shards). While an export runs, ``.partial.json`` holds the
header and a record per completed shard. ``index.json`` is the commit point: once it exists the export is
complete, and a ``.partial.json`` beside it (a kill between the two steps of finishing) is stale state
that ``tidy`` removes.

A shard holding K batches has, for layout ``"TB"``, each field as ``data.<name>`` of shape
``(K, T, B, ...)`` (``(K, B, T, ...)`` for ``"BT"``), ``flag.reset`` ``(K, B)`` and ``meta.epoch`` / ``meta.index``
``(K,)``. Format 2 (since 2026-12-07) stores the step flags per run, ``run.<column>`` of shape ``(R,)`` for the R
runs of the shard, and each integer member in the narrowest integer dtype that holds its values (``runs``); format 3
also stores a field with one value on every real step of the shard (zeros on padding) once, of shape ``field.shape``
(``constant``); format 1
stored each flag per step as ``flag.<name>`` ``(K, T, B)`` and every member in its manifest dtype, and is still
read. Readers see both the same way: ``reader.open_shard`` gives per-step flags and the fields' own dtypes. An
export of a mix (``streamcli.mix``) names its sources in the manifest's ``sources`` and adds ``run.source`` (format
1: ``flag.source``, int64 per step, -1 on padding).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from streamcli._version import __version__
from streamcli.batch import FLAG_DTYPES
from streamcli.errors import ShardError
from streamcli.shards import codec
from streamcli.shards.constant import LEAD
from streamcli.shards.runs import run_columns
from streamcli.source import Field

FORMAT = "streamcli-npz-shards"
FORMAT_VERSION = 3
READ_VERSIONS = (1, 2, 3)  # format 1 (per-step flags) and 2 (no folded fields) are still read
MANIFEST = "index.json"
PARTIAL = ".partial.json"
SHARD_RE = re.compile(r"^shard-(\d{5,})\.npz$")
LOCK = ".streamcli.lock"
_SAFE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]*\.npz$")
_TEMP_RE = re.compile(r"^\.(shard-\d{5,}\.npz|index\.json|\.partial\.json)\.tmp$")
DEFLATE_MAX_RATIO = 1032
"""Deflate never expands a byte of compressed data into more than 1032 bytes (RFC 1951: a 258-byte match costs
at least two bits), so a shard that declares more is impossible: refused before anything is decompressed."""
BOMB_BYTES = 1 << 30
BOMB_RATIO = 100
"""A compressed shard (deflate or zstd) may declare more than ``BOMB_BYTES`` (1 GiB) of arrays only at a ratio to
its file of at most ``BOMB_RATIO``: real batches (fields and per-step flags) stay far below it, while a bomb sits
near its codec's limit (1032 for deflate). A small shard may have any possible ratio: inflating it costs little
whatever it holds."""
_REQUIRED = ("format", "format_version", "fields", "batch_size", "time_steps", "layout", "shards", "batches")
_ENTRY_KEYS = ("name", "batches", "bytes", "sha256")


def shard_name(i: int) -> str:
    return f"shard-{i:05d}.npz"


def is_temp_name(name: str) -> bool:
    """A file the writer is writing (``.shard-00003.npz.tmp``, ``.index.json.tmp``): exactly the temporary
    names it makes, so that cleaning up never touches a user's own ``.notes.tmp``."""
    return bool(_TEMP_RE.match(name))


def is_export_file(name: str) -> bool:
    """A name an export writes: shards, the manifest, the partial record and their temporary files (not the lock)."""
    return bool(SHARD_RE.match(name)) or name in (MANIFEST, PARTIAL) or is_temp_name(name)


_RUN_BYTES = 16  # a run's record, about, once narrowed: what a row of a batch costs beside its fields


def batch_nbytes(fields: Sequence[Field], batch_size: int, time_steps: int) -> int:
    """Bytes one batch takes in a shard at most (fields in their own dtypes, a run per row, reset and meta)."""
    per_step = sum(f.nbytes for f in fields)
    return per_step * batch_size * time_steps + batch_size * (1 + _RUN_BYTES) + 16


def make_header(
    *,
    fields: Sequence[Field],
    batch_size: int,
    time_steps: int,
    layout: str,
    source: Mapping[str, Any],
    loader: Mapping[str, Any],
    shard_bytes: int,
    compress: bool | str,
    level: int | None = None,
    streams: Sequence[str] = (),
    stream_lengths: Sequence[int | None] = (),
    sources: Sequence[str] = (),
) -> dict[str, Any]:
    """The manifest minus its shard list: everything that decides the bytes of the shards.

    ``sources``: the names of a mix's sources (what ``batch.source`` indexes); the shards then hold ``flag.source``.

    ``compress`` is False or ``"none"``, True or ``"deflate"``, or ``"zstd"`` (``level`` 1-22, default 3; recorded
    as ``compression_level``, a key only zstd exports have).
    """
    how = codec.parse(compress, level)
    per_batch = batch_nbytes(fields, batch_size, time_steps)
    header = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "streamcli_version": __version__,
        "source": dict(source),
        "loader": dict(loader),
        "fields": [{"name": f.name, "shape": list(f.shape), "dtype": f.dtype} for f in fields],
        "flags": dict(FLAG_DTYPES),
        "batch_size": int(batch_size),
        "time_steps": int(time_steps),
        "layout": layout,
        "compression": how.name,
        **({"compression_level": how.level} if how.name == "zstd" else {}),
        "batches_per_shard": max(1, int(shard_bytes) // per_batch),
        "streams": list(streams),
        "stream_lengths": list(stream_lengths),
        **({"sources": list(sources)} if sources else {}),
    }
    out: dict[str, Any] = json.loads(json.dumps(header))  # as it will read back (tuples become lists)
    return out


@dataclass(frozen=True)
class ShardInfo:
    """One shard's entry in the manifest."""

    name: str
    batches: int
    bytes: int
    sha256: str

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "batches": self.batches, "bytes": self.bytes, "sha256": self.sha256}


def member_names(header: Mapping[str, Any]) -> list[str]:
    """The arrays of a shard, in the fixed order they are written."""
    names = [f"data.{f['name']}" for f in header["fields"]]
    if header.get("format_version") == 1:
        names += [f"flag.{n}" for n in FLAG_DTYPES] + ["flag.reset"]
        names += ["flag.source"] if header.get("sources") else []
    else:
        names += ["flag.reset"] + [f"run.{c}" for c in run_columns(bool(header.get("sources")))]
    return [*names, "meta.epoch", "meta.index"]


class Narrow(str):
    """An expected member dtype under which any integer dtype that casts to it exactly may be stored (format 2)."""


class AtMost(int):
    """An expected member dimension that only the member's header gives, from 0 to this (a shard's runs)."""


class Foldable(tuple[int, ...]):
    """An expected field member's shape ``(K, T, B, *field)`` that format 3 may also store folded, as ``field``
    alone (``constant``: one value for every real step of the shard)."""


def accepts(want: tuple[tuple[int, ...], str], shape: tuple[int, ...], dtype: np.dtype[Any]) -> bool:
    """Whether a member of ``shape`` and ``dtype`` is what ``expected_shapes`` asks for."""
    shape_want, dtype_want = want
    if isinstance(dtype_want, Narrow):
        if dtype.kind not in "iu" or not np.can_cast(dtype, np.dtype(dtype_want), "safe"):
            return False
    elif dtype.str != dtype_want:
        return False
    if isinstance(shape_want, Foldable) and tuple(shape) == tuple(shape_want[LEAD:]):
        return True
    if len(shape) != len(shape_want):
        return False
    return all(0 <= g <= w if isinstance(w, AtMost) else g == w for g, w in zip(shape, shape_want, strict=True))


def manifest_fields(m: Mapping[str, Any]) -> tuple[Field, ...]:
    """The fields a manifest (or header) describes."""
    return tuple(Field(f["name"], tuple(f["shape"]), f["dtype"]) for f in m["fields"])


def expected_shapes(m: Mapping[str, Any], k: int) -> dict[str, tuple[tuple[int, ...], str]]:
    """Member name -> (shape, dtype string) of a shard holding ``k`` batches, in the written order. In format 2
    an integer member's dtype is a ``Narrow`` and the runs' length an ``AtMost``; in format 3 a field's shape is a
    ``Foldable`` (``accepts`` checks a member)."""
    tb = (m["time_steps"], m["batch_size"]) if m["layout"] == "TB" else (m["batch_size"], m["time_steps"])
    v1 = m.get("format_version") == 1
    foldable = int(m.get("format_version", 0)) >= 3
    out: dict[str, tuple[tuple[int, ...], str]] = {}
    for f in manifest_fields(m):
        narrow = not v1 and f.np_dtype.kind in "iu" and f.np_dtype.itemsize > 1
        shape = (k, *tb, *f.shape)
        dtype = Narrow(f.np_dtype.str) if narrow else f.np_dtype.str
        out[f"data.{f.name}"] = (Foldable(shape) if foldable else shape, dtype)
    if v1:
        for name, dtype in m["flags"].items():
            out[f"flag.{name}"] = ((k, *tb), np.dtype(dtype).str)
    out["flag.reset"] = ((k, m["batch_size"]), "|b1")
    if v1 and m.get("sources"):
        out["flag.source"] = ((k, *tb), "<i8")
    if not v1:
        runs = AtMost(k * int(m["time_steps"]) * int(m["batch_size"]))  # a run holds one step at least
        out |= {f"run.{c}": ((runs,), Narrow("<i8")) for c in run_columns(bool(m.get("sources")))}
    out["meta.epoch"] = ((k,), "<i8")
    out["meta.index"] = ((k,), "<i8")
    return out


def shard_path(out_dir: str | os.PathLike[str], name: object) -> Path:
    """The path of shard ``name``; only plain file names inside ``out_dir`` are accepted."""
    if not isinstance(name, str) or not _SAFE_NAME.match(name) or ".." in name:
        raise ShardError(
            f"unsafe shard name {name!r} in the manifest: names must be plain file names like shard-00000.npz"
        )
    root = Path(out_dir).resolve()
    path = (root / name).resolve()
    if path.parent != root:
        raise ShardError(f"shard {name!r} resolves outside {str(root)!r}")
    return path


def _is_int(v: object, low: int = 0) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= low


def validate_manifest(m: dict[str, Any], out_dir: str | os.PathLike[str], *, where: str) -> None:
    """Check a parsed manifest in place (and add ``"_fields"``); ``where`` names it in errors.

    Every value is checked for its type and range, the codec must be known (and zstandard installed for zstd),
    and each shard's declared arrays must fit its file: at most the file's bytes uncompressed, at most
    ``DEFLATE_MAX_RATIO`` or ``codec.ZSTD_MAX_RATIO`` times them compressed, and at most ``BOMB_RATIO`` times them
    when that is over ``BOMB_BYTES``.
    """
    missing = [k for k in _REQUIRED if k not in m]
    if missing:
        raise ShardError(f"{where} lacks {', '.join(missing)}")
    if m["format"] != FORMAT or m["format_version"] not in READ_VERSIONS or isinstance(m["format_version"], bool):
        raise ShardError(
            f"{where} is format {m['format']!r} v{m['format_version']}; this streamcli reads "
            f"{FORMAT!r} v{' and v'.join(map(str, READ_VERSIONS))}"
        )
    if m["layout"] not in ("TB", "BT"):
        raise ShardError(f"{where}: layout {m['layout']!r} must be 'TB' or 'BT'")
    for key in ("batch_size", "time_steps"):
        if not _is_int(m[key], 1):
            raise ShardError(f"{where}: {key} must be a positive integer, found {m[key]!r}")
    if not _is_int(m["batches"]):
        raise ShardError(f"{where}: batches must be a non-negative integer, found {m['batches']!r}")
    if not isinstance(m["shards"], list):
        raise ShardError(f"{where}: shards must be a list")
    for s in m["shards"]:
        if not isinstance(s, dict) or not set(_ENTRY_KEYS) <= s.keys():
            raise ShardError(f"{where}: each shard needs name, batches, bytes and sha256; found {s!r}")
        shard_path(out_dir, s["name"])
        for key in ("batches", "bytes"):
            if not _is_int(s[key]):
                raise ShardError(
                    f"{where}: shard {s['name']!r}: {key} must be a non-negative integer, found {s[key]!r}"
                )
        if not isinstance(s["sha256"], str):
            raise ShardError(f"{where}: shard {s['name']!r}: sha256 must be a string, found {s['sha256']!r}")
    _check_streams(m, where)
    m.setdefault("flags", dict(FLAG_DTYPES))
    if not isinstance(m["fields"], list) or not isinstance(m["flags"], dict):
        raise ShardError(f"{where}: fields must be a list and flags an object")
    try:
        for f in m["fields"]:
            if not isinstance(f["name"], str) or not all(_is_int(n) for n in f["shape"]):
                raise TypeError(f"{f!r} needs a name and a shape of non-negative integers")
        m["_fields"] = manifest_fields(m)
        for dtype in m["flags"].values():
            np.dtype(dtype)
    except (KeyError, TypeError, ValueError) as exc:
        raise ShardError(f"{where}: bad field description: {exc}") from None
    if any(f.np_dtype.hasobject for f in m["_fields"]) or any(np.dtype(d).hasobject for d in m["flags"].values()):
        raise ShardError(f"{where}: object dtypes are not allowed")
    codec.check(m, where)
    ratio = {None: 1, "deflate": DEFLATE_MAX_RATIO, "zstd": codec.ZSTD_MAX_RATIO}[m.get("compression")]
    packed = {None: "", "deflate": "deflated", "zstd": "zstd-compressed"}[m.get("compression")]
    for s in m["shards"]:
        declared = declared_nbytes(m, s["batches"])
        if declared > s["bytes"] * ratio:
            how = "uncompressed" if ratio == 1 else f"{packed} (at most {ratio}x)"
            raise ShardError(
                f"{where}: shard {s['name']!r} declares {declared} bytes of arrays, more than its {s['bytes']} "
                f"bytes can hold {how}; the manifest is corrupted or hostile"
            )
        if ratio > 1 and declared > BOMB_BYTES and declared > s["bytes"] * BOMB_RATIO:
            raise ShardError(
                f"{where}: shard {s['name']!r} declares {declared} bytes of arrays in {s['bytes']} bytes {packed}, "
                f"{declared // max(1, s['bytes'])}x; shards over {BOMB_BYTES >> 30} GiB may inflate at most "
                f"{BOMB_RATIO}x (a zip bomb?); if the export is real, redo it with a smaller --shard-size"
            )


def _check_streams(m: Mapping[str, Any], where: str) -> None:
    streams, lengths = m.get("streams", []), m.get("stream_lengths", [])
    if not isinstance(streams, list) or not all(isinstance(n, str) for n in streams):
        raise ShardError(f"{where}: streams must be a list of names, found {streams!r}"[:300])
    if not isinstance(lengths, list) or not all(n is None or _is_int(n) for n in lengths):
        raise ShardError(f"{where}: stream_lengths must be a list of integers or nulls, found {lengths!r}"[:300])
    if streams and lengths and len(streams) != len(lengths):
        raise ShardError(f"{where}: {len(streams)} streams but {len(lengths)} stream_lengths")
    sources = m.get("sources", [])
    if not isinstance(sources, list) or not all(isinstance(n, str) for n in sources):
        raise ShardError(f"{where}: sources must be a list of names, found {sources!r}"[:300])


def declared_nbytes(m: Mapping[str, Any], k: int) -> int:
    """Bytes of the arrays a shard of ``k`` batches holds at least, by the manifest (in Python integers): exact in
    format 1; in format 2 an integer member counts one byte a value, and the runs one a row of each batch (a run
    never crosses a row); in format 3 an uncompressed field counts as folded (its mapped members are each checked to
    fit the file), while a compressed one counts in full, so that the bound on inflating a shard stays format 2's."""
    total = 0
    fold = m.get("compression") is None
    least_runs = k * int(m["batch_size"])
    for shape, dtype in expected_shapes(m, k).values():
        n = 1 if isinstance(dtype, Narrow) else np.dtype(dtype).itemsize
        for d in shape[LEAD:] if fold and isinstance(shape, Foldable) else shape:
            n *= least_runs if isinstance(d, AtMost) else int(d)
        total += n
    return total
