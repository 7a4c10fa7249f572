"""Vendor formats (EVT 2.0/3.0, AEDAT4, DAT, ES) through faery: decoded once into memory-mappable columns, and written.

EVT and AEDAT4 are compressed streams with decoder state (EVT's time-high words, AEDAT4's compressed packets),
so a window in the middle cannot be decoded without what precedes it. The first scan of a file decodes it in
faery's packets (bounded memory) into raw little-endian columns ``t`` (int64), ``x``, ``y`` (uint16), ``p``
(uint8) in the cache folder, with each column's CRC-32 in ``meta.json``; every later read, in any worker,
memory-maps them like a ``.npy``, once the columns' sizes and checksums match (a damaged copy is decoded again).

faery stops quietly where a file ends, so a recording cut short would decode as a shorter one. Before decoding,
``check_layout`` reads what the format fixes: the header is whole, at least one record follows it, and the
records after it are whole (EVT 3.0 words are 2 bytes, EVT 2.0 words 4, DAT records the size its header says).
A cut that falls between two records cannot be told from a shorter recording, in any format.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import shutil
import tempfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from streamcli.errors import EventFileError, SourceError, StreamcliError
from streamcli_sources.events import cache
from streamcli_sources.events.formats import REMEDY as FIX
from streamcli_sources.events.formats import ColumnsReader, need

COLUMNS = {"t": "<i8", "x": "<u2", "y": "<u2", "p": "u1"}
_WORD = {"evt2": 4, "evt2.1": 8, "evt3": 2}
_EVT_NAME = {"evt2": "EVT 2.0", "evt2.1": "EVT 2.1", "evt3": "EVT 3.0"}
_HEADER_MAX = 1 << 20  # a Prophesee header is a few lines; more than this is not one
_ES_MAGIC = b"Event Stream"
_AEDAT_MAGIC = b"#!AER-DAT4.0"
_log = logging.getLogger("streamcli")
_verified: dict[str, tuple[tuple[int, ...], ...]] = {}  # folder -> its columns' stat when their CRCs last matched


def _header_end(path: str, head: bytes, size: int, what: str) -> int:
    """The byte where the ``%`` header lines of a Prophesee file end (0: no header)."""
    pos = 0
    while head[pos : pos + 1] == b"%":
        nl = head.find(b"\n", pos)
        if nl < 0 and not _is_text(head[pos:]):  # a data word whose first byte is '%', at the file's end
            break
        if nl < 0:
            if len(head) >= size:
                raise EventFileError(f"{path}: ends at byte {size} inside its header, so it is truncated; {FIX}")
            raise EventFileError(f"{path}: its header runs past {_HEADER_MAX} bytes: it is not {what}; {FIX}")
        if not _is_text(head[pos:nl]):  # a data word that starts with '%' (0x25): the header ended before it
            break
        done = head[pos:nl].strip() == b"% end"
        pos = nl + 1
        if done:
            break
    return pos


def _is_text(line: bytes) -> bool:
    """Whether ``line`` can be a header line: printable ASCII (files without ``% end`` are told apart from
    their first data word, which may start with ``%`` too, only by this)."""
    return all(32 <= c < 127 or c in (9, 13) for c in line)


def _evt_version(path: str) -> str:
    """The EVT version faery reads ``path`` as (its header's, else EVT 3.0)."""
    faery: Any = importlib.import_module("faery")
    try:
        with faery.evt.Decoder(path, None, None) as decoder:
            return str(decoder.version)
    except Exception as exc:  # faery raises plain exceptions
        raise EventFileError(f"{path}: faery cannot read its EVT header ({exc}); {FIX}") from exc


def check_layout(path: str) -> None:
    """Raise ``EventFileError`` naming the byte where ``path`` stops being a whole recording of its format."""
    suffix = Path(path).suffix.lower()
    size = os.stat(path).st_size
    what = {".raw": "a Prophesee EVT recording", ".dat": "a Prophesee DAT recording"}.get(suffix, "")
    what = what or {".es": "an Event Stream file", ".aedat4": "an AEDAT4 file"}.get(suffix, "an event recording")
    if size == 0:
        raise EventFileError(f"{path}: is empty (0 bytes), not {what}; {FIX}")
    with open(path, "rb") as f:
        head = f.read(_HEADER_MAX)
    if suffix == ".aedat4" and not head.startswith(_AEDAT_MAGIC):
        raise EventFileError(f"{path}: does not start with {_AEDAT_MAGIC.decode()!r}, so it is not {what}; {FIX}")
    if suffix == ".es":
        if not head.startswith(_ES_MAGIC):
            raise EventFileError(f"{path}: does not start with 'Event Stream', so it is not {what}; {FIX}")
        typed = len(head) > 15 and head[15] in (1, 2)  # DVS and ATIS headers add width and height
        if size <= 16 + 4 * typed:
            raise EventFileError(f"{path}: holds only its {size}-byte header, no events; {FIX}")
    if suffix not in (".raw", ".dat"):
        return
    start = _header_end(path, head, size, what)
    if start == 0:
        raise EventFileError(
            f"{path}: has no '%' header lines, so it is not {what} (a text file or another format named {suffix}?); "
            f"{FIX}"
        )
    if suffix == ".raw":
        version = _evt_version(path)
        word, name = _WORD.get(version, 2), _EVT_NAME.get(version, version)
    else:
        if size - start < 2:
            raise EventFileError(f"{path}: ends at byte {size} inside its header, so it is truncated; {FIX}")
        if start + 2 > len(head):
            raise EventFileError(f"{path}: its header runs past {_HEADER_MAX} bytes: it is not {what}; {FIX}")
        word, name = head[start + 1], "DAT"  # two bytes after the header: event type, event size
        if word == 0:
            raise EventFileError(f"{path}: its header gives events of 0 bytes at byte {start + 1}; {FIX}")
        start += 2
    body = size - start
    if body == 0:
        raise EventFileError(f"{path}: holds only its {start}-byte header and no events, so it is truncated; {FIX}")
    if body % word:
        whole = size - body % word
        raise EventFileError(
            f"{path}: ends at byte {size}, inside the {word}-byte {name} record that starts at byte {whole}, so it "
            f"is truncated; {FIX}"
        )


def _faery_error(path: str, exc: Exception) -> EventFileError:
    """faery's own message, with the file and what to do about it."""
    msg = str(exc)
    size = os.path.getsize(path) if os.path.exists(path) else 0
    if "fill whole buffer" in msg:
        why = f"it ends at byte {size} inside a record, so it is truncated"
    elif "overflow" in msg:
        why = "an event lies outside the sensor size its header gives, so the file is corrupted or its header is wrong"
    elif "LZ4" in msg or "zstd" in msg.lower():
        why = "a compressed packet does not decompress, so the file is corrupted"
    else:
        why = "the file is truncated or corrupted"
    return EventFileError(f"{path}: faery cannot decode it ({msg}): {why}; {FIX}")


def decoded_folder(path: str, cache_option: str) -> Path:
    return cache.folder(cache_option) / f"decoded-{cache.key(path)}"


def decode(path: str, cache_option: str) -> Path:
    """The folder of ``path``'s decoded columns, decoding it first if the cache has no fresh copy."""
    final = decoded_folder(path, cache_option)
    if (final / "meta.json").is_file():
        return final
    need("faery", "EVT/AEDAT4/DAT/ES")
    faery: Any = importlib.import_module("faery")  # optional, untyped
    check_layout(path)

    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        cache.sweep(final.parent)
        tmp = Path(tempfile.mkdtemp(dir=final.parent, prefix=cache.temp_prefix()))
    except OSError as exc:  # unlike an index, a decoded copy is needed to read the file at all
        raise SourceError(
            f"events: cannot decode {path} into the cache folder {final.parent}: {exc}; "
            "pass cache_dir= a writable folder (or set STREAMCLI_CACHE_DIR)"
        ) from exc
    try:
        files = {k: open(tmp / f"{k}.bin", "wb") for k in COLUMNS}  # noqa: SIM115 (closed below)
        crcs = dict.fromkeys(COLUMNS, 0)
        count = 0
        try:
            try:
                stream = faery.events_stream_from_file(path)
                width, height = stream.dimensions()
                for packet in stream:
                    for k, field in (("t", "t"), ("x", "x"), ("y", "y"), ("p", "on")):
                        data = np.asarray(packet[field], COLUMNS[k]).tobytes()
                        files[k].write(data)
                        crcs[k] = zlib.crc32(data, crcs[k])
                    count += len(packet)
            except (PermissionError, MemoryError, StreamcliError):
                raise
            except Exception as exc:  # faery raises RuntimeError and plain Exception alike
                raise _faery_error(path, exc) from exc
        finally:
            for f in files.values():
                f.close()
        meta = {"count": count, "height": height, "width": width, "crc32": crcs}
        (tmp / "meta.json").write_text(json.dumps(meta))
        cache.publish_dir(tmp, final)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return final


def open_decoded(path: str, cache_option: str) -> ColumnsReader:
    """A reader over ``path``'s decoded columns (decoding it now if needed; again if the cached copy is damaged)."""
    where = decode(path, cache_option)
    why = _damage(where)
    if why:
        _log.warning("streamcli: the decoded copy of %s in %s is damaged (%s); decoding it again", path, where, why)
        cache.discard_dir(where)
        where = decode(path, cache_option)
        if why := _damage(where):
            raise SourceError(
                f"events: the decoded copy of {path} in {where} is damaged again ({why}); "
                "check the disk of the cache folder, or pass cache_dir= another folder"
            )
    meta = json.loads((where / "meta.json").read_text())
    n = int(meta["count"])
    cols = {
        k: np.memmap(where / f"{k}.bin", dtype=dt, mode="r", shape=(n,)) if n else np.zeros(0, dt)
        for k, dt in COLUMNS.items()
    }
    return ColumnsReader(cols["x"], cols["y"], cols["t"], cols["p"], (int(meta["height"]), int(meta["width"])))


def _damage(where: Path) -> str:
    """Why the decoded columns in ``where`` are not whole ("" when their sizes and CRC-32s match ``meta.json``).

    The CRCs are computed once per process for the columns as they are on disk (inode, size, mtime, ctime): a
    column changed since, even with its mtime put back, is checked again."""
    try:
        meta = json.loads((where / "meta.json").read_text())
        n, crcs = int(meta["count"]), {k: int(meta["crc32"][k]) for k in COLUMNS}
        int(meta["height"]), int(meta["width"])
        stats = tuple(_ident(os.stat(where / f"{k}.bin")) for k in COLUMNS)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return f"{type(exc).__name__}: {exc}"
    for (k, dt), st in zip(COLUMNS.items(), stats, strict=True):
        if st[1] != n * np.dtype(dt).itemsize:
            return f"{k}.bin holds {st[1]} bytes, not {n} values of {np.dtype(dt).itemsize}"
    if _verified.get(str(where)) == stats:
        return ""
    for k in COLUMNS:
        if (crc := _crc(where / f"{k}.bin")) != crcs[k]:
            return f"{k}.bin has CRC-32 {crc:08x}, not {crcs[k]:08x}"
    _verified[str(where)] = stats
    return ""


def _ident(st: os.stat_result) -> tuple[int, ...]:
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _crc(path: Path) -> int:
    crc = 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 24):
            crc = zlib.crc32(chunk, crc)
    return crc


WRITE_VERSIONS = {".raw": "evt3", ".aedat4": None, ".dat": "dat2", ".es": None}
_FILE_TYPES = {".raw": "evt", ".aedat4": "aedat", ".dat": "dat", ".es": "es"}


def write_file(
    path: str,
    events: np.ndarray,
    sensor_size: tuple[int, int],
    version: str | None = None,
    *,
    suffix: str | None = None,
) -> str:
    """Write ``events`` (fields ``x, y, t, p``, sorted by ``t``) as a vendor file with faery's writer.

    The suffix picks the format (``.raw``: EVT 3.0, or ``version="evt2"``; ``.aedat4``; ``.dat``; ``.es``);
    timestamps are kept as they are (not shifted to start at 0), so reading the file back gives the same events.
    ``suffix`` names the format when ``path`` does not end in it (a temporary name, renamed once complete).
    """
    suffix = (suffix or Path(path).suffix).lower()
    if suffix not in WRITE_VERSIONS:
        raise ValueError(f"{path}: cannot write {suffix or 'no suffix'}; use one of {', '.join(WRITE_VERSIONS)}")
    need("faery", "EVT/AEDAT4/DAT/ES")
    faery: Any = importlib.import_module("faery")
    arr = np.zeros(len(events), faery.EVENTS_DTYPE)
    arr["t"], arr["x"], arr["y"], arr["on"] = events["t"], events["x"], events["y"], events["p"] > 0
    h, w = sensor_size
    stream = faery.events_stream_from_array(arr, dimensions=(w, h))
    version = version or WRITE_VERSIONS[suffix]
    return str(stream.to_file(path, version=version, zero_t0=False, file_type=_FILE_TYPES[suffix]))
