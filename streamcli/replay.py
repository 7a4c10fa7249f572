"""Read an export back: ``ShardReader`` yields the exported batches bit-identically, ``verify`` checks one.

Safe on hostile input: arrays are loaded with ``allow_pickle=False`` always, manifest shard names must be
plain file names inside the export folder, and every member's shape and dtype is checked against the
manifest before it becomes a tensor. A truncated or corrupted shard raises ``ShardError`` naming it.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import zipfile
import zlib
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from streamcli.errors import ShardError
from streamcli.export import FORMAT, FORMAT_VERSION, MANIFEST, SHARD_RE, member_names
from streamcli.source import Field

if TYPE_CHECKING:
    from streamcli.batch import Batch

_SAFE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]*\.npz$")
_REQUIRED = ("format", "format_version", "fields", "batch_size", "time_steps", "layout", "shards", "batches")


def load_manifest(out_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """Parse and sanity-check ``index.json``; raise ``ShardError`` on anything unexpected."""
    path = Path(out_dir) / MANIFEST
    if not path.is_file():
        hint = " (an interrupted export? rerun it with --resume)" if (Path(out_dir) / ".partial.json").exists() else ""
        raise ShardError(f"{str(path)!r} does not exist{hint}")
    try:
        m = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ShardError(f"{str(path)!r} is not valid JSON: {exc}") from None
    if not isinstance(m, dict):
        raise ShardError(f"{str(path)!r} must hold a JSON object")
    missing = [k for k in _REQUIRED if k not in m]
    if missing:
        raise ShardError(f"{str(path)!r} lacks {', '.join(missing)}")
    if m["format"] != FORMAT or m["format_version"] != FORMAT_VERSION:
        raise ShardError(
            f"{str(path)!r} is format {m['format']!r} v{m['format_version']}; this streamcli reads "
            f"{FORMAT!r} v{FORMAT_VERSION}"
        )
    if m["layout"] not in ("TB", "BT"):
        raise ShardError(f"{str(path)!r}: layout {m['layout']!r} must be 'TB' or 'BT'")
    if not isinstance(m["shards"], list):
        raise ShardError(f"{str(path)!r}: shards must be a list")
    for s in m["shards"]:
        if not isinstance(s, dict) or not {"name", "batches", "bytes", "sha256"} <= s.keys():
            raise ShardError(f"{str(path)!r}: each shard needs name, batches, bytes and sha256; found {s!r}")
        shard_path(out_dir, s["name"])
    try:
        m["_fields"] = [Field(f["name"], tuple(f["shape"]), f["dtype"]) for f in m["fields"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise ShardError(f"{str(path)!r}: bad field description: {exc}") from None
    if any(f.np_dtype.hasobject for f in m["_fields"]):
        raise ShardError(f"{str(path)!r}: object dtypes are not allowed")
    return m


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


def expected_shapes(m: Mapping[str, Any], k: int) -> dict[str, tuple[tuple[int, ...], str]]:
    """Member name -> (shape, dtype) of a shard holding ``k`` batches."""
    tb = (m["time_steps"], m["batch_size"]) if m["layout"] == "TB" else (m["batch_size"], m["time_steps"])
    out: dict[str, tuple[tuple[int, ...], str]] = {}
    for f in m["_fields"]:
        out[f"data.{f.name}"] = ((k, *tb, *f.shape), f.dtype)
    for name, dtype in m["flags"].items():
        out[f"flag.{name}"] = ((k, *tb), np.dtype(dtype).str)
    out["flag.reset"] = ((k, m["batch_size"]), "|b1")
    out["meta.epoch"] = ((k,), "<i8")
    out["meta.index"] = ((k,), "<i8")
    return out


def read_shard(
    out_dir: str | os.PathLike[str],
    m: Mapping[str, Any],
    entry: Mapping[str, Any],
    *,
    check: bool = True,
    only: Sequence[str] | None = None,
) -> dict[str, np.ndarray]:
    """Load one shard's arrays after checking its checksum (if ``check``), members, shapes and dtypes.

    ``only`` limits the members read (e.g. the flags), which skips decoding the data.
    """
    name = entry["name"]
    path = shard_path(out_dir, name)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ShardError(f"shard {name!r} cannot be read: {exc.strerror or exc}") from None
    if check and hashlib.sha256(data).hexdigest() != entry["sha256"]:
        raise ShardError(f"shard {name!r} is corrupted: its sha256 differs from the manifest")
    k = int(entry["batches"])
    want = expected_shapes(m, k)
    if only is not None:
        want = {key: want[key] for key in only}
    out: dict[str, np.ndarray] = {}
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            missing = sorted(set(want) - set(npz.files))
            if missing:
                raise ShardError(f"shard {name!r} lacks {', '.join(missing)}")
            for key, (shape, dtype) in want.items():
                try:
                    arr = npz[key]
                except ValueError as exc:
                    if "allow_pickle" in str(exc):
                        raise ShardError(
                            f"shard {name!r}: {key} holds pickled Python objects; refusing to load it"
                        ) from None
                    raise
                if arr.dtype.str != dtype or arr.shape != shape:
                    raise ShardError(
                        f"shard {name!r}: {key} is {arr.dtype.str}{list(arr.shape)}, "
                        f"the manifest says {dtype}{list(shape)}"
                    )
                out[key] = arr
    except ShardError:
        raise
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, zlib.error) as exc:
        raise ShardError(f"shard {name!r} is truncated or corrupted: {type(exc).__name__}: {exc}") from None
    return out


class ShardReader:
    """Iterate an export's batches, bit-identical to the exported ones, as ``Batch`` objects.

    Args:
        out_dir: the folder written by ``streamcli export``.
        check: verify each shard's sha256 before using it (on by default; costs one hash per shard).

    ``len(reader)`` is the number of batches; ``fields``, ``manifest`` and ``stream_name(i)`` describe them.
    """

    def __init__(self, out_dir: str | os.PathLike[str], *, check: bool = True) -> None:
        self.out_dir = Path(out_dir)
        self.check = check
        self.manifest = load_manifest(out_dir)
        self.fields: tuple[Field, ...] = tuple(self.manifest["_fields"])
        self.layout: str = self.manifest["layout"]
        self.batch_size: int = int(self.manifest["batch_size"])
        self.time_steps: int = int(self.manifest["time_steps"])

    def __len__(self) -> int:
        return int(self.manifest["batches"])

    def stream_name(self, i: int) -> str:
        names = self.manifest.get("streams") or []
        return str(names[i]) if 0 <= i < len(names) else str(i)

    def stream_length(self, i: int) -> int | None:
        lengths = self.manifest.get("stream_lengths") or []
        return lengths[i] if 0 <= i < len(lengths) else None

    def shards(self) -> Iterator[dict[str, np.ndarray]]:
        """The arrays of each shard in turn."""
        for entry in self.manifest["shards"]:
            yield read_shard(self.out_dir, self.manifest, entry, check=self.check)

    def __iter__(self) -> Iterator[Batch]:
        import torch

        from streamcli.batch import FLAGS, Batch

        for arrays in self.shards():
            for k in range(arrays["meta.index"].shape[0]):
                flag = {n: torch.from_numpy(arrays[f"flag.{n}"][k]) for n in FLAGS}
                yield Batch(
                    data={f.name: torch.from_numpy(arrays[f"data.{f.name}"][k]) for f in self.fields},
                    is_first=flag["is_first"],
                    reset=torch.from_numpy(arrays["flag.reset"][k]),
                    valid=flag["valid"],
                    stream=flag["stream"],
                    position=flag["position"],
                    replayed=flag["replayed"],
                    epoch=int(arrays["meta.epoch"][k]),
                    index=int(arrays["meta.index"][k]),
                    layout=self.layout,
                )


def verify(out_dir: str | os.PathLike[str]) -> list[str]:
    """Check an export's manifest, checksums, members, shapes and batch counts; return every problem."""
    try:
        m = load_manifest(out_dir)
    except ShardError as exc:
        return [str(exc)]
    problems: list[str] = []
    listed = set()
    total = 0
    for entry in m["shards"]:
        name = entry["name"]
        listed.add(name)
        total += int(entry["batches"])  # each shard's real count is checked against its entry below
        path = shard_path(out_dir, name)
        if not path.is_file():
            problems.append(f"shard {name!r} is missing")
            continue
        size = path.stat().st_size
        if size != entry["bytes"]:
            problems.append(f"shard {name!r} has {size} bytes, the manifest says {entry['bytes']}")
        try:
            read_shard(out_dir, m, entry, check=True)
        except ShardError as exc:
            problems.append(str(exc))
            continue
        try:
            with zipfile.ZipFile(path) as zf:
                extra = sorted({n.removesuffix(".npy") for n in zf.namelist()} - set(member_names(m)))
        except zipfile.BadZipFile:
            extra = []
        if extra:
            problems.append(f"shard {name!r} holds unexpected members: {', '.join(extra)}")
    if total != m["batches"]:
        problems.append(f"the shard entries add up to {total} batches, the manifest says {m['batches']}")
    for p in sorted(Path(out_dir).iterdir()):
        if SHARD_RE.match(p.name) and p.name not in listed:
            problems.append(f"shard {p.name!r} is on disk but not in the manifest")
    return problems
