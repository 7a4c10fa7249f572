"""Small LeRobot datasets, v2.1 and v3.0 of the same episodes, written from real clips (for the tests and the bench).

The layouts follow ``huggingface/lerobot`` (``src/lerobot/datasets/utils.py``'s path templates, ``dataset_writer.py``'s
episode columns): v2.1 has one Parquet file and one MP4 per camera for each episode; v3.0 puts several episodes in
one Parquet file (one row group each) and one MP4 per camera (back to back, each from its ``from_timestamp``).
``marked=True`` draws each frame's global ``index`` into its top rows as black and white blocks (``read_mark``
reads it back), so a test can tell which frame it was given.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import cv2
import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.parquet as pq

CAMERA = "observation.images.top"
BITS = 14  # a frame's index, in two rows of 7 blocks
_BLOCK = 8


@dataclass
class Episode:
    """One episode: its camera frames (RGB ``(n, H, W, 3)``), state and action (``(n, 6)`` float32), task index."""

    frames: npt.NDArray[np.uint8]
    state: npt.NDArray[np.float32]
    action: npt.NDArray[np.float32]
    task: int


def clip_frames(path: Path, n: int, hw: tuple[int, int], skip: int = 0) -> npt.NDArray[np.uint8]:
    """``n`` RGB frames of a real clip from frame ``skip`` on (looping if it is shorter), resized to ``hw``."""
    out: list[npt.NDArray[np.uint8]] = []
    while len(out) < n:
        with av.open(str(path)) as c:
            for i, frame in enumerate(c.decode(video=0)):
                if i >= skip:
                    rgb = frame.to_ndarray(format="rgb24")
                    out.append(np.asarray(cv2.resize(rgb, (hw[1], hw[0]), interpolation=cv2.INTER_AREA), np.uint8))
                if len(out) == n:
                    break
        skip = 0
    return np.stack(out)


def mark(frames: npt.NDArray[np.uint8], first: int) -> npt.NDArray[np.uint8]:
    """A copy of ``frames`` whose frame k carries ``first + k`` in blocks along its top rows."""
    out = frames.copy()
    for k in range(len(out)):
        value = first + k
        for bit in range(BITS):
            y, x = divmod(bit, BITS // 2)
            out[k, y * _BLOCK : (y + 1) * _BLOCK, x * _BLOCK : (x + 1) * _BLOCK] = 255 if value >> bit & 1 else 0
    return out


def read_mark(chw: npt.NDArray[np.uint8]) -> int:
    """The index ``mark`` drew into a decoded frame, uint8 ``(3, H, W)`` of the size it was written at."""
    value = 0
    for bit in range(BITS):
        y, x = divmod(bit, BITS // 2)
        cell = chw[:, y * _BLOCK + 2 : (y + 1) * _BLOCK - 2, x * _BLOCK + 2 : (x + 1) * _BLOCK - 2]
        value |= int(cell.mean() > 127) << bit
    return value


def make_episodes(clip: Path, lengths: Sequence[int], hw: tuple[int, int], marked: bool = True) -> list[Episode]:
    """Episodes of ``lengths`` frames taken one after another from ``clip``, with a state and action per frame."""
    frames = clip_frames(clip, sum(lengths), hw)
    if marked:
        frames = mark(frames, 0)
    rng = np.random.default_rng(0)
    out, at = [], 0
    for e, n in enumerate(lengths):
        state = rng.standard_normal((n, 6)).astype(np.float32)
        out.append(Episode(frames[at : at + n], state, np.roll(state, -1, axis=0), e % 2))
        at += n
    return out


def state_episodes(lengths: Sequence[int]) -> list[Episode]:
    """Episodes with a state and action but no camera frames (write them with ``with_video=False``)."""
    rng = np.random.default_rng(1)
    out = []
    for e, n in enumerate(lengths):
        state = rng.standard_normal((n, 6)).astype(np.float32)
        out.append(Episode(np.zeros((n, 1, 1, 3), np.uint8), state, np.roll(state, -1, axis=0), e % 2))
    return out


def encode(path: Path, frames: npt.NDArray[np.uint8], fps: int, codec: str = "libx264") -> None:
    """Frames to an MP4 at ``fps``, near lossless with libx264 (LeRobot writes AV1 with ``codec="libsvtav1"``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("SVT_LOG", "1")  # SVT-AV1 prints its configuration to stdout unless told errors only
    with av.open(str(path), "w") as c:
        s = c.add_stream(codec, rate=fps)
        assert isinstance(s, av.VideoStream)
        s.width, s.height, s.pix_fmt = frames.shape[2], frames.shape[1], "yuv420p"
        s.options = {"qp": "0", "g": "2", "bf": "0"} if codec == "libx264" else {"g": "2", "crf": "30"}
        s.codec_context.time_base = Fraction(1, fps)
        for k, rgb in enumerate(frames):
            f = av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb), format="rgb24")
            f.pts = k
            c.mux(s.encode(f))
        c.mux(s.encode(None))


def _features(hw: tuple[int, int], fps: int, video: bool) -> dict[str, Any]:
    scalar = {"shape": [1], "names": None}
    camera = {
        CAMERA: {
            "dtype": "video",
            "shape": [hw[0], hw[1], 3],
            "names": ["height", "width", "channels"],
            "info": {"video.fps": fps, "video.codec": "h264", "video.pix_fmt": "yuv420p"},
        }
    }
    return {
        **(camera if video else {}),
        "observation.state": {"dtype": "float32", "shape": [6], "names": [f"j{i}" for i in range(6)]},
        "action": {"dtype": "float32", "shape": [6], "names": [f"j{i}" for i in range(6)]},
        "timestamp": {"dtype": "float32", **scalar},
        "frame_index": {"dtype": "int64", **scalar},
        "episode_index": {"dtype": "int64", **scalar},
        "index": {"dtype": "int64", **scalar},
        "task_index": {"dtype": "int64", **scalar},
    }


def _table(e: int, ep: Episode, first: int, fps: int, fixed: bool) -> pa.Table:
    n = len(ep.state)
    vec = pa.list_(pa.float32(), 6) if fixed else pa.list_(pa.float32())
    return pa.table(
        {
            "observation.state": pa.array(ep.state.tolist(), type=vec),
            "action": pa.array(ep.action.tolist(), type=vec),
            "timestamp": pa.array((np.arange(n) / fps).astype(np.float32)),
            "frame_index": pa.array(np.arange(n, dtype=np.int64)),
            "episode_index": pa.array(np.full(n, e, np.int64)),
            "index": pa.array(np.arange(first, first + n, dtype=np.int64)),
            "task_index": pa.array(np.full(n, ep.task, np.int64)),
        }
    )


def _info(version: str, episodes: list[Episode], fps: int, data: str, video: str | None) -> dict[str, Any]:
    hw = (int(episodes[0].frames.shape[1]), int(episodes[0].frames.shape[2]))
    total = sum(len(ep.state) for ep in episodes)
    return {
        "codebase_version": version,
        "robot_type": "test",
        "total_episodes": len(episodes),
        "total_frames": total,
        "total_tasks": 2,
        "chunks_size": 1000,
        "fps": fps,
        "splits": {"train": f"0:{len(episodes)}"},
        "data_path": data,
        "video_path": video,
        "features": _features(hw, fps, video is not None),
    }


TASKS = ("pick the cube", "push the cube")


def write_v21(root: Path, episodes: list[Episode], fps: int, codec: str = "libx264", with_video: bool = True) -> Path:
    """The episodes as a LeRobot v2.1 dataset at ``root`` (without its camera where ``video`` is False)."""
    data = "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet"
    video = "videos/chunk-{episode_chunk:03d}/{video_key}/episode_{episode_index:06d}.mp4"
    meta = root / "meta"
    meta.mkdir(parents=True, exist_ok=True)
    info = _info("v2.1", episodes, fps, data, video if with_video else None)
    (meta / "info.json").write_text(json.dumps(info, indent=2))
    lines = [{"episode_index": e, "tasks": [TASKS[ep.task]], "length": len(ep.state)} for e, ep in enumerate(episodes)]
    (meta / "episodes.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    (meta / "tasks.jsonl").write_text(
        "".join(json.dumps({"task_index": i, "task": t}) + "\n" for i, t in enumerate(TASKS))
    )
    first = 0
    for e, ep in enumerate(episodes):
        path = root / data.format(episode_chunk=0, episode_index=e)
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(_table(e, ep, first, fps, fixed=False), path)
        if with_video:
            encode(root / video.format(episode_chunk=0, video_key=CAMERA, episode_index=e), ep.frames, fps, codec)
        first += len(ep.state)
    return root


def write_v30(
    root: Path, episodes: list[Episode], fps: int, per_file: int = 2, codec: str = "libx264", with_video: bool = True
) -> Path:
    """The episodes as a LeRobot v3.0 dataset at ``root``: ``per_file`` episodes per data file and per video file."""
    data = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
    video = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
    meta = root / "meta"
    (meta / "episodes/chunk-000").mkdir(parents=True, exist_ok=True)
    info = _info("v3.0", episodes, fps, data, video if with_video else None)
    (meta / "info.json").write_text(json.dumps(info, indent=2))
    pq.write_table(
        pa.table({"task_index": pa.array([0, 1], pa.int64()), "task": pa.array(TASKS)}), meta / "tasks.parquet"
    )
    rows: list[dict[str, Any]] = []
    first = 0
    for f0 in range(0, len(episodes), per_file):
        file = f0 // per_file
        path = root / data.format(chunk_index=0, file_index=file)
        path.parent.mkdir(parents=True, exist_ok=True)
        group = range(f0, min(len(episodes), f0 + per_file))
        with pq.ParquetWriter(path, _table(0, episodes[0], 0, fps, fixed=True).schema) as w:
            t = 0.0
            for e in group:
                ep, n = episodes[e], len(episodes[e].state)
                w.write_table(_table(e, ep, first, fps, fixed=True), row_group_size=n)  # one row group per episode
                cam = {
                    f"videos/{CAMERA}/chunk_index": 0,
                    f"videos/{CAMERA}/file_index": file,
                    f"videos/{CAMERA}/from_timestamp": t,
                    f"videos/{CAMERA}/to_timestamp": t + n / fps,
                }
                rows.append(
                    {
                        "episode_index": e,
                        "tasks": [TASKS[ep.task]],
                        "length": n,
                        "data/chunk_index": 0,
                        "data/file_index": file,
                        "dataset_from_index": first,
                        "dataset_to_index": first + n,
                        **(cam if with_video else {}),
                        "meta/episodes/chunk_index": 0,
                        "meta/episodes/file_index": 0,
                    }
                )
                first, t = first + n, t + n / fps
        if not with_video:
            continue
        frames = np.concatenate([episodes[e].frames for e in group])
        encode(root / video.format(video_key=CAMERA, chunk_index=0, file_index=file), frames, fps, codec)
    pq.write_table(pa.Table.from_pylist(rows), meta / "episodes/chunk-000/file-000.parquet")
    return root
