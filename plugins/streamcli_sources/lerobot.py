"""``lerobot``: a LeRobot dataset (v2.x or v3.x) as it is stored, one episode per stream and one frame per step.

``_lerobot_meta`` reads the two layouts' metadata into one table of episodes, ``_lerobot_rows`` reads an episode's
rows from its Parquet file (by row group, in the worker that opens it), and ``_lerobot_video`` decodes each camera
along the episode with the video source's backends, each frame at its row's time.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from itertools import islice
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from streamcli.source import BaseSource, Field, Step
from streamcli.storage import urls
from streamcli_sources import _lerobot_meta, _lerobot_rows, _video_backends
from streamcli_sources._convert import INTERPOLATION
from streamcli_sources._lerobot_video import frames_at

_BLOCK = 16  # steps per block when frames are decoded: a bounded buffer, and a Python round trip per 16 steps


class LeRobotSource(BaseSource):
    """A LeRobot dataset folder (``meta/info.json``; ``codebase_version`` v2.0, v2.1 or v3.x), one stream per episode.

    Fields, one per feature of ``info.json``, under LeRobot's own names (``batch["observation.state"]``): a Parquet
    feature has its ``shape`` and ``dtype`` (so ``timestamp``, ``frame_index``, ``episode_index``, ``index`` and
    ``task_index`` are ``(1,)``, as ``info.json`` declares them); a ``video`` feature (a camera) and an ``image``
    feature are uint8 RGB ``(3, H, W)``, the frame at the row's ``timestamp`` (plus the episode's
    ``from_timestamp`` in a v3.x file) within ``1 / fps / 2``. String features have no fixed shape and are left
    out (``skipped_features``). A camera whose video has no frame for a row ends the stream there, with a warning
    naming the episode. Episode lengths come from the metadata, so ``len(loader)`` works.

    Args:
        root: the dataset's folder (the one holding ``meta/``, ``data/`` and ``videos/``); local only for now.
        size: resize every camera and image to ``(H, W)``, e.g. ``96x96``. Default: each camera's own size.
        cameras: the video features to decode, e.g. ``observation.images.top`` (comma-separated on the command
            line); ``""`` decodes none. Default: every video feature.
        backend: the decoder: ``pyav`` (the default; seeks to each episode of a v3.x file) or ``opencv``, which
            decodes each file from its start.
        threads: FFmpeg decoder threads per camera (1 gives the same frames on every run; 0: FFmpeg's choice).
        interpolation: resizing: ``linear``, ``area`` or ``nearest``.
        max_failed_reads: end a camera's frames after this many undecodable packets in a row.
        index: ``auto`` or ``none``: the dataset's own metadata lists its episodes and their lengths, so no
            ``streamcli index`` file is needed or read.
    """

    block_steps = True

    def __init__(
        self,
        root: str | os.PathLike[str] | None = None,
        *,
        size: tuple[int, int] | int | None = None,
        cameras: str | Sequence[str] | None = None,
        backend: str = "pyav",
        threads: int = 1,
        interpolation: str = "linear",
        max_failed_reads: int = 5,
        index: str = "auto",
    ) -> None:
        if root is None:
            raise ValueError("the lerobot source needs a dataset folder, e.g. lerobot ~/datasets/pusht")
        if urls.is_remote(root):
            raise ValueError(
                f"{str(root)!r}: the lerobot source reads local folders only for now; download the dataset first "
                "(huggingface-cli download --repo-type dataset REPO --local-dir DIR) and give DIR"
            )
        if index not in ("auto", "none"):
            raise ValueError(f"index={index!r}: a LeRobot dataset's metadata is its index; give auto or none")
        _video_backends.check(backend)
        if interpolation not in INTERPOLATION:
            raise ValueError(f"interpolation={interpolation!r} must be one of {', '.join(INTERPOLATION)}")
        if int(threads) < 0 or int(max_failed_reads) < 1:
            raise ValueError(f"threads={threads} must be >= 0 and max_failed_reads={max_failed_reads} >= 1")
        self.root = Path(urls.local_path(root))
        if not self.root.is_dir():
            raise ValueError(f"{str(self.root)!r} is not a folder; give the root of a LeRobot dataset")
        self.size = None if size is None else _hw(size)
        self.backend = backend
        self.threads = int(threads)
        self.interpolation = interpolation
        self.max_failed_reads = int(max_failed_reads)
        self.dataset = _lerobot_meta.read(self.root, _camera_list(cameras))
        self.features = self.dataset.features
        self.skipped_features = self.dataset.skipped
        self.cameras = tuple(f.name for f in self.features if f.kind == "video")
        if self.cameras and not any(f.name == "timestamp" for f in self.features):
            raise ValueError(f"{str(self.root / _lerobot_meta.INFO)!r} has cameras but no 'timestamp' feature")
        self._decoded = frozenset(f.name for f in self.features if f.kind != "array")
        self.costly_steps = bool(self._decoded)  # decoding: rows go to free workers

    # -- the contract ----------------------------------------------------------------------------------

    def items(self) -> list[int]:
        return list(range(len(self.dataset.episodes)))

    def fields(self) -> Sequence[Field]:
        out = []
        for f in self.features:
            if f.kind == "array":
                vector = len(f.shape) == 1 and f.shape[0] > 1 and np.dtype(f.dtype).kind == "f"
                out.append(Field(f.name, f.shape, f.dtype, display="series" if vector else "other"))
            else:
                out.append(Field(f.name, (3, *self._hw(f)), "uint8", display="image"))
        return tuple(out)

    def length(self, item: int) -> int:
        return self.dataset.episodes[item].length

    def item_name(self, item: int) -> str:
        return f"episode_{self.dataset.episodes[item].index:06d}"

    def setup_worker(self) -> None:
        cv2.setNumThreads(1)  # W workers x OpenCV's threads would oversubscribe the cores

    @classmethod
    def can_open(cls, arg: str) -> bool:
        return not urls.is_remote(arg) and (Path(arg) / _lerobot_meta.INFO).is_file()

    def open(self, item: int, start: int = 0) -> Iterator[Step]:
        episode = self.dataset.episodes[item]
        if start >= episode.length:
            return
        rows = _lerobot_rows.read(self.root, episode, self.features, start)
        n = episode.length - start
        if not self.costly_steps:
            yield rows  # arrays only: the rest of the episode in one block
            return
        cameras = {key: self._camera(episode, key, rows, start) for key in self.cameras}
        images = [f for f in self.features if f.kind == "image"]
        try:
            for lo in range(0, n, _BLOCK):
                hi = want = min(n, lo + _BLOCK)
                decoded = {key: list(islice(frames, want - lo)) for key, frames in cameras.items()}
                hi = min([hi, *(lo + len(got) for got in decoded.values())])
                if hi == lo:
                    return  # a camera has no frame for step ``lo`` (warned): the stream ends there
                block: dict[str, Any] = {k: v[lo:hi] for k, v in rows.items() if k not in self._decoded}
                for f in images:
                    block[f.name] = np.stack([_lerobot_rows.image(b, self._hw(f), f.name) for b in rows[f.name][lo:hi]])
                for key, got in decoded.items():
                    block[key] = np.stack(got[: hi - lo])
                yield block
                if hi < want:
                    return
        finally:
            for frames in cameras.values():
                frames.close()

    # -- decoding --------------------------------------------------------------------------------------

    def _hw(self, f: _lerobot_meta.Feature) -> tuple[int, int]:
        return self.size or (f.shape[0], f.shape[1])

    def _camera(self, episode: _lerobot_meta.Episode, key: str, rows: _lerobot_rows.Rows, start: int) -> Any:
        path, from_s = episode.video(key)
        if not (self.root / path).is_file():
            raise ValueError(
                f"{str(self.root / path)!r} does not exist: episode {episode.index}'s {key} should be there"
            )
        times = from_s + np.asarray(rows["timestamp"], np.float64).reshape(len(rows["timestamp"]), -1)[:, 0]
        return frames_at(
            str(self.root / path),
            times,
            fps=self.dataset.fps,
            size=self._hw(next(f for f in self.features if f.name == key)),
            backend=self.backend,
            threads=self.threads,
            max_failed=self.max_failed_reads,
            interpolation=self.interpolation,
            where=f"episode {episode.index}, camera {key}",
            first=start,
        )


def _hw(size: tuple[int, int] | int) -> tuple[int, int]:
    hw = (size, size) if isinstance(size, int) else tuple(size)
    if len(hw) != 2 or any(int(d) < 1 for d in hw):
        raise ValueError(f"size={size!r} must be two positive ints (H, W), e.g. size=(96, 96)")
    return int(hw[0]), int(hw[1])


def _camera_list(cameras: str | Sequence[str] | None) -> tuple[str, ...] | None:
    if cameras is None:
        return None
    names = cameras.split(",") if isinstance(cameras, str) else list(cameras)
    return tuple(c.strip() for c in names if c.strip())
