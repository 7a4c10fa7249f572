"""The selected row's fields, each shown by its kind (``Field.display``, else inferred as preview does): images as
truecolour half-block thumbnails, text bytes as text, token ids decoded when the source has a tokenizer, audio as
a waveform sparkline, a series (a robot's state) as a sparkline per dimension, event windows as their image, any
other array as shape, dtype, min, mean and max."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from rich.console import Group, RenderableType
from rich.text import Text
from textual.widgets import Static

from streamcli.batch import Batch
from streamcli.cli.preview.ansi import half_block_lines
from streamcli.cli.preview.fields import (
    HIDDEN,
    as_rgb,
    field_kinds,
    printable,
    resize_nearest,
    series_lines,
    shown_step,
    text_bytes,
    wave_lines,
)
from streamcli.inspection.record import time_major

THUMB_WIDTH = 40  # cells; an image is two pixel rows per line
TEXT_CHARS = 400


def row_steps(batch: Batch, name: str, row: int) -> np.ndarray:
    """Field ``name`` of row ``row``: its T steps, in time order."""
    a = batch[name].numpy()
    return np.asarray(a[:, row] if batch.layout == "TB" else a[row])


def thumbnail(img: np.ndarray, width: int = THUMB_WIDTH) -> Text:
    """An RGB image as half-block lines in 24-bit colour (Textual lowers them where the terminal has fewer)."""
    h, w = img.shape[:2]
    width = max(1, min(width, w))
    height = max(2, round(h * width / w / 2) * 2)
    return Text.from_ansi("\n".join(half_block_lines(resize_nearest(img, width, height), "truecolor")))


def summary(arr: np.ndarray) -> str:
    """``float32[16, 8] min -1 mean 0.02 max 1``, over the row's valid steps."""
    if arr.size == 0:
        return f"{arr.dtype.name}{list(arr.shape)} (empty)"
    a = arr.astype(np.float64)
    return f"{arr.dtype.name}{list(arr.shape)} min {a.min():.4g} mean {a.mean():.4g} max {a.max():.4g}"


def decoded(tokenizer: Any, ids: np.ndarray) -> str | None:
    """Token ids as text through the source's tokenizer (anything with ``decode(list_of_ids)``), else None."""
    decode = getattr(tokenizer, "decode", None)
    if decode is None or not np.issubdtype(ids.dtype, np.integer):
        return None
    try:
        return str(decode([int(i) for i in ids.reshape(-1)]))
    except Exception:  # a tokenizer's own refusal: show the ids instead
        return None


def field_view(
    name: str, kind: str, steps: np.ndarray, last: np.ndarray, display: str, tokenizer: Any, companion: Any
) -> RenderableType:
    """One field of the row: ``steps`` are its valid steps, ``last`` the last of them (as the grid shows it)."""
    head = Text(f"{name} ", style="bold")
    head.append(f"{kind}  {steps.dtype.name}[{', '.join(map(str, steps.shape[1:]))}] x {len(steps)} steps", "dim")
    if kind == "image":
        img = as_rgb(shown_step(last, display))
        return Group(head, thumbnail(img)) if img is not None else Group(head, Text(summary(steps)))
    if kind == "text":
        body = printable(text_bytes(steps, companion))
        return Group(head, Text(body[:TEXT_CHARS] or "(empty)"))
    if kind == "audio":
        samples = steps.reshape(-1, *steps.shape[2:]) if steps.ndim > 2 else steps.reshape(-1)
        return Group(head, Text("\n".join(wave_lines(samples, THUMB_WIDTH))), Text(summary(steps), style="dim"))
    if kind == "series":
        return Group(head, Text("\n".join(series_lines(name, steps, THUMB_WIDTH))), Text(summary(steps), style="dim"))
    words = decoded(tokenizer, steps) if tokenizer is not None else None
    if words is not None:
        ids = " ".join(map(str, steps.reshape(-1)[:64].tolist()))
        return Group(head, Text(printable(words.encode())[:TEXT_CHARS]), Text(f"ids {ids}", style="dim"))
    return Group(head, Text(summary(steps)))


def detail(batch: Batch, row: int, displays: Mapping[str, str], tokenizer: Any = None) -> RenderableType:
    """Every field of row ``row`` over this batch's valid steps."""
    valid = time_major(batch, "valid")[:, row]
    if not valid.any():
        return Text(f"row {row} is padding in this batch", style="dim")
    t = int(np.flatnonzero(valid)[-1])
    steps = {name: row_steps(batch, name, row) for name in batch}
    kinds = field_kinds({k: v[t] for k, v in steps.items()}, displays)
    parts: list[RenderableType] = [Text(f"row {row}: fields over its {int(valid.sum())} valid steps", style="bold")]
    for name, kind in kinds.items():
        if kind == HIDDEN:
            continue
        display = displays.get(name, "")
        companion_name = display.partition(":")[2] if kind == "text" else ""
        companion = steps[companion_name][valid] if companion_name in steps else None
        parts.append(field_view(name, kind, steps[name][valid], steps[name][t], display, tokenizer, companion))
    return Group(*parts)


class DetailPane(Static):
    """The selected row's fields."""
