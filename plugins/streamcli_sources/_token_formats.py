"""Token files as language-model pipelines write them, recognised by their content rather than their name.

- **llm.c / modded-nanogpt shards**: a header of 256 little-endian int32 (magic, version, token count), then the
  ids: magic 20240520 with version 1 holds uint16 (GPT-2's vocabulary), 20240801 with version 7 uint32 (Llama 3).
- **binidx** (Megatron, GPT-NeoX, RWKV): a ``.bin`` of bare ids beside an ``.idx``: ``MMIDIDX\\0\\0``, version
  (uint64, 1), dtype code (uint8), the number of sequences and of ``doc_idx`` entries (uint64 each), then
  ``sizes`` int32, ``pointers`` int64 (byte offsets into the ``.bin``) and ``doc_idx`` int64 (the first sequence of
  each document, ending with the number of sequences).
- **.npy**: its own header gives the dtype and the count.
- **anything else**: bare ids of the ``dtype`` option (nanoGPT's ``train.bin``: uint16).

Every problem is a ``ValueError`` naming the file, found from headers and sizes alone (nothing is read in full).
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass

import numpy as np

LLMC_HEADER_BYTES = 256 * 4
LLMC_MAGICS = {20240520: (1, "uint16"), 20240801: (7, "uint32")}  # magic -> (version, id dtype)
BINIDX_MAGIC = b"MMIDIDX\x00\x00"
BINIDX_HEADER = struct.Struct("<9sQBQQ")  # magic, version, dtype code, sequences, doc_idx entries
BINIDX_DTYPES = {1: "uint8", 2: "int8", 3: "int16", 4: "int32", 5: "int64", 8: "uint16"}  # 6, 7: floats
NPY_MAGIC = b"\x93NUMPY"


@dataclass(frozen=True)
class TokenFile:
    """One file of ids: its format, the ids' dtype, where they start (bytes) and how many there are."""

    path: str
    kind: str  # "llm.c", "binidx", "npy" or "raw"
    dtype: str
    offset: int
    count: int

    def ids(self) -> np.ndarray:
        """The ids, memory-mapped, as a plain ndarray (a memmap's slices are memmaps: slower to make)."""
        if self.count == 0:
            return np.zeros(0, self.dtype)
        return np.asarray(np.memmap(self.path, np.dtype(self.dtype), mode="r", offset=self.offset, shape=(self.count,)))

    @property
    def idx_path(self) -> str:
        """The ``.idx`` beside a binidx ``.bin``."""
        return self.path[: -len(".bin")] + ".idx"


def id_dtype(dtype: str | None, where: str) -> np.dtype[np.integer]:
    """The ``dtype`` option as an integer dtype (uint16 when not given)."""
    try:
        dt = np.dtype(dtype or "uint16")
    except TypeError:
        raise ValueError(
            f"{where}: dtype={dtype!r} is not a numpy dtype; token ids are e.g. uint16 or uint32"
        ) from None
    if dt.kind not in "iu":
        raise ValueError(f"{where}: dtype={dtype!r} is not an integer dtype; token ids are e.g. uint16 or uint32")
    return dt


def read_format(path: str, dtype: str | None) -> TokenFile:
    """The format of the file at ``path``, from its first bytes (and an ``.idx`` beside a ``.bin``). A
    ``dtype`` given for a file that says its own must agree with it."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(LLMC_HEADER_BYTES)
    if path.endswith(".bin") and os.path.isfile(path[: -len(".bin")] + ".idx"):
        found = _binidx(path, size)
    elif head.startswith(NPY_MAGIC):
        found = _npy(path, size)
    elif len(head) >= 8 and int(np.frombuffer(head[:4], "<i4")[0]) in LLMC_MAGICS:
        found = _llmc(path, head, size)
    else:
        dt = id_dtype(dtype, path)
        if size % dt.itemsize:
            raise ValueError(
                f"{path}: {size} bytes is not a whole number of {dt.name} ids ({dt.itemsize} bytes each); "
                "give the dtype it was written with, e.g. -s dtype=uint32"
            )
        return TokenFile(path, "raw", dt.str, 0, size // dt.itemsize)
    if dtype is not None and np.dtype(found.dtype) != id_dtype(dtype, path):
        raise ValueError(
            f"{path}: dtype={dtype} was given but the file is {found.kind} of {np.dtype(found.dtype).name} ids; "
            "leave dtype out (it applies to files without a header)"
        )
    return found


def _llmc(path: str, head: bytes, size: int) -> TokenFile:
    if len(head) < LLMC_HEADER_BYTES:
        raise ValueError(f"{path}: an llm.c shard's header is {LLMC_HEADER_BYTES} bytes but the file has {size}")
    header = np.frombuffer(head, "<i4")
    magic, version, count = (int(v) for v in header[:3])
    want, dtype = LLMC_MAGICS[magic]
    if version != want:
        raise ValueError(f"{path}: llm.c shard of magic {magic} has version {version}, expected {want}")
    itemsize = np.dtype(dtype).itemsize
    held = (size - LLMC_HEADER_BYTES) / itemsize
    if count < 0 or held != count:
        raise ValueError(
            f"{path}: the llm.c header says {count} tokens but the file holds {held:g} after it "
            f"({size} bytes); the shard is {'truncated' if held < count else 'not what its header says'}"
        )
    return TokenFile(path, "llm.c", np.dtype(dtype).str, LLMC_HEADER_BYTES, count)


def _npy(path: str, size: int) -> TokenFile:
    with open(path, "rb") as f:
        try:
            major, _ = np.lib.format.read_magic(f)
            read = np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
            shape, _, dt = read(f)
        except ValueError as exc:
            raise ValueError(f"{path}: not a readable .npy file ({exc})") from None
        offset = f.tell()
    if dt.kind not in "iu" or len(shape) != 1:
        raise ValueError(f"{path}: a .npy of token ids must be a 1-D integer array, not {dt.name}{list(shape)}")
    count = int(shape[0])
    if offset + count * dt.itemsize > size:
        raise ValueError(f"{path}: the .npy header says {count} ids but the file is only {size} bytes")
    return TokenFile(path, "npy", dt.str, offset, count)


def _binidx(path: str, size: int) -> TokenFile:
    idx = path[: -len(".bin")] + ".idx"
    with open(idx, "rb") as f:
        raw = f.read(BINIDX_HEADER.size)
    if len(raw) < BINIDX_HEADER.size or not raw.startswith(BINIDX_MAGIC):
        raise ValueError(f"{idx}: beside {os.path.basename(path)} but not a binidx index (no MMIDIDX header)")
    _, version, code, _, _ = BINIDX_HEADER.unpack(raw)
    if version != 1:
        raise ValueError(f"{idx}: binidx version {version}, only version 1 is known")
    if code not in BINIDX_DTYPES:
        raise ValueError(f"{idx}: dtype code {code} is not an integer id type ({sorted(BINIDX_DTYPES)})")
    dt = np.dtype(BINIDX_DTYPES[code])
    if size % dt.itemsize:
        raise ValueError(f"{path}: {size} bytes is not a whole number of {dt.name} ids, as its .idx says")
    return TokenFile(path, "binidx", dt.str, 0, size // dt.itemsize)


def binidx_documents(tf: TokenFile) -> tuple[np.ndarray, np.ndarray]:
    """The documents of a binidx pair as (first id, number of ids), from ``sizes``, ``pointers`` and ``doc_idx``;
    a document's sequences must lie end to end in the ``.bin``, as every writer puts them."""
    idx = tf.idx_path
    with open(idx, "rb") as f:
        _, _, _, n, m = BINIDX_HEADER.unpack(f.read(BINIDX_HEADER.size))
        need = BINIDX_HEADER.size + 12 * n + 8 * m
        have = os.fstat(f.fileno()).st_size
        if have < need:
            raise ValueError(f"{idx}: {have} bytes, but its header's {n} sequences and {m} documents need {need}")
        sizes = np.fromfile(f, "<i4", n).astype(np.int64)
        pointers = np.fromfile(f, "<i8", n)
        doc_idx = np.fromfile(f, "<i8", m)
    isz = np.dtype(tf.dtype).itemsize
    bin_bytes = tf.count * isz
    if n and ((sizes < 0).any() or (pointers < 0).any() or (pointers % isz).any()):
        raise ValueError(f"{idx}: negative sizes or pointers not on an id boundary of {tf.path}")
    if n and int((pointers + sizes * isz).max()) > bin_bytes:
        raise ValueError(f"{idx}: its sizes do not fit {tf.path} ({bin_bytes} bytes): the pair does not match")
    bounds = doc_idx
    if not len(bounds) or bounds[0] != 0:
        bounds = np.concatenate([[0], bounds])
    if bounds[-1] != n:
        bounds = np.concatenate([bounds, [n]])
    if (np.diff(bounds) < 0).any() or bounds[-1] > n:
        raise ValueError(f"{idx}: doc_idx is not increasing within its {n} sequences")
    first = pointers // isz
    if n > 1:  # within a document each sequence starts where the one before it ends
        joined = first[:-1] + sizes[:-1] == first[1:]
        inner = np.ones(n - 1, bool)
        inner[bounds[1:-1][bounds[1:-1] > 0] - 1] = False
        if not joined[inner].all():
            raise ValueError(f"{idx}: a document's sequences are not end to end in {tf.path}; this layout is not read")
    ends = np.concatenate([[0], np.cumsum(sizes)])
    lens = ends[bounds[1:]] - ends[bounds[:-1]]
    starts = np.where(bounds[:-1] < n, first[np.minimum(bounds[:-1], max(n - 1, 0))] if n else 0, 0)
    keep = lens > 0
    return np.asarray(starts[keep], np.int64), np.asarray(lens[keep], np.int64)
