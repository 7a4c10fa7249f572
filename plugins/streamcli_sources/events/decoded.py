"""Vendor formats (EVT 2.0/3.0, AEDAT4, DAT, ES) through faery: decoded once into memory-mappable columns, and written.

EVT and AEDAT4 are compressed streams with decoder state (EVT's time-high words, AEDAT4's compressed packets),
so a window in the middle cannot be decoded without what precedes it. The first scan of a file decodes it in
faery's packets (bounded memory) into raw little-endian columns ``t`` (int64), ``x``, ``y`` (uint16), ``p``
(uint8) in the cache folder; every later read, in any worker, memory-maps them like a ``.npy``.
"""

from __future__ import annotations

import importlib
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from streamcli.errors import SourceError
from streamcli_sources.events import cache
from streamcli_sources.events.formats import ColumnsReader, need

COLUMNS = {"t": "<i8", "x": "<u2", "y": "<u2", "p": "u1"}


def decoded_folder(path: str, cache_option: str) -> Path:
    return cache.folder(cache_option) / f"decoded-{cache.key(path)}"


def decode(path: str, cache_option: str) -> Path:
    """The folder of ``path``'s decoded columns, decoding it first if the cache has no fresh copy."""
    final = decoded_folder(path, cache_option)
    if (final / "meta.json").is_file():
        return final
    need("faery", "EVT/AEDAT4/DAT/ES")
    faery: Any = importlib.import_module("faery")  # optional, untyped

    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=final.parent, prefix=".tmp-decoded-"))
    except OSError as exc:  # unlike an index, a decoded copy is needed to read the file at all
        raise SourceError(
            f"events: cannot decode {path} into the cache folder {final.parent}: {exc}; "
            "pass cache_dir= a writable folder (or set STREAMCLI_CACHE_DIR)"
        ) from exc
    try:
        stream = faery.events_stream_from_file(path)
        width, height = stream.dimensions()
        files = {k: open(tmp / f"{k}.bin", "wb") for k in COLUMNS}  # noqa: SIM115 (closed below)
        count = 0
        try:
            for packet in stream:
                files["t"].write(np.asarray(packet["t"], COLUMNS["t"]).tobytes())
                files["x"].write(np.asarray(packet["x"], COLUMNS["x"]).tobytes())
                files["y"].write(np.asarray(packet["y"], COLUMNS["y"]).tobytes())
                files["p"].write(np.asarray(packet["on"], COLUMNS["p"]).tobytes())
                count += len(packet)
        finally:
            for f in files.values():
                f.close()
        (tmp / "meta.json").write_text(json.dumps({"count": count, "height": height, "width": width}))
        cache.publish_dir(tmp, final)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return final


def open_decoded(path: str, cache_option: str) -> ColumnsReader:
    """A reader over ``path``'s decoded columns (decoding it now if needed)."""
    where = decode(path, cache_option)
    meta = json.loads((where / "meta.json").read_text())
    n = int(meta["count"])
    cols = {
        k: np.memmap(where / f"{k}.bin", dtype=dt, mode="r", shape=(n,)) if n else np.zeros(0, dt)
        for k, dt in COLUMNS.items()
    }
    return ColumnsReader(cols["x"], cols["y"], cols["t"], cols["p"], (int(meta["height"]), int(meta["width"])))


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
