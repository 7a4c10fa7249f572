"""Shard files written: atomic and reproducible, and a written one checked from its headers alone.

Members go in a fixed order with a fixed zip timestamp (``np.savez`` stamps the current time), so shard bytes
depend only on the batches and a resumed export is byte-identical. Each member's data starts on a 64-byte
boundary (a padding extra field, as Android's zipalign does), so a memory-mapped member is aligned. The file is
written under a temporary name, fsynced and renamed; on any failure the temporary file is removed.

``complete_batches`` (a resumed export keeps the shards it finds whole) and ``extra_members`` (``verify``) read a
shard's ``.npy`` headers only, never inflating a member that claims a huge array.
"""

from __future__ import annotations

import hashlib
import os
import stat
import struct
import zipfile
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

import numpy as np

from streamcli.shards.codec import Codec, compress_npy, import_zstd, open_frame
from streamcli.shards.format import accepts, expected_shapes, member_names
from streamcli.shards.npz import LOCAL_HEADER, read_header

_ZIP_DATE = (1980, 1, 1, 0, 0, 0)
_ALIGN = 64
_PAD_ID = 0xD935  # the extra-field id zipalign uses for padding; readers skip unknown ids
_ZIP64_EXTRA = 20  # what zipfile adds to a local header written with force_zip64


def write_npz(path: Path, arrays: Mapping[str, np.ndarray], codec: Codec) -> None:
    """Write ``arrays`` as an ``.npz`` with fixed timestamps and aligned members, atomically, compressed by
    ``codec`` (a zstd frame is a stored member)."""
    tmp = path.with_name(f".{path.name}.tmp")
    method = zipfile.ZIP_DEFLATED if codec.name == "deflate" else zipfile.ZIP_STORED
    try:
        with open(tmp, "wb") as f:  # a file object: np.savez would append ".npz" to a string path
            with zipfile.ZipFile(f, "w", compression=method, allowZip64=True) as zf:
                for name, arr in arrays.items():
                    info = zipfile.ZipInfo(codec.member(name), date_time=_ZIP_DATE)
                    info.compress_type = method
                    info.external_attr = 0o644 << 16
                    info.extra = _padding(f.tell() + LOCAL_HEADER.size + len(info.filename.encode()) + _ZIP64_EXTRA)
                    with zf.open(info, "w", force_zip64=True) as member:
                        if codec.name == "zstd":
                            assert codec.level is not None
                            member.write(compress_npy(arr, codec.level))
                        else:
                            np.lib.format.write_array(member, np.asarray(arr, order="C"), allow_pickle=False)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)  # a full disk or an interrupt must not leave half a shard behind
        raise


def _padding(data_start: int) -> bytes:
    """An extra field that moves a member's data from ``data_start`` to the next aligned offset."""
    pad = -data_start % _ALIGN
    if pad == 0:
        return b""
    if pad < 4:  # an extra field is at least its 4-byte header
        pad += _ALIGN
    return struct.pack("<HH", _PAD_ID, pad - 4) + bytes(pad - 4)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def complete_batches(path: Path, header: Mapping[str, Any]) -> int:
    """How many batches a shard on disk holds, or -1 if it is unreadable (then it is rewritten).

    Every member's ``.npy`` header and zip entry size must match the header's shapes for that many batches before
    the CRCs are checked (streaming): a member that only claims a huge array is never inflated into memory.
    """
    codec = Codec.of(header)
    errors: tuple[type[Exception], ...] = (import_zstd().ZstdError,) if codec.name == "zstd" else ()
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # a named pipe would block the zip reader forever
            return -1
        with zipfile.ZipFile(path) as zf:
            by_name = {i.filename: i for i in zf.infolist()}
            if sorted(by_name) != sorted(codec.member(n) for n in member_names(header)):
                return -1
            infos = {n: by_name[codec.member(n)] for n in member_names(header)}
            k = _npy_header(zf, infos["meta.index"], codec)[0]
            if len(k) != 1:
                return -1
            for key, want in expected_shapes(header, k[0]).items():
                got_shape, got, head_len, size = _npy_header(zf, infos[key], codec)
                nbytes = got.itemsize * int(np.prod(got_shape, dtype=object))
                if not accepts(want, got_shape, got) or size != head_len + nbytes:
                    return -1
            if zf.testzip() is not None:  # for zstd, the CRC of the stored frame
                return -1
            return k[0]
    except (OSError, ValueError, zipfile.BadZipFile, EOFError, zlib.error):
        return -1
    except errors:  # a corrupted zstd frame
        return -1


def _npy_header(
    zf: zipfile.ZipFile, info: zipfile.ZipInfo, codec: Codec
) -> tuple[tuple[int, ...], np.dtype[Any], int, int]:
    """Shape, dtype and header length of a member, reading only its header, and the member's size (a zstd frame's
    declared content size)."""
    if codec.name == "zstd":
        if info.compress_type != zipfile.ZIP_STORED:
            raise ValueError(f"{info.filename} is not a stored zstd frame")
        f, size = open_frame(zf.read(info))  # the compressed frame; only its first block is decompressed
    else:
        f, size = zf.open(info), info.file_size
    with f:
        header = read_header(f)
        if header is None:
            raise ValueError(f"{info.filename} is not a .npy array of version 1.0 or 2.0")
        return header[0], header[2], f.tell(), size


def extra_members(path: Path | IO[bytes], header: Mapping[str, Any]) -> list[str]:
    """Members of a shard (a file, or a seekable remote object) that the format does not name (``verify``
    reports them)."""
    codec = Codec.of(header)
    try:
        with zipfile.ZipFile(path) as zf:
            extra = set(zf.namelist()) - {codec.member(n) for n in member_names(header)}
            return sorted(n.removesuffix(".npy") for n in extra)
    except (OSError, zipfile.BadZipFile):
        return []
