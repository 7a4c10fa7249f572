"""``camera``: a virtual camera moving in front of a textured plane. Needs no files; the default source.

Each stream is one camera trajectory, seeded by its index: a smooth random path of homographies (drift,
sway, rotation, zoom and a little perspective tilt), so it comes with exact ground-truth motion.
"""

from __future__ import annotations

import importlib.resources
import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import numpy.typing as npt

from streamcli.source import BaseSource, Field, Step

_WAVES = 3  # sinusoids per degree of freedom: smooth, never periodic in practice
Matrix = npt.NDArray[np.float64]


class CameraSource(BaseSource):
    """``count`` camera trajectories of ``steps`` frames over a plane (the built-in texture or ``image``).

    Fields per step: ``frame`` uint8[3, H, W] in RGB order (uint8[1, H, W] with ``gray=True``) and
    ``homography`` float64[3, 3], which maps pixel coordinates (x, y, 1) of the previous frame to this one
    (the identity on a stream's first step): the ground truth for motion estimation. Frames are rendered
    with ``cv2.warpPerspective``; the built-in texture tiles, so the plane wraps around, and a user's image
    is mirrored at its borders. Stream ``i`` is the same for every run, worker count and resume point.

    Args:
        count: how many streams (trajectories).
        steps: frames per stream.
        size: frame size ``(H, W)``, e.g. ``96x128`` on the command line.
        gray: one grey channel instead of RGB.
        image: a PNG/JPEG to use as the plane instead of the built-in texture.
        seed: another family of trajectories (the same seed gives the same streams).
        view: the fraction of the plane's width the camera sees at zoom 1, in (0, 1].
        speed: a multiplier on all motion (0: a still camera).
    """

    def __init__(
        self,
        count: int = 16,
        *,
        steps: int = 256,
        size: tuple[int, int] | int = (128, 128),
        gray: bool = False,
        image: str = "",
        seed: int = 0,
        view: float = 0.4,
        speed: float = 1.0,
    ) -> None:
        hw = (size, size) if isinstance(size, int) else tuple(size)
        if len(hw) != 2 or any(int(d) < 1 for d in hw):
            raise ValueError(f"size={size!r} must be two positive ints (H, W), e.g. size=(128, 128)")
        if int(count) < 1:
            raise ValueError(f"count={count} must be at least 1 stream")
        if int(steps) < 1:
            raise ValueError(f"steps={steps} must be at least 1 frame per stream")
        if not 0.0 < float(view) <= 1.0:
            raise ValueError(f"view={view} must be in (0, 1], the fraction of the plane in view, e.g. 0.4")
        if float(speed) < 0.0:
            raise ValueError(f"speed={speed} must be >= 0 (0 is a still camera)")
        if image and not Path(image).is_file():
            raise ValueError(f"image={image!r} is not a file; give a PNG/JPEG path or leave it empty")
        self.count, self.steps = int(count), int(steps)
        self.size = (int(hw[0]), int(hw[1]))
        self.gray, self.image, self.seed = bool(gray), str(image), int(seed)
        self.view, self.speed = float(view), float(speed)
        self._plane: npt.NDArray[np.uint8] | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_plane": None}  # workers load the texture themselves

    def items(self) -> list[int]:
        return list(range(self.count))

    def fields(self) -> Sequence[Field]:
        h, w = self.size
        return (
            Field("frame", (1 if self.gray else 3, h, w), "uint8", display="image"),
            Field("homography", (3, 3), "float64", display="other"),
        )

    def length(self, item: int) -> int:
        return self.steps

    def item_name(self, item: int) -> str:
        return f"camera-{item}"

    def setup_worker(self) -> None:
        cv2.setNumThreads(1)  # a 128x128 warp gains nothing from threads; W workers would oversubscribe

    def plane(self) -> npt.NDArray[np.uint8]:
        """The plane the camera looks at, BGR (loaded once per process)."""
        if self._plane is not None:
            return self._plane
        if self.image:
            data = Path(self.image).read_bytes()
        else:
            data = importlib.resources.files("streamcli_sources").joinpath("texture.png").read_bytes()
        img: Any = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
        if img is None:
            raise ValueError(f"image={self.image!r}: OpenCV cannot decode it; give a PNG or JPEG file")
        self._plane = plane = np.asarray(img, np.uint8)
        return plane

    def open(self, item: int, start: int = 0) -> Iterator[Step]:
        plane = self.plane()
        h, w = self.size
        path = _Trajectory(self.seed, item, self.speed)
        base = self.view * plane.shape[1] / w  # plane pixels per frame pixel at zoom 1
        border = cv2.BORDER_REFLECT_101 if self.image else cv2.BORDER_WRAP
        prev = self._pose(path, start - 1, base, plane.shape) if start > 0 else None
        for t in range(start, self.steps):
            pose = self._pose(path, t, base, plane.shape)
            rel = np.eye(3) if prev is None else np.linalg.solve(pose, prev)
            prev = pose
            # Wrapping the translation into the plane changes nothing on screen and keeps the numbers small.
            shown = pose.copy()
            if not self.image:
                shown[:2] -= np.outer(np.floor(shown[:2, 2] / plane.shape[1::-1]) * plane.shape[1::-1], shown[2])
            bgr: Any = cv2.warpPerspective(
                plane, shown, (w, h), flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP, borderMode=border
            )
            yield {"frame": self._convert(bgr), "homography": rel / rel[2, 2]}

    def _pose(self, path: _Trajectory, t: int, base: float, shape: tuple[int, ...]) -> Matrix:
        """The homography from frame pixels to plane pixels at step ``t``."""
        h, w = self.size
        tx, ty, angle, zoom, px, py = path(t)
        cx, cy = (w - 1) / 2, (h - 1) / 2
        centre = np.array([[1, 0, -cx], [0, 1, -cy], [0, 0, 1]], np.float64)
        tilt = np.array([[1, 0, 0], [0, 1, 0], [px / w, py / h, 1]], np.float64)
        s = base * math.exp(zoom)
        c, si = math.cos(angle) * s, math.sin(angle) * s
        rot = np.array([[c, -si, 0], [si, c, 0], [0, 0, 1]], np.float64)
        move = np.array([[1, 0, shape[1] / 2 + tx * base], [0, 1, shape[0] / 2 + ty * base], [0, 0, 1]])
        pose: Matrix = move @ rot @ tilt @ centre
        return pose

    def _convert(self, bgr: Any) -> npt.NDArray[np.uint8]:
        if self.gray:
            out: npt.NDArray[np.uint8] = cv2.cvtColor(bgr, cv2.COLOR_BGR2GRAY)[None]
            return out
        return np.ascontiguousarray(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB).transpose(2, 0, 1))


class _Trajectory:
    """Six smooth functions of time, drawn from a generator seeded by (seed, item) alone.

    Translation (in frame pixels) is a steady drift plus sway; rotation (radians), log-zoom and tilt sway
    around zero. Evaluating at any ``t`` needs nothing from earlier steps, which makes resume exact.
    """

    def __init__(self, seed: int, item: int, speed: float) -> None:
        rng = np.random.default_rng([seed, item])
        self.drift = rng.uniform(-1.5, 1.5, 2) * speed
        self.freq = rng.uniform(0.004, 0.03, (6, _WAVES)) * speed
        self.phase = rng.uniform(0, 2 * math.pi, (6, _WAVES))
        amp = np.array([20.0, 20.0, 0.35, 0.3, 0.25, 0.25])  # px, px, rad, log-zoom, tilt, tilt
        self.amp = amp[:, None] * rng.uniform(0.3, 1.0, (6, _WAVES)) / _WAVES

    def __call__(self, t: int) -> list[float]:
        sway = (self.amp * np.sin(2 * math.pi * self.freq * t + self.phase)).sum(axis=1)
        sway[:2] += self.drift * t
        return [float(v) for v in sway]
