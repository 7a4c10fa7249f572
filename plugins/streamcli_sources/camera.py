"""``camera``: a virtual camera moving in front of a textured plane. Needs no files; the default source.

Each stream is one camera trajectory, seeded by its index: a smooth random path of homographies (drift,
sway, rotation, zoom and a little perspective tilt), so it comes with exact ground-truth motion.

Every number is computed the same way on every CPU (``_portable_math``, and ``_warp``'s integer warp in place
of ``cv2.warpPerspective``), so a stream's bytes are the same on an Intel and an AMD host, not only on every
worker count of one host.
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
from streamcli_sources import _portable_math as pm
from streamcli_sources._warp import Plane, fixed, to_gray, warp

_WAVES = 3  # sinusoids per degree of freedom: smooth, never periodic in practice


class CameraSource(BaseSource):
    """``count`` camera trajectories of ``steps`` frames over a plane (the built-in texture or ``image``).

    Fields per step: ``frame`` uint8[3, H, W] in RGB order (uint8[1, H, W] with ``gray=True``) and
    ``homography`` float64[3, 3], which maps pixel coordinates (x, y, 1) of the previous frame to this one
    (the identity on a stream's first step): the ground truth for motion estimation. Frames are rendered by a
    bilinear warp in integer arithmetic (``_warp``), the same bytes on every CPU; the built-in texture tiles, so
    the plane wraps around, and a user's image is mirrored at its borders. Stream ``i`` is the same for every
    run, worker count, resume point and host.

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
        self._chw: npt.NDArray[np.uint8] | None = None
        self._packed: Plane | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_plane": None, "_chw": None, "_packed": None}  # workers load the texture themselves

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
        if self._packed is None:
            self._packed = Plane(self._rgb_plane())
        plane = self._packed
        path = _Trajectory(self.seed, item, self.speed)
        prev = self._pose(path, start - 1) if start > 0 else None
        for t in range(start, self.steps):
            pose = self._pose(path, t)
            rel = pm.mul(pm.inverse(pose), prev) if prev is not None else (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0)
            prev = pose
            image = warp(plane, self._shown(pose), self.size, "reflect" if self.image else "wrap")
            homography = np.array([v / rel[8] for v in rel], np.float64).reshape(3, 3)
            yield {"frame": image, "homography": homography}

    def frame_to_plane(self, item: int, t: int) -> tuple[int, ...]:
        """Step ``t``'s map from frame pixels to plane pixels, as the warp takes it (``_warp.fixed``): each frame is
        ``_warp.warp`` of the plane (RGB, or grey by ``_warp.to_gray``) through it."""
        return self._shown(self._pose(_Trajectory(self.seed, item, self.speed), t))

    def _shown(self, pose: pm.Mat3) -> tuple[int, ...]:
        if not self.image:
            # Wrapping the translation into the plane changes nothing on screen and keeps the numbers small.
            rows, cols = self._rgb_plane().shape[1:]
            kx, ky = math.floor(pose[2] / cols) * cols, math.floor(pose[5] / rows) * rows
            g, h, i = pose[6:]
            pose = (pose[0] - kx * g, pose[1] - kx * h, pose[2] - kx * i,
                    pose[3] - ky * g, pose[4] - ky * h, pose[5] - ky * i, g, h, i)  # fmt: skip
        return fixed(pose)

    def _rgb_plane(self) -> npt.NDArray[np.uint8]:
        """The plane as the frames hold it, (3, H, W) RGB or (1, H, W) grey, contiguous for the warp's gathers."""
        if self._chw is None:
            rgb = np.ascontiguousarray(self.plane()[..., ::-1].transpose(2, 0, 1))
            self._chw = to_gray(rgb) if self.gray else rgb
        return self._chw

    def _pose(self, path: _Trajectory, t: int) -> pm.Mat3:
        """The homography from frame pixels to plane pixels at step ``t``."""
        h, w = self.size
        shape = self._rgb_plane().shape[1:]
        base = self.view * shape[1] / w  # plane pixels per frame pixel at zoom 1
        tx, ty, angle, zoom, px, py = path(t)
        cx, cy = (w - 1) / 2, (h - 1) / 2
        centre = (1.0, 0.0, -cx, 0.0, 1.0, -cy, 0.0, 0.0, 1.0)
        tilt = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, px / w, py / h, 1.0)
        s = base * pm.exp(zoom)
        c, si = pm.cos(angle) * s, pm.sin(angle) * s
        rot = (c, -si, 0.0, si, c, 0.0, 0.0, 0.0, 1.0)
        move = (1.0, 0.0, shape[1] / 2 + tx * base, 0.0, 1.0, shape[0] / 2 + ty * base, 0.0, 0.0, 1.0)
        return pm.mul(pm.mul(pm.mul(move, rot), tilt), centre)


class _Trajectory:
    """Six smooth functions of time, drawn from a generator seeded by (seed, item) alone.

    Translation (in frame pixels) is a steady drift plus sway; rotation (radians), log-zoom and tilt sway
    around zero. Evaluating at any ``t`` needs nothing from earlier steps, which makes resume exact.
    """

    def __init__(self, seed: int, item: int, speed: float) -> None:
        rng = np.random.default_rng([seed, item])  # PCG64 and uniform(): integer bits, the same everywhere
        self.drift: list[float] = (rng.uniform(-1.5, 1.5, 2) * speed).tolist()
        self.freq: list[list[float]] = (rng.uniform(0.004, 0.03, (6, _WAVES)) * speed).tolist()
        self.phase: list[list[float]] = rng.uniform(0, 2 * math.pi, (6, _WAVES)).tolist()
        amp = np.array([20.0, 20.0, 0.35, 0.3, 0.25, 0.25])  # px, px, rad, log-zoom, tilt, tilt
        self.amp: list[list[float]] = (amp[:, None] * rng.uniform(0.3, 1.0, (6, _WAVES)) / _WAVES).tolist()

    def __call__(self, t: int) -> list[float]:
        out = []
        for k in range(6):  # Python floats and _portable_math: the same sums on every CPU
            v = 0.0
            for j in range(_WAVES):
                v += self.amp[k][j] * pm.sin(2 * math.pi * self.freq[k][j] * t + self.phase[k][j])
            out.append(v + self.drift[k] * t if k < 2 else v)
        return out
