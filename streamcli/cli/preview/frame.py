"""Batch -> frame: each row's current step copied out of the loader's shared memory, with its labels."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from rich.cells import cell_len, set_cell_size

from streamcli.cli.preview.fields import field_kinds, id_text, is_ids, shown_step, text_bytes

if TYPE_CHECKING:
    from streamcli.batch import Batch


def elide(name: str, width: int) -> str:
    """``name`` in at most ``width`` cells: its middle replaced by "…", so both its start and its suffix stay."""
    if cell_len(name) <= width:
        return name
    if width < 2:
        return set_cell_size(name, max(width, 0))
    tail = (width - 1) // 2
    head = width - 1 - tail
    return set_cell_size(name, head) + "…" + (name[-tail:] if tail else "")


RECENT = 8  # a scalar field (a token id, a reward) shows the row's last this many steps of the batch


@dataclass
class RowView:
    """What the grid shows for one batch row: its current step and labels (numpy copies, no tensors)."""

    row: int
    name: str
    position: int
    length: int | None
    valid: bool
    reset: bool
    step: dict[str, np.ndarray]
    text: dict[str, bytes] = field(default_factory=dict)  # text fields: the row's bytes over the batch
    kinds: dict[str, str] = field(default_factory=dict)  # field -> image/text/audio/other/hidden
    # scalar fields: the row's valid values over this batch, oldest first (up to ``RECENT`` + 1: one more says
    # that there were earlier ones)
    recent: dict[str, np.ndarray] = field(default_factory=dict)
    # series fields: the row's valid steps of its current stream in this batch, ``(steps, dims)``, oldest first
    series: dict[str, np.ndarray] = field(default_factory=dict)

    def label(self, width: int | None = None) -> str:
        """``" 3 clip.mp4 12/193"``: the row, its stream and the step's position (of the stream's length, when
        known). Fitted to ``width`` cells by shortening the name, never the position: a cut-off "12/1" would
        read as a wrong total."""
        if not self.valid:
            return f"{self.row:>2} (padding)"
        pos = f"{self.position + 1}/{self.length}" if self.length else f"{self.position + 1}"
        head = f"{self.row:>2} "
        if width is None:
            return f"{head}{self.name} {pos}"
        room = width - cell_len(head) - cell_len(pos) - 1
        return f"{head}{elide(self.name, room)} {pos}" if room >= 2 else f"{self.row:>2} {pos}"[-width:]


@dataclass
class Frame:
    """The displayed state of one batch, detached from the loader's shared memory."""

    rows: list[RowView]
    index: int
    epoch: int
    time_steps: int


def frame_from_batch(
    batch: Batch,
    name_of: Callable[[int], str] = str,
    length_of: Callable[[int], int | None] = lambda i: None,
    displays: Mapping[str, str] | None = None,
) -> Frame:
    """Each row's current step: its last valid step in this batch (or the last step, dimmed, if none).

    ``displays`` maps field names to their ``Field.display`` hints (``{f.name: f.display for f in
    loader.fields}``); fields without one are inferred from shape and dtype. A field hinted
    ``events:<representation>`` is replaced by its image (``fields.event_rgb``).
    """
    tb = batch.layout == "TB"
    valid = batch.valid.numpy()
    stream = batch.stream.numpy()
    position = batch.position.numpy()
    is_first = batch.is_first.numpy()
    reset = batch.reset.numpy()
    data = {k: v.numpy() for k, v in batch.data.items()}
    displays = dict(displays or {})
    first = {k: np.asarray(v[0, 0]) for k, v in data.items()}  # one step, in either layout
    kinds = field_kinds(first, displays)
    ids = {k for k, kind in kinds.items() if kind == "other" and is_ids(first[k], displays.get(k, ""))}
    kinds |= dict.fromkeys(ids, "text")  # shown as text: the row's recent ids
    lengths_of = {k: displays[k].partition(":")[2] for k, kind in kinds.items() if kind == "text" and k in displays}
    rows = []
    for b in range(batch.batch_size):
        col = valid[:, b] if tb else valid[b]
        ts = np.flatnonzero(col)
        t = int(ts[-1]) if ts.size else col.shape[0] - 1

        def at(a: np.ndarray, t: int = t, b: int = b) -> np.ndarray:
            return np.asarray(a[t, b] if tb else a[b, t])

        def over_batch(a: np.ndarray, b: int = b) -> np.ndarray:
            return np.asarray(a[:, b] if tb else a[b])

        ok = bool(at(valid))
        sid = int(at(stream))
        text: dict[str, bytes] = {}
        for name, kind in kinds.items():
            if kind != "text":
                continue
            if name in ids:
                text[name] = id_text(over_batch(data[name])[col])
                continue
            companion = lengths_of.get(name)
            lengths = over_batch(data[companion])[col] if companion and companion in data else None
            text[name] = text_bytes(over_batch(data[name])[col], lengths)
        recent = {
            name: over_batch(data[name])[col].reshape(-1)[-(RECENT + 1) :].copy()
            for name, kind in kinds.items()
            if kind == "other" and first[name].size == 1
        }
        ours = col & (over_batch(stream) == sid)  # a series is drawn for the row's current stream only
        series = {name: over_batch(data[name])[ours].copy() for name, kind in kinds.items() if kind == "series"}
        rows.append(
            RowView(
                row=b,
                name=name_of(sid) if ok and sid >= 0 else "",
                position=int(at(position)),
                length=length_of(sid) if ok and sid >= 0 else None,
                valid=ok,
                reset=bool(reset[b]) or bool(over_batch(is_first).any()),
                step={k: shown_step(np.array(at(v)), displays.get(k, "")) for k, v in data.items()},
                text=text,
                kinds=kinds,
                recent=recent,
                series=series,
            )
        )
    return Frame(rows, batch.index, batch.epoch, batch.time_steps)
