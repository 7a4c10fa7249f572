"""How one field's step is shown: its kind (from the field's display hint, else inferred) and its text forms.

Kinds are the ``Field.display`` vocabulary: ``image``, ``text``, ``audio``, ``series``, ``other``; plus ``hidden`` for a
text field's byte-count companion (``display="text:nbytes"``), which is shown through its text field.

Event-camera windows get a preview-only hint, ``events:<representation>`` (set by ``cmd_preview`` for the
``events`` source): ``event_rgb`` draws them as images, and ``frame_from_batch`` shows that image in their place.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from streamcli.cli.preview.ansi import spark

HIDDEN = "hidden"


def as_rgb(arr: np.ndarray) -> np.ndarray | None:
    """An image step as uint8 (H, W, 3), from HWC or CHW with 1, 3 or 4 channels; None if not an image."""
    if arr.ndim == 2 and arr.dtype == np.uint8 and min(arr.shape) >= 4:
        arr = arr[:, :, None]
    if arr.ndim != 3:
        return None
    hwc, chw = arr.shape[-1] in (1, 3, 4), arr.shape[0] in (1, 3, 4)
    if hwc and (not chw or arr.shape[-1] == 3):  # ambiguous shapes such as (4, 6, 3): trust a final 3
        img = arr
    elif chw:
        img = np.moveaxis(arr, 0, -1)
    else:
        return None
    if min(img.shape[:2]) < 2:
        return None
    if img.dtype != np.uint8:
        if not np.issubdtype(img.dtype, np.floating):
            return None
        img = (np.clip(np.nan_to_num(img), 0.0, 1.0) * 255).astype(np.uint8)
    if img.shape[-1] == 1:
        img = np.repeat(img, 3, axis=-1)
    return np.ascontiguousarray(img[..., :3])


EVENT_VIEWS = ("histogram", "voxel", "time_surface")
"""The event representations drawn as images (``raw`` windows are summarised as numbers)."""
OFF_ON = (np.array([40, 120, 255], np.float64), np.array([255, 60, 40], np.float64))  # OFF blue, ON red


def robust_max(arr: np.ndarray) -> float:
    """The 99th percentile of the nonzero magnitudes (1.0 if none): one hot pixel does not make the rest black."""
    mag = np.abs(arr[arr != 0]).astype(np.float64)
    return float(np.percentile(mag, 99)) if mag.size else 1.0


def _polarity_rgb(off: np.ndarray, on: np.ndarray, scale: float) -> np.ndarray:
    """OFF in blue and ON in red on black, each scaled by ``scale`` and clipped; both at a pixel add up."""
    a = np.clip(off / scale, 0.0, 1.0)[..., None] * OFF_ON[0] + np.clip(on / scale, 0.0, 1.0)[..., None] * OFF_ON[1]
    return np.clip(a, 0, 255).astype(np.uint8)


def event_rgb(arr: np.ndarray, representation: str) -> np.ndarray | None:
    """An event window as uint8 (H, W', 3), or None when ``arr`` does not have the representation's shape.

    - ``histogram`` (2, H, W): channel 0 (OFF) blue, channel 1 (ON) red, scaled by the window's robust max;
    - ``voxel`` (bins, H, W): the bins side by side, left to right in time, separated by a gray column; positive
      (ON) values red, negative (OFF) blue, one scale for all bins;
    - ``time_surface`` (2, H, W): gray, the later (brighter) of the two polarities, values in [0, 1].
    """
    if arr.ndim != 3 or min(arr.shape) < 1 or representation not in EVENT_VIEWS:
        return None
    a = np.nan_to_num(arr.astype(np.float64))
    if representation == "histogram":
        return _polarity_rgb(a[0], a[1], robust_max(a)) if a.shape[0] == 2 else None
    if representation == "time_surface":
        if a.shape[0] != 2:
            return None
        gray = (np.clip(a.max(axis=0), 0.0, 1.0) * 255).astype(np.uint8)
        return np.repeat(gray[..., None], 3, axis=-1)
    scale = robust_max(a)
    bins = [_polarity_rgb(np.maximum(-b, 0), np.maximum(b, 0), scale) for b in a]
    sep = np.full((a.shape[1], 1, 3), 96, np.uint8)
    return np.concatenate([x for b in bins for x in (sep, b)][1:], axis=1)


def shown_step(arr: np.ndarray, display: str) -> np.ndarray:
    """What the preview draws for a step: an event window's image for an ``events:`` hint, else the step."""
    kind, _, representation = display.partition(":")
    img = event_rgb(arr, representation) if kind == "events" else None
    return arr if img is None else img


def resize_nearest(img: np.ndarray, width: int, height: int) -> np.ndarray:
    """Nearest-neighbour resize by index arrays (no per-pixel Python)."""
    ys = (np.arange(height) * img.shape[0] // max(height, 1)).clip(0, img.shape[0] - 1)
    xs = (np.arange(width) * img.shape[1] // max(width, 1)).clip(0, img.shape[1] - 1)
    out: np.ndarray = img[ys[:, None], xs[None, :]]
    return out


def field_kind(arr: np.ndarray, display: str = "") -> str:
    """``image``, ``text``, ``audio``, ``series`` or ``other``: the field's hint when it fits the step, else inferred
    (``series`` only by its hint: a vector of a few numbers is as often a set of unrelated values)."""
    kind = display.partition(":")[0]
    if kind == "series":
        return "series" if arr.ndim <= 1 and arr.size >= 1 and arr.dtype.kind in "iuf" else "other"
    if kind == "events":
        return "image" if as_rgb(shown_step(arr, display)) is not None else "other"
    if kind == "image":
        return "image" if as_rgb(arr) is not None else "other"
    if kind in ("text", "audio", "other"):
        return kind
    if as_rgb(arr) is not None:
        return "image"
    if arr.dtype == np.uint8 and arr.ndim == 1:
        return "text"
    signal = arr.dtype == np.int16 or np.issubdtype(arr.dtype, np.floating)
    if signal and ((arr.ndim == 1 and arr.size >= 8) or (arr.ndim == 2 and arr.shape[0] >= 16 and arr.shape[1] <= 8)):
        return "audio"  # [samples, channels] or a 1-D signal; small matrices are summarised
    return "other"


def field_kinds(step: Mapping[str, np.ndarray], displays: Mapping[str, str]) -> dict[str, str]:
    """Every field's kind for one step; a text field's byte-count companion becomes ``hidden``."""
    kinds = {k: field_kind(a, displays.get(k, "")) for k, a in step.items()}
    for k, d in displays.items():
        companion = d.partition(":")[2]
        if kinds.get(k) == "text" and companion in kinds:
            kinds[companion] = HIDDEN
    return kinds


def is_ids(step: np.ndarray, display: str) -> bool:
    """A step of token ids (``int64[width]``, as the tokens source gives): shown as the row's recent ids, which a
    min..max summary would hide. Only where the field gives no display hint of its own."""
    return not display and step.ndim == 1 and step.dtype.kind in "iu" and step.dtype.itemsize >= 4


def id_text(steps: np.ndarray, keep: int = 48) -> bytes:
    """A row's ids over its valid steps, the last ``keep`` of them, as text ("… 464 2068 11")."""
    ids = steps.reshape(-1)
    shown = " ".join(map(str, ids[-keep:].tolist()))
    return (("… " if len(ids) > keep else "") + shown).encode("ascii")


def text_bytes(chunks: np.ndarray, lengths: np.ndarray | None) -> bytes:
    """A text field's bytes over several steps: each step's first ``length`` bytes, else up to its first NUL."""
    if lengths is not None:
        return b"".join(bytes(c[: int(n)]) for c, n in zip(chunks, lengths, strict=True))
    return b"".join(bytes(c).split(b"\0", 1)[0] for c in chunks.reshape(len(chunks), -1))


def printable(data: bytes) -> str:
    s = data.decode("utf-8", errors="replace")
    return "".join(c if c.isprintable() else ("⏎" if c == "\n" else "·") for c in s)


def _binned_peak(x: np.ndarray, bins: int) -> np.ndarray:
    edges = np.linspace(0, x.size, bins + 1).astype(np.int64)
    edges[1:] = np.maximum(edges[1:], edges[:-1] + 1)
    edges = edges.clip(0, x.size)
    return np.maximum.reduceat(np.abs(x.astype(np.float64)), edges[:-1].clip(0, x.size - 1))


def wave_lines(arr: np.ndarray, width: int) -> list[str]:
    """Audio (int16 [samples, channels]) or a 1-D signal: a peak strip per channel and a level bar."""
    x = arr if arr.ndim == 2 else arr.reshape(arr.shape[0] if arr.ndim else 1, -1)
    lines = []
    if arr.dtype == np.int16:
        full = 32768.0
        for c in range(min(x.shape[1], 2)):
            lines.append(spark(_binned_peak(x[:, c], width), 0.0, full))
        rms = float(np.sqrt(np.mean(x.astype(np.float64) ** 2))) / full
        db = 20 * math.log10(max(rms, 1e-6))
        n = round(max(0.0, (db + 60) / 60) * (width - 8))
        lines.append(f"{'█' * n}{'░' * (width - 8 - n)} {db:5.0f}dB")
    else:
        v = x[:, 0]
        idx = np.linspace(0, v.size - 1, min(width, v.size)).astype(np.int64)
        lines.append(spark(v[idx]))
    return lines


SERIES_DIMS = 8  # a series shows at most this many dimensions, so that a cell of a 14-joint arm stays short


def series_lines(name: str, steps: np.ndarray, width: int) -> list[str]:
    """A ``series`` field over the row's recent steps (``(steps, dims)``, oldest first): one line per dimension,
    ``state[2] ▁▃▅█▆ 0.412``, its sparkline scaled to that dimension's own range and its current value last; at most
    ``SERIES_DIMS`` dimensions, then a line counting the others."""
    x = steps.reshape(len(steps), -1).astype(np.float64)
    short = name.rsplit(".", 1)[-1]
    dims = x.shape[1]
    labels = [f"{short}[{d}]" for d in range(min(dims, SERIES_DIMS))]
    pad = max((len(s) for s in labels), default=0)
    lines = []
    for d, label in enumerate(labels):
        value = f"{x[-1, d]:.3g}" if len(x) else "-"
        room = max(1, width - pad - len(value) - 2)
        lines.append(f"{label:<{pad}} {spark(x[-room:, d])} {value}")
    if dims > SERIES_DIMS:
        lines.append(f"… {dims - SERIES_DIMS} more dimensions of {name}")
    return lines


def recent_line(name: str, values: np.ndarray, width: int | None = None, shown: int = 8) -> str:
    """A scalar field as the row's recent steps, oldest first, the current one last: ``tok … 112 113 114 115``.

    ``values`` may hold one more than ``shown``, which only says that earlier steps came before ("…"); fitted to
    ``width`` cells by dropping the oldest, so that the current value always shows."""
    floats = np.issubdtype(values.dtype, np.floating)
    words = [f"{v:.4g}" if floats else str(v) for v in values.reshape(-1).tolist()]
    more = len(words) > shown
    words = words[-shown:]
    while True:
        line = f"{name} {'… ' if more else ''}{' '.join(words)}"
        if width is None or len(line) <= width or len(words) == 1:
            return line
        words, more = words[1:], True


def summary_line(name: str, arr: np.ndarray, recent: np.ndarray | None = None, width: int | None = None) -> str:
    """One field of a step as a line: a scalar as ``recent_line`` when its recent values are given, else
    ``name=value``; an array as its dtype, shape and range."""
    if recent is not None and recent.size > 1 and arr.size == 1:
        return recent_line(name, recent, width)
    if arr.size == 1:
        v = arr.reshape(-1)[0]
        return f"{name}={v:.4g}" if np.issubdtype(arr.dtype, np.floating) else f"{name}={v}"
    if arr.size == 0:
        return f"{name} (empty)"
    a = arr.astype(np.float64)
    return f"{name} {arr.dtype.name}{list(arr.shape)} {a.min():.3g}..{a.max():.3g} μ{a.mean():.3g}"
