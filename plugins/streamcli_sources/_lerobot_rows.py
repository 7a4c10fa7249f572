"""The frames of one LeRobot episode, read from its Parquet file by row group: only the groups that hold its rows.

A v3.x data file holds many episodes (one row group each since LeRobot's 2026 writer, several per group before),
so a worker opening an episode reads the groups that overlap its rows and slices them; a v2.x file is the episode.
Fixed-size list columns (LeRobot's 1-D features) and nested lists (its 2-D to 5-D ``ArrayND``) become arrays of the
feature's shape; an ``image`` feature stays as its encoded bytes (decoded per step by ``image``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.parquet as pq

from streamcli_sources._lerobot_meta import Episode, Feature

Rows = dict[str, Any]
"""Feature name -> an array ``(length, *shape)``, or for an image feature a list of encoded images."""


def read(root: Path, episode: Episode, features: Sequence[Feature], start: int = 0) -> Rows:
    """Rows ``start`` to the end of ``episode``: its array and image features, checked against the metadata."""
    path = root / episode.data
    if not path.is_file():
        raise ValueError(f"{str(path)!r} does not exist: episode {episode.index}'s frames should be there")
    file = pq.ParquetFile(path)
    names = set(file.schema_arrow.names)
    wanted = [f for f in features if f.kind != "video"]
    missing = [f.name for f in wanted if f.name not in names]
    if missing:
        raise ValueError(f"{str(path)!r} has no column {', '.join(map(repr, missing))}, a feature of meta/info.json")
    lo, hi = episode.first_row + start, episode.first_row + episode.length
    groups, first = _groups(file.metadata, lo, hi)
    columns = [f.name for f in wanted] + (["episode_index"] if "episode_index" in names else [])
    table = file.read_row_groups(groups, columns=columns) if groups else file.schema_arrow.empty_table()
    table = table.slice(lo - first, hi - lo)
    if table.num_rows != hi - lo:
        raise ValueError(
            f"{str(path)!r} has {file.metadata.num_rows} rows, fewer than episode {episode.index} needs "
            f"(rows {episode.first_row} to {hi}); the metadata and the data disagree"
        )
    if "episode_index" in names:
        got = np.unique(table.column("episode_index").to_numpy())
        if got.size and (got.size > 1 or int(got[0]) != episode.index):
            raise ValueError(
                f"{str(path)!r}: rows {lo} to {hi} hold episode {got.tolist()}, not episode {episode.index} where the "
                "metadata places it; the metadata and the data disagree"
            )
    out: Rows = {}
    for f in wanted:
        column = table.column(f.name)
        out[f.name] = _images(column, path, f) if f.kind == "image" else _array(column, path, f)
    return out


def _groups(meta: pq.FileMetaData, lo: int, hi: int) -> tuple[list[int], int]:
    """The row groups that hold rows ``lo`` to ``hi`` of the file, and the file row at which the first begins."""
    groups: list[int] = []
    first = 0
    row = 0
    for g in range(meta.num_row_groups):
        n = meta.row_group(g).num_rows
        if row < hi and row + n > lo:
            if not groups:
                first = row
            groups.append(g)
        row += n
    return groups, first


def _array(column: pa.ChunkedArray, path: Path, f: Feature) -> npt.NDArray[Any]:
    """A column as ``(rows, *f.shape)`` of the feature's dtype; lists are flattened level by level."""
    arr: Any = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    while pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type) or pa.types.is_fixed_size_list(arr.type):
        if arr.null_count:
            break
        arr = arr.flatten()
    n = len(column)
    size = int(np.prod(f.shape, dtype=np.int64))
    if pa.types.is_nested(arr.type) or arr.null_count or len(arr) != n * size:
        raise ValueError(
            f"{str(path)!r}: column {f.name!r} does not hold {list(f.shape)} values per row as meta/info.json says "
            f"({arr.type}, {len(arr)} values for {n} rows{', with nulls' if arr.null_count else ''})"
        )
    return np.asarray(arr.to_numpy(zero_copy_only=False)).astype(f.dtype, copy=False).reshape(n, *f.shape)


def _images(column: pa.ChunkedArray, path: Path, f: Feature) -> list[bytes]:
    """An image column (a struct of ``bytes`` and ``path``, as Hugging Face datasets write it) as encoded images."""
    if not pa.types.is_struct(column.type) or column.type.get_field_index("bytes") < 0:
        raise ValueError(f"{str(path)!r}: column {f.name!r} is {column.type}, not images (a struct with 'bytes')")
    out: list[bytes] = column.combine_chunks().field("bytes").to_pylist()
    if any(b is None for b in out):
        raise ValueError(f"{str(path)!r}: column {f.name!r} has images by path only; embedded images are read")
    return out


def image(data: bytes, size: tuple[int, int], name: str) -> npt.NDArray[np.uint8]:
    """One encoded image (PNG, JPEG) as uint8 RGB ``(3, H, W)`` of ``size``."""
    bgr = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    if bgr is None:
        raise ValueError(f"an image of {name!r} does not decode")
    if bgr.shape[:2] != size:
        bgr = cv2.resize(bgr, (size[1], size[0]), interpolation=cv2.INTER_LINEAR)
    return np.ascontiguousarray(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB).transpose(2, 0, 1))
