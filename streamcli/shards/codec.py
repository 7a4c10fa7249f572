"""How a shard's members are compressed: the codec the manifest's ``compression`` names.

- ``None`` (no compression): each array is a stored ``<key>.npy`` member, memory-mapped when read.
- ``"deflate"``: zip's own deflate; ``<key>.npy`` members inflated through ``zipfile``.
- ``"zstd"`` (level in ``compression_level``): each array is one zstandard frame, a stored ``<key>.npy.zst``
  member. The shard stays a zip with fixed timestamps and aligned members, which any unzip lists and whose
  members ``zstd -d`` turns into ``.npy`` files; Python's ``zipfile`` has no zstd method before 3.14, and a stored
  frame needs none. Each frame declares its content size and carries a checksum: the size is checked against
  the manifest after the ``.npy`` header and before the rest is decompressed, and a flipped bit fails the
  checksum even when the shard's sha256 is not checked.

zstandard is an optional dependency (``pip install 'streamcli[zstd]'``); it is imported only for zstd shards.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import IO, Any

import numpy as np

from streamcli.errors import ShardError

CODECS = (None, "deflate", "zstd")
"""The values of a manifest's ``compression``."""
NAMES = {"none": None, "deflate": "deflate", "zstd": "zstd"}
"""What a user types (``export --compress``) -> the codec."""
ZSTD_LEVELS = range(1, 23)
ZSTD_DEFAULT_LEVEL = 3
ZSTD_MAX_RATIO = 32768
"""A zstd frame never expands a byte into more than 32768 bytes: its densest block is an RLE block, 4 bytes
(a 3-byte block header and the byte) for at most 128 KiB of content."""
INSTALL = "pip install 'streamcli[zstd]'"
_FRAME_HEADER_MAX = 18  # a zstd frame header's largest size: magic, descriptor, window, dictionary id, size


@dataclass(frozen=True)
class Codec:
    """A shard's codec: ``name`` (one of ``CODECS``) and, for zstd, its ``level``."""

    name: str | None = None
    level: int | None = None

    @classmethod
    def of(cls, header: Mapping[str, Any]) -> Codec:
        """The codec a header or manifest records."""
        name = header.get("compression")
        return cls(name, header.get("compression_level") if name == "zstd" else None)

    def member(self, key: str) -> str:
        """The zip member that holds array ``key``."""
        return f"{key}.npy.zst" if self.name == "zstd" else f"{key}.npy"


def parse(compress: bool | str | None, level: int | None) -> Codec:
    """The codec for ``make_header``'s ``compress`` (False/None/"none", True/"deflate", "zstd") and ``level``."""
    if compress is True:
        compress = "deflate"
    elif compress is False or compress is None:
        compress = "none"
    if compress not in NAMES:
        raise ValueError(f"compress={compress!r} must be one of {', '.join(NAMES)}")
    name = NAMES[compress]
    if name != "zstd":
        if level is not None:
            raise ValueError(f"level={level!r} is for zstd only; compress={compress!r} has no level")
        return Codec(name)
    level = ZSTD_DEFAULT_LEVEL if level is None else level
    if not isinstance(level, int) or isinstance(level, bool) or level not in ZSTD_LEVELS:
        raise ValueError(f"level={level!r} must be an integer from {ZSTD_LEVELS[0]} to {ZSTD_LEVELS[-1]}")
    import_zstd()
    return Codec(name, level)


def import_zstd() -> ModuleType:
    """The zstandard module, or ``ShardError`` naming the fix."""
    try:
        import zstandard
    except ImportError:
        raise ShardError(f"zstd shards need the zstandard package: {INSTALL}") from None
    return zstandard


def check(m: Mapping[str, Any], where: str) -> None:
    """Refuse a manifest whose codec this streamcli does not know, or cannot read here."""
    name = m.get("compression")
    if name not in CODECS:
        raise ShardError(
            f"{where}: compression {name!r} is unknown; this streamcli reads shards compressed with deflate or "
            "zstd, or not at all (a newer streamcli wrote them? upgrade it)"[:400]
        )
    if name == "zstd":
        level = m.get("compression_level")
        if not isinstance(level, int) or isinstance(level, bool):
            raise ShardError(f"{where}: compression_level must be an integer, found {level!r}"[:300])
        import_zstd()


def compress_npy(arr: np.ndarray, level: int) -> bytes:
    """``arr`` as a ``.npy`` file in one zstd frame that declares its size and carries a checksum.

    One-shot compression of the whole file: the bytes depend only on the array, the level and the zstd version.
    """
    zstd = import_zstd()
    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.asarray(arr, order="C"), allow_pickle=False)
    cctx = zstd.ZstdCompressor(level=level, write_checksum=True, write_content_size=True)
    return bytes(cctx.compress(buf.getbuffer()))


def open_frame(frame: bytes | memoryview) -> tuple[IO[bytes], int]:
    """A reader of the content of the zstd frame ``frame`` and the content size the frame declares; ``ValueError``
    if it declares none.

    The reader decompresses as it is read, so a caller that checks the declared size before reading the rest
    never inflates more than it allows; frames that follow the first are read on (a caller finds them as content
    beyond the declared size).
    """
    zstd = import_zstd()
    size = zstd.get_frame_parameters(bytes(frame[:_FRAME_HEADER_MAX])).content_size
    if size == zstd.CONTENTSIZE_UNKNOWN:
        raise ValueError("its zstd frame does not declare its content size")
    reader: IO[bytes] = zstd.ZstdDecompressor().stream_reader(frame, read_across_frames=True)
    return reader, int(size)
