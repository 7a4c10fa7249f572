"""A LeRobot dataset's metadata, v2.x or v3.x, as one table of episodes: where each one's frames and videos are.

The two layouts (``huggingface/lerobot`` ``src/lerobot/datasets/utils.py``, ``v30/convert_dataset_v21_to_v30.py``):

- v2.0/v2.1: ``meta/episodes.jsonl`` gives each episode's ``length``; its frames are a Parquet file of their own and
  each camera an MP4 of its own, at ``data_path`` / ``video_path`` formatted with ``episode_chunk`` (the episode
  index // ``chunks_size``) and ``episode_index``; a video frame's time is the row's ``timestamp``.
- v3.x: the rows of ``meta/episodes/chunk-XXX/file-YYY.parquet`` give each episode's ``length``, its data file
  (``data/chunk_index``, ``data/file_index``), its global rows ``dataset_from_index`` to ``dataset_to_index``,
  and per camera its video file (``videos/{key}/chunk_index``, ``file_index``) and ``from_timestamp``, the
  episode's start in that file. A data file holds several episodes back to back, so an episode starts in its
  file at its ``dataset_from_index`` less that of the file's first episode.

Everything here is read once, in the main process; ``_lerobot_rows`` reads the frames of one episode in a worker.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

INFO = "meta/info.json"
EPISODES_V2 = "meta/episodes.jsonl"
EPISODES_V3 = "meta/episodes"
_REQUIRED = ("codebase_version", "fps", "features", "data_path")
_SKIPPED_DTYPES = ("string",)  # no fixed shape: not a field (the task is in ``task_index``)


@dataclass(frozen=True)
class Feature:
    """One feature of ``info.json``: ``kind`` is ``array`` (a Parquet column), ``image`` (PNG bytes in a column)
    or ``video`` (an MP4 per episode or per file); ``shape`` is the array's, or ``(H, W)`` for images and videos."""

    name: str
    kind: str
    dtype: str
    shape: tuple[int, ...]


@dataclass(frozen=True)
class Episode:
    """One episode: its frames are rows ``first_row`` to ``first_row + length`` of ``data`` (relative to the root),
    and camera ``key``'s frames are in ``videos[key] = (file, from_timestamp)`` from that time on."""

    index: int
    length: int
    data: str
    first_row: int
    videos: tuple[tuple[str, str, float], ...]

    def video(self, key: str) -> tuple[str, float]:
        for k, path, start in self.videos:
            if k == key:
                return path, start
        raise KeyError(key)


@dataclass(frozen=True)
class Dataset:
    """What the source needs of a dataset's metadata."""

    version: str
    fps: float
    features: tuple[Feature, ...]
    skipped: tuple[str, ...]  # features with no fixed shape (strings), left out
    episodes: tuple[Episode, ...]


def read(root: Path, cameras: tuple[str, ...] | None) -> Dataset:
    """The dataset at ``root``, with the video features ``cameras`` names (all of them when None)."""
    info_path = root / INFO
    if not info_path.is_file():
        raise ValueError(f"{str(info_path)!r} does not exist: point at the root of a LeRobot dataset (v2.x or v3.x)")
    try:
        info = json.loads(info_path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{str(info_path)!r} is not valid JSON ({exc}); the dataset's metadata is damaged") from None
    if not isinstance(info, dict):
        raise ValueError(f"{str(info_path)!r} holds no JSON object; the dataset's metadata is damaged")
    missing = [k for k in _REQUIRED if k not in info]
    if missing:
        raise ValueError(
            f"{str(info_path)!r} has no {', '.join(map(repr, missing))}: not a LeRobot v2.x/v3.x info.json"
        )
    version = str(info["codebase_version"])
    major = version.lstrip("v").split(".")[0]
    if major not in ("2", "3"):
        raise ValueError(f"{str(info_path)!r}: codebase_version {version!r} is not read; LeRobot v2.x and v3.x are")
    fps = float(info["fps"])
    if not fps > 0:
        raise ValueError(f"{str(info_path)!r}: fps={info['fps']!r} must be a positive number of frames per second")
    features, skipped = _features(info["features"], info_path)
    videos = [f.name for f in features if f.kind == "video"]
    chosen = videos if cameras is None else list(cameras)
    unknown = [c for c in chosen if c not in videos]
    if unknown:
        raise ValueError(
            f"cameras={list(cameras or ())!r}: {', '.join(map(repr, unknown))} is no video feature of "
            f"{str(info_path)!r}; its video features are {', '.join(videos) or 'none'}"
        )
    features = tuple(f for f in features if f.kind != "video" or f.name in chosen)
    if chosen and not info.get("video_path"):  # LeRobot writes null where a dataset has no camera
        raise ValueError(
            f"{str(info_path)!r} has video features but no 'video_path': the dataset's metadata is damaged"
        )
    templates = (str(info["data_path"]), str(info.get("video_path") or ""))
    v2 = major == "2"
    episodes = _episodes_v2(root, info, templates, chosen) if v2 else _episodes_v3(root, templates, chosen)
    return Dataset(version, fps, features, skipped, episodes)


def _features(raw: Any, where: Path) -> tuple[tuple[Feature, ...], tuple[str, ...]]:
    if not isinstance(raw, dict) or not raw:
        raise ValueError(f"{str(where)!r}: 'features' must map each feature's name to its dtype and shape")
    out: list[Feature] = []
    skipped: list[str] = []
    for name, ft in raw.items():
        if not isinstance(ft, dict) or "dtype" not in ft or "shape" not in ft:
            raise ValueError(f"{str(where)!r}: feature {name!r} has no 'dtype' or no 'shape'")
        dtype, shape = str(ft["dtype"]), tuple(int(d) for d in ft["shape"])
        if dtype in _SKIPPED_DTYPES:
            skipped.append(name)
        elif dtype in ("video", "image"):
            out.append(Feature(name, dtype, "uint8", _image_hw(name, shape, ft.get("names"), where)))
        else:
            try:
                np.dtype(dtype)
            except TypeError:
                raise ValueError(f"{str(where)!r}: feature {name!r} has dtype {dtype!r}, not a numpy dtype") from None
            out.append(Feature(name, "array", np.dtype(dtype).name, shape))
    return tuple(out), tuple(skipped)


def _image_hw(name: str, shape: tuple[int, ...], names: Any, where: Path) -> tuple[int, int]:
    """(H, W) of an image or video feature: by its axis ``names`` where given, else HWC (LeRobot's writers) or CHW."""
    if len(shape) != 3:
        raise ValueError(f"{str(where)!r}: feature {name!r} has shape {list(shape)}, not (height, width, channels)")
    if isinstance(names, list) and "height" in names and "width" in names:
        return shape[names.index("height")], shape[names.index("width")]
    return (shape[1], shape[2]) if shape[0] in (1, 3, 4) and shape[2] not in (1, 3, 4) else (shape[0], shape[1])


def _episodes_v2(
    root: Path, info: dict[str, Any], templates: tuple[str, str], cameras: list[str]
) -> tuple[Episode, ...]:
    path = root / EPISODES_V2
    if not path.is_file():
        raise ValueError(f"{str(path)!r} does not exist: a LeRobot v2.x dataset lists its episodes there")
    chunks = int(info.get("chunks_size", 1000))  # LeRobot's DEFAULT_CHUNK_SIZE where an old info.json has none
    out: list[Episode] = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            index, length = int(row["episode_index"]), int(row["length"])
        except (json.JSONDecodeError, KeyError, TypeError, ValueError):
            raise ValueError(f"{str(path)!r} line {n} is no JSON object with 'episode_index' and 'length'") from None
        keys = {"episode_chunk": index // chunks, "episode_index": index}
        data = _format(templates[0], keys, "data_path")
        videos = tuple((k, _format(templates[1], {**keys, "video_key": k}, "video_path"), 0.0) for k in cameras)
        out.append(Episode(index, length, data, 0, videos))
    return _checked(out, path)


def _episodes_v3(root: Path, templates: tuple[str, str], cameras: list[str]) -> tuple[Episode, ...]:
    folder = root / EPISODES_V3
    files = sorted(folder.glob("chunk-*/file-*.parquet"))
    if not files:
        raise ValueError(f"no {EPISODES_V3}/chunk-XXX/file-YYY.parquet under {str(root)!r}: a v3.x dataset needs them")
    base = ["episode_index", "length", "data/chunk_index", "data/file_index", "dataset_from_index", "dataset_to_index"]
    per_camera = ["chunk_index", "file_index", "from_timestamp"]
    columns = base + [f"videos/{k}/{c}" for k in cameras for c in per_camera]
    rows: list[dict[str, Any]] = []
    for f in files:
        names = pq.read_schema(f).names
        missing = [c for c in columns if c not in names]
        if missing:
            raise ValueError(
                f"{str(f)!r} has no column {', '.join(map(repr, missing))}: not a LeRobot v3.x episodes file"
            )
        rows += pq.read_table(f, columns=columns).to_pylist()
    rows.sort(key=lambda r: int(r["episode_index"]))
    starts: dict[str, int] = {}  # each data file's first global row: where its first episode starts
    for r in rows:
        data = _format(templates[0], _indices(r, "data"), "data_path")
        r["_data"] = data
        starts[data] = min(starts.get(data, int(r["dataset_from_index"])), int(r["dataset_from_index"]))
    out: list[Episode] = []
    for r in rows:
        length, lo, hi = int(r["length"]), int(r["dataset_from_index"]), int(r["dataset_to_index"])
        if hi - lo != length:
            raise ValueError(
                f"{str(folder)!r}: episode {r['episode_index']} has length {length} but rows {lo} to {hi}; "
                "the episodes metadata is damaged"
            )
        videos = tuple(
            (
                k,
                _format(templates[1], {"video_key": k, **_indices(r, f"videos/{k}")}, "video_path"),
                float(r[f"videos/{k}/from_timestamp"]),
            )
            for k in cameras
        )
        out.append(Episode(int(r["episode_index"]), length, r["_data"], lo - starts[r["_data"]], videos))
    return _checked(out, folder)


def _indices(row: dict[str, Any], prefix: str) -> dict[str, int]:
    return {"chunk_index": int(row[f"{prefix}/chunk_index"]), "file_index": int(row[f"{prefix}/file_index"])}


def _format(template: str, keys: dict[str, Any], what: str) -> str:
    try:
        return template.format(**keys)
    except (KeyError, IndexError, ValueError) as exc:
        raise ValueError(f"{INFO}: {what}={template!r} names {exc}, which this layout does not give") from None


def _checked(episodes: list[Episode], where: Path) -> tuple[Episode, ...]:
    seen = [e.index for e in episodes]
    if len(set(seen)) != len(seen):
        raise ValueError(f"{str(where)!r} lists an episode twice; the dataset's metadata is damaged")
    bad = next((e for e in episodes if e.length < 0), None)
    if bad is not None:
        raise ValueError(f"{str(where)!r}: episode {bad.index} has a negative length {bad.length}")
    return tuple(episodes)
