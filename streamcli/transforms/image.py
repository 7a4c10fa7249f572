"""The built-in image transforms: ``RandomCrop``, ``HorizontalFlip``, ``ColorJitter`` and ``Resize``.

They work on the image fields (``Field.display == "image"``, or the one named by ``field=``), HW, HWC or CHW, on
the whole block at once; every image field of a step gets the same draw. Other fields pass unchanged.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from streamcli.errors import LoaderUsageError
from streamcli.source import Field
from streamcli.transforms.contract import Block, Context

# Image fields: which ones a built-in touches, and where their height, width and channels are.


@dataclass(frozen=True)
class Layout:
    """Axes of an image field in a block ``(n, *shape)``: height, width, and whether channels come first."""

    h: int
    w: int
    chw: bool


def _layout(f: Field) -> Layout:
    """HW, HWC or CHW: a 3-D field is CHW when its first dimension alone looks like channels (1, 3 or 4)."""
    if len(f.shape) == 2:
        return Layout(1, 2, False)
    if len(f.shape) != 3:
        raise ValueError(f"field {f.describe()} is not an image (HW, HWC or CHW)")
    chw = f.shape[0] in (1, 3, 4) and f.shape[2] not in (1, 3, 4)
    return Layout(2, 3, True) if chw else Layout(1, 2, False)


def _image_fields(fields: Sequence[Field], field: str | None, who: str) -> list[Field]:
    if field is not None:
        found = [f for f in fields if f.name == field]
        if not found:
            raise ValueError(
                f"{who}: field={field!r} is not a field of the source; its fields are "
                f"{', '.join(f.name for f in fields)}"
            )
        return found
    found = [f for f in fields if f.display_kind == "image"]
    if not found:
        raise ValueError(
            f"{who}: the source declares no image field (display='image'); name one with field=, "
            f"one of {', '.join(f.name for f in fields)}"
        )
    return found


def _size(size: int | Sequence[int], who: str) -> tuple[int, int]:
    hw = (size, size) if isinstance(size, int | np.integer) else tuple(int(s) for s in size)
    if len(hw) != 2 or min(hw) < 1:
        raise ValueError(f"{who}: size={size!r} must be a positive int or (height, width), e.g. 112 or (112, 160)")
    return int(hw[0]), int(hw[1])


class ImageTransform:
    """A transform of the image fields. Subclasses set ``name``, draw their parameters once per call with
    ``_draw`` (so every image field of a step gets the same crop, flip or colour) and apply them with
    ``_apply``; one that changes a shape defines ``_shape``."""

    name = ""
    field: str | None = None

    def fields(self, fields: Sequence[Field], layouts: Mapping[str, Layout] | None = None) -> tuple[Field, ...]:
        """The output fields. Also remembers the image fields and their layouts (``Compose`` passes on those it
        knows: a crop to a width of 3 would make a CHW frame look like HWC); the loader calls it before the
        transform is pickled to the workers."""
        known = layouts or {}
        self._layouts = {f.name: known.get(f.name) or _layout(f) for f in _image_fields(fields, self.field, self.name)}
        return tuple(dataclasses.replace(f, shape=self._shape(f)) if f.name in self._layouts else f for f in fields)

    @property
    def layouts(self) -> dict[str, Layout]:
        """The image fields and their layouts that ``fields`` found (none before it is called)."""
        return dict(getattr(self, "_layouts", {}))

    def _shape(self, f: Field) -> tuple[int, ...]:
        return f.shape

    def __call__(self, block: Block, ctx: Context) -> Block:
        layouts: dict[str, Layout] | None = getattr(self, "_layouts", None)
        if layouts is None:
            raise LoaderUsageError(f"{self!r}: call fields(source_fields) before the transform (StreamLoader does)")
        params = self._draw(ctx.rng())
        out = dict(block)
        for name, lay in layouts.items():
            out[name] = self._apply(np.asarray(block[name]), lay, params)
        return out

    def _draw(self, rng: np.random.Generator) -> Any:
        return None

    def _apply(self, a: np.ndarray, lay: Layout, params: Any) -> np.ndarray:
        raise NotImplementedError

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("_") and v is not None)
        return f"{type(self).__name__}({args})"


class RandomCrop(ImageTransform):
    """Crop a window of ``size`` (an int or (height, width)) at an offset drawn once per stream and epoch (the
    same place, as a fraction of the room left, in every image field)."""

    name = "crop"

    def __init__(self, size: int | Sequence[int], *, field: str | None = None) -> None:
        self.size = _size(size, "RandomCrop")
        self.field = field

    def _shape(self, f: Field) -> tuple[int, ...]:
        lay = _layout(f)
        h, w = f.shape[lay.h - 1], f.shape[lay.w - 1]
        if self.size[0] > h or self.size[1] > w:
            raise ValueError(
                f"crop={self.size[0]}x{self.size[1]} is larger than field {f.describe()}; crop to at most {h}x{w}"
            )
        shape = list(f.shape)
        shape[lay.h - 1], shape[lay.w - 1] = self.size
        return tuple(shape)

    def _draw(self, rng: np.random.Generator) -> Any:
        return rng.random(2)

    def _apply(self, a: np.ndarray, lay: Layout, params: Any) -> np.ndarray:
        (h, w), (H, W) = self.size, (a.shape[lay.h], a.shape[lay.w])
        y, x = int(params[0] * (H - h + 1)), int(params[1] * (W - w + 1))
        index: list[slice] = [slice(None)] * a.ndim
        index[lay.h], index[lay.w] = slice(y, y + h), slice(x, x + w)
        return a[tuple(index)]


class HorizontalFlip(ImageTransform):
    """Mirror left to right, for a whole stream with probability ``p`` (drawn once per stream and epoch)."""

    name = "flip"

    def __init__(self, p: float = 0.5, *, field: str | None = None) -> None:
        if not 0.0 <= float(p) <= 1.0:
            raise ValueError(f"HorizontalFlip: p={p} must be a probability in [0, 1], e.g. 0.5")
        self.p = float(p)
        self.field = field

    def _draw(self, rng: np.random.Generator) -> Any:
        return rng.random() < self.p

    def _apply(self, a: np.ndarray, lay: Layout, params: Any) -> np.ndarray:
        return np.flip(a, axis=lay.w) if params else a


class ColorJitter(ImageTransform):
    """Scale brightness by ``1 + U(-brightness, brightness)`` and contrast by ``1 + U(-contrast, contrast)``
    around each frame's mean, both drawn once per stream and epoch. Integer frames keep their dtype (rounded and
    clipped to its range); float frames are taken to be in [0, 1] and clipped to it."""

    name = "color"

    def __init__(self, brightness: float = 0.0, contrast: float = 0.0, *, field: str | None = None) -> None:
        for what, v in (("brightness", brightness), ("contrast", contrast)):
            if not 0.0 <= float(v) < 1.0:
                raise ValueError(f"ColorJitter: {what}={v} must be in [0, 1), e.g. 0.2")
        self.brightness, self.contrast = float(brightness), float(contrast)
        self.field = field

    def _draw(self, rng: np.random.Generator) -> Any:
        b = 1.0 + rng.uniform(-self.brightness, self.brightness)
        c = 1.0 + rng.uniform(-self.contrast, self.contrast)
        return np.float32(b), np.float32(c)

    def _apply(self, a: np.ndarray, lay: Layout, params: Any) -> np.ndarray:
        b, c = params
        x = a.astype(np.float32)
        if c != 1.0:
            mean = x.mean(axis=tuple(range(1, x.ndim)), keepdims=True)
            x = (x - mean) * c + mean
        x *= b
        if a.dtype.kind in "ui":
            info = np.iinfo(a.dtype)
            return np.clip(np.rint(x), info.min, info.max).astype(a.dtype)
        return np.clip(x, 0.0, 1.0).astype(a.dtype)


# Planes per cv2.resize call: OpenCV 5 takes at most 128 channels (4 with area interpolation).
_CV_CHANNELS = {"area": 4, "linear": 128}


class Resize(ImageTransform):
    """Resize every frame to ``size`` (an int or (height, width)) with OpenCV, one call per frame (per 4
    channels when shrinking); area interpolation when shrinking, bilinear when growing."""

    name = "resize"

    def __init__(self, size: int | Sequence[int], *, field: str | None = None) -> None:
        self.size = _size(size, "Resize")
        self.field = field

    def _shape(self, f: Field) -> tuple[int, ...]:
        lay = _layout(f)
        shape = list(f.shape)
        shape[lay.h - 1], shape[lay.w - 1] = self.size
        return tuple(shape)

    def _apply(self, a: np.ndarray, lay: Layout, params: Any) -> np.ndarray:
        import cv2

        h, w = self.size
        if a.shape[lay.h] == h and a.shape[lay.w] == w:
            return a
        # One frame's planes per call, in groups of the same size for every frame: OpenCV's result depends on the
        # number of channels of a call, so grouping planes across frames would tie a frame to its block.
        frames = np.moveaxis(a, (lay.h, lay.w), (1, 2))
        rest = frames.shape[3:]
        planes = frames.reshape(*frames.shape[:3], -1)
        if planes.dtype not in (np.uint8, np.uint16, np.float32):
            planes = planes.astype(np.float32)
        shrink = h * w < a.shape[lay.h] * a.shape[lay.w]
        interp, step = (cv2.INTER_AREA, _CV_CHANNELS["area"]) if shrink else (cv2.INTER_LINEAR, _CV_CHANNELS["linear"])
        out = np.empty((len(a), h, w, planes.shape[3]), planes.dtype)
        for i, frame in enumerate(planes):
            for c in range(0, frame.shape[2], step):
                r = cv2.resize(np.ascontiguousarray(frame[:, :, c : c + step]), (w, h), interpolation=interp)
                out[i, :, :, c : c + step] = r.reshape(h, w, -1)
        back = out.reshape(len(a), h, w, *rest).astype(a.dtype, copy=False)
        return np.moveaxis(back, (1, 2), (lay.h, lay.w))
