"""Shard files read: safe, fast reading of ``.npz`` members (``npz_write`` writes them).

``open_folder_shard``: an uncompressed shard is memory-mapped, one map per shard, and each member is an
array viewing it (copy-on-write, so tensors built on it are writable and the file is never changed); the
map lives as long as any array or tensor that views it. A compressed shard is read once and each member
decompressed once (deflate through ``zipfile``; a zstd member, a stored frame, is sliced from the file's bytes and
streamed into its array, see ``codec``). Either way pickles are never loaded, and every member's shape and dtype
is checked against the manifest before it is used. The sha256 of the whole file is checked only on request (it reads
every byte once more; ``verify`` always does it).
"""

from __future__ import annotations

import functools
import hashlib
import io
import mmap
import os
import stat
import struct
import zipfile
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any, BinaryIO, Literal

import numpy as np

from streamcli.errors import ShardError
from streamcli.shards.codec import Codec, import_zstd, open_frame
from streamcli.shards.format import accepts, expected_shapes, shard_path
from streamcli.storage import urls

LOCAL_HEADER = struct.Struct("<4s5HLLLHH")  # a zip local file header (30 bytes)
_CHUNK = 1 << 20


def open_folder_shard(
    out_dir: str | os.PathLike[str],
    m: Mapping[str, Any],
    entry: Mapping[str, Any],
    *,
    check: bool = False,
    only: Sequence[str] | None = None,
) -> dict[str, np.ndarray]:
    """``open_shard`` for an export folder: uncompressed members are memory-mapped (see the module's text)."""
    name = entry["name"]
    path = shard_path(urls.local_path(out_dir), name)
    want = expected_shapes(m, int(entry["batches"]))
    if only is not None:
        want = {key: want[key] for key in only}
    codec = Codec.of(m)
    try:
        with open_regular(path) as f:
            size = os.fstat(f.fileno()).st_size
            if size != entry["bytes"]:
                raise ShardError(f"shard {name!r} has {size} bytes, the manifest says {entry['bytes']}")
            with zipfile.ZipFile(f) as zf:
                by_name = {i.filename: i for i in zf.infolist()}
            infos = {key: by_name[codec.member(key)] for key in want if codec.member(key) in by_name}
            missing = sorted(set(want) - set(infos))
            if missing:
                raise ShardError(f"shard {name!r} lacks {', '.join(missing)}")
            if codec.name != "zstd" and all(infos[key].compress_type == zipfile.ZIP_STORED for key in want):
                mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
                if check:
                    _check_sha(name, mm, entry)
                return {key: _map_member(name, mm, infos[key], key, *want[key]) for key in want}
            f.seek(0)
            data = f.read()
    except FileNotFoundError:
        raise ShardError(f"shard {name!r} is missing") from None
    except ShardError:
        raise
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, struct.error) as exc:
        raise ShardError(f"shard {name!r} is truncated or corrupted: {type(exc).__name__}: {exc}") from None
    if check:
        _check_sha(name, data, entry)
    if codec.name == "zstd":
        return _load_frames(name, data, infos, want)
    return load_members(name, data, want)


def open_regular(path: Path) -> BinaryIO:
    """``path`` opened for reading, refused with ``ShardError`` unless it is a regular file.

    ``O_NONBLOCK`` makes opening a named pipe return at once (a plain ``open`` would wait for a writer forever);
    ``fstat`` then shows what was opened.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ShardError(f"shard {path.name!r} is not a regular file (a named pipe or a device?); refusing it")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _check_sha(name: str, data: bytes | mmap.mmap, entry: Mapping[str, Any]) -> None:
    if hashlib.sha256(data).hexdigest() != entry["sha256"]:
        raise ShardError(f"shard {name!r} is corrupted: its sha256 differs from the manifest")


def _refuse(name: str, key: str, dtype: np.dtype[Any], shape: tuple[int, ...], want: tuple[Any, str]) -> None:
    if dtype.hasobject:
        raise ShardError(f"shard {name!r}: {key} holds pickled Python objects; refusing to load it")
    if not accepts(want, tuple(shape), dtype):
        raise ShardError(
            f"shard {name!r}: {key} is {dtype.str}{list(shape)}, the manifest says {want[1]}{list(want[0])}"
        )


def _map_member(
    name: str, mm: mmap.mmap, info: zipfile.ZipInfo, key: str, shape: tuple[int, ...], dtype: str
) -> np.ndarray:
    """An array viewing one stored member inside the shard's map, after checking its header and extent."""
    start = _data_start(name, key, mm, info)
    major = mm[start + 6] if start + 12 <= len(mm) else 0
    size_end = start + (10 if major == 1 else 12)
    head_len = size_end - start + int.from_bytes(mm[start + 8 : size_end], "little")
    sane = major in (1, 2) and head_len <= min(info.file_size, 1 << 20)
    header = _parse_npy_header(mm[start : start + head_len]) if sane else None
    if header is None:
        raise ShardError(f"shard {name!r}: {key} is not a .npy array of version 1.0 or 2.0")
    got_shape, fortran, got = header
    _refuse(name, key, got, got_shape, (shape, dtype))
    shape = got_shape  # what the manifest allows: a narrowed dtype, or as many runs as the header says
    offset = start + head_len
    nbytes = int(np.prod(shape, dtype=np.int64)) * got.itemsize
    if head_len + nbytes != info.file_size or offset + nbytes > len(mm):
        raise ShardError(f"shard {name!r} is truncated or corrupted: {key} does not fit its zip entry")
    order: Literal["C", "F"] = "F" if fortran else "C"
    return np.ndarray(shape, dtype=got, buffer=mm, offset=offset, order=order)


Header = tuple[tuple[int, ...], bool, np.dtype[Any]]
"""A ``.npy`` header: shape, Fortran order, dtype."""


def read_header(f: IO[bytes]) -> Header | None:
    """The ``.npy`` header at ``f``'s position (safe parsing: no pickle), leaving ``f`` at the array's first byte;
    None for a version other than 1.0 and 2.0."""
    version = np.lib.format.read_magic(f)
    if version == (1, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
    elif version == (2, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
    else:
        return None
    return tuple(shape), bool(fortran), dtype


@functools.lru_cache(maxsize=256)
def _parse_npy_header(head: bytes) -> Header | None:
    """``read_header`` of a header's bytes (cached, as shards repeat them)."""
    return read_header(io.BytesIO(head))


def load_members(
    name: str, data: bytes | IO[bytes], want: Mapping[str, tuple[tuple[int, ...], str]]
) -> dict[str, np.ndarray]:
    """Decompress the members ``want`` names, each only after its ``.npy`` header and its zip entry's size agree
    with the manifest: a member that declares more than the manifest is refused before any of it is inflated.

    ``data`` is the shard's bytes, or a seekable file (a remote object: only the members asked for are read)."""
    out: dict[str, np.ndarray] = {}
    try:
        with zipfile.ZipFile(io.BytesIO(data) if isinstance(data, bytes) else data) as zf:
            for key, (shape, dtype) in want.items():
                info = zf.getinfo(f"{key}.npy")
                with zf.open(info) as member:
                    out[key] = _read_member(name, key, member, info.file_size, shape, dtype)
    except ShardError:
        raise
    except (KeyError, ValueError, OSError, EOFError, zipfile.BadZipFile, zlib.error) as exc:
        raise ShardError(f"shard {name!r} is truncated or corrupted: {type(exc).__name__}: {exc}") from None
    return out


def load_codec_members(
    name: str, data: bytes | IO[bytes], codec: Codec, want: Mapping[str, tuple[tuple[int, ...], str]]
) -> dict[str, np.ndarray]:
    """``load_members`` for any codec: a zstd shard's members are ``<key>.npy.zst`` frames, read from ``data`` (the
    shard's bytes, or a seekable file of which only the frames asked for are read)."""
    if codec.name != "zstd":
        return load_members(name, data, want)
    try:
        with zipfile.ZipFile(io.BytesIO(data) if isinstance(data, bytes) else data) as zf:
            by_name = {i.filename: i for i in zf.infolist()}
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
        raise ShardError(f"shard {name!r} is truncated or corrupted: {type(exc).__name__}: {exc}") from None
    infos = {key: by_name[codec.member(key)] for key in want if codec.member(key) in by_name}
    missing = sorted(set(want) - set(infos))
    if missing:
        raise ShardError(f"shard {name!r} lacks {', '.join(missing)}")
    if isinstance(data, bytes):
        return _load_frames(name, data, infos, want)
    out: dict[str, np.ndarray] = {}
    for key in want:  # each frame by its own range: its local header, then the frame
        info = infos[key]
        try:
            data.seek(info.header_offset)
            head = data.read(LOCAL_HEADER.size)
            sig, *_, name_len, extra_len = LOCAL_HEADER.unpack(head)
            if sig != b"PK\x03\x04":
                raise ShardError(f"shard {name!r}: {key} has a corrupted zip header")
            data.seek(info.header_offset + LOCAL_HEADER.size + name_len + extra_len)
            frame = data.read(info.compress_size)
        except (ValueError, OSError, struct.error) as exc:
            raise ShardError(f"shard {name!r} is truncated or corrupted: {key}: {exc}") from None
        if len(frame) != info.compress_size:
            raise ShardError(f"shard {name!r} is truncated or corrupted: {key} does not fit the file")
        local = zipfile.ZipInfo(info.filename)
        local.compress_type, local.compress_size, local.header_offset = info.compress_type, len(frame), 0
        padded = LOCAL_HEADER.pack(b"PK\x03\x04", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0) + frame
        out.update(_load_frames(name, padded, {key: local}, {key: want[key]}))
    return out


def _load_frames(
    name: str, data: bytes, infos: Mapping[str, zipfile.ZipInfo], want: Mapping[str, tuple[tuple[int, ...], str]]
) -> dict[str, np.ndarray]:
    """Decompress the zstd frames ``want`` names (stored members of the shard's bytes ``data``), each only after its
    ``.npy`` header and the content size its frame declares agree with the manifest."""
    zstd = import_zstd()
    out: dict[str, np.ndarray] = {}
    view = memoryview(data)
    key = ""
    try:
        for key, (shape, dtype) in want.items():
            info = infos[key]
            if info.compress_type != zipfile.ZIP_STORED:
                raise ShardError(f"shard {name!r}: {key} is not a stored zstd frame; the shard is corrupted or hostile")
            start = _data_start(name, key, view, info)
            if start + info.compress_size > len(view):
                raise ShardError(f"shard {name!r} is truncated or corrupted: {key} does not fit the file")
            reader, size = open_frame(view[start : start + info.compress_size])
            with reader:
                out[key] = _read_member(name, key, reader, size, shape, dtype)
    except ShardError:
        raise
    except (ValueError, OSError, EOFError, struct.error, zstd.ZstdError) as exc:
        raise ShardError(f"shard {name!r} is truncated or corrupted: {key}: {exc}") from None
    return out


def _data_start(name: str, key: str, buf: memoryview | mmap.mmap, info: zipfile.ZipInfo) -> int:
    """Where a member's data starts in the shard's bytes ``buf``, from its local zip header."""
    sig, *_, name_len, extra_len = LOCAL_HEADER.unpack_from(buf, info.header_offset)
    if sig != b"PK\x03\x04":
        raise ShardError(f"shard {name!r}: {key} has a corrupted zip header")
    return int(info.header_offset + LOCAL_HEADER.size + name_len + extra_len)


def _read_member(name: str, key: str, member: IO[bytes], size: int, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """Member ``key``'s array, read from ``member`` (at its first byte, ``size`` bytes long): its ``.npy`` header and
    ``size`` must agree with the manifest before the rest is read, so a member that only claims a huge array is
    refused before any of it is inflated."""
    header = read_header(member)
    if header is None:
        raise ShardError(f"shard {name!r}: {key} is not a .npy array of version 1.0 or 2.0")
    got_shape, fortran, got = header
    _refuse(name, key, got, got_shape, (shape, dtype))
    arr = np.empty(got_shape, dtype=got, order="F" if fortran else "C")
    if size != member.tell() + arr.nbytes:  # the zip entry (or zstd frame) must hold exactly the array
        raise ShardError(f"shard {name!r} is truncated or corrupted: {key} does not fit its zip entry")
    view = arr.reshape(-1, order="A").view(np.uint8)  # the array's own bytes, in the order they are stored
    pos = 0
    while pos < arr.nbytes:  # in chunks: never more than one chunk beyond the array itself
        n = member.readinto(view[pos : pos + _CHUNK])  # type: ignore[attr-defined]
        if not n:
            raise ShardError(f"shard {name!r} is truncated or corrupted: {key} ends early")
        pos += n
    if member.read(1):
        raise ShardError(f"shard {name!r} is truncated or corrupted: {key} is longer than its header says")
    return arr
