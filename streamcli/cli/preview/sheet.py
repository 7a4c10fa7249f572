"""The PNG contact sheet (``preview --snapshot``): one labelled tile per batch row, drawn with OpenCV."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from streamcli.cli.preview.fields import as_rgb, printable, summary_line
from streamcli.cli.preview.frame import Frame
from streamcli.cli.preview.grid import kind_of, shown_image


def contact_sheet(frame: Frame, cell: int = 192) -> np.ndarray:
    """The grid as an RGB image: one labelled tile per row (images scaled, other fields as text)."""
    import cv2

    font = cv2.FONT_HERSHEY_SIMPLEX
    tiles = []
    for r in frame.rows:
        shown = shown_image(r)
        img = as_rgb(r.step[shown]) if shown is not None else None
        if img is not None:
            h = max(1, round(cell * img.shape[0] / img.shape[1]))
            body = cv2.resize(img, (cell, h), interpolation=cv2.INTER_NEAREST)
        else:
            body = np.zeros((cell // 2, cell, 3), np.uint8)
        lines = []
        for k, a in r.step.items():
            kind = kind_of(r, k)
            if kind == "text":
                s = printable(r.text.get(k, bytes(a))).encode("ascii", "replace").decode()
                lines += [s[i : i + 24] for i in range(0, len(s), 24)][-4:]
            elif kind == "audio":
                x = a if a.ndim == 1 else a.reshape(a.shape[0], -1)[:, 0]
                y = x.astype(np.float64)
                span = float(np.abs(y).max()) or 1.0
                pts = np.stack([np.linspace(0, cell - 1, y.size), (0.5 - y / span / 2.2) * (body.shape[0] - 1)], 1)
                cv2.polylines(body, [pts.astype(np.int32)], False, (80, 220, 120), 1)
            elif kind in ("other", "series") or (kind == "image" and k != shown):
                lines.append(summary_line(k, a)[:30])
        for i, s in enumerate(lines[:6]):
            cv2.putText(body, s, (4, 14 + 14 * i), font, 0.38, (230, 230, 230), 1, cv2.LINE_AA)
        if not r.valid:
            body = (body * 0.35).astype(np.uint8)
        label = np.full((20, cell, 3), (40, 40, 40) if not r.reset else (150, 40, 40), np.uint8)
        reset = "RESET " if r.reset else ""
        text = reset + r.label(32 - len(reset)).strip().replace("…", "~")  # Hershey fonts draw ASCII only
        cv2.putText(label, text, (4, 14), font, 0.4, (255, 255, 255), 1, cv2.LINE_AA)
        tiles.append(np.concatenate([label, body], 0))
    th = max(t.shape[0] for t in tiles)
    tiles = [np.pad(t, ((0, th - t.shape[0]), (0, 0), (0, 0))) for t in tiles]
    cols = max(1, math.ceil(math.sqrt(len(tiles))))
    while len(tiles) % cols:
        tiles.append(np.zeros_like(tiles[0]))
    rows = [
        np.concatenate([np.pad(t, ((2, 2), (2, 2), (0, 0))) for t in tiles[i : i + cols]], 1)
        for i in range(0, len(tiles), cols)
    ]
    return np.concatenate(rows, 0)


def snapshot_png(frame: Frame, path: str | Any) -> None:
    """Write ``contact_sheet(frame)`` to ``path`` with OpenCV."""
    import cv2

    from streamcli.errors import StreamcliError

    if not cv2.imwrite(str(path), contact_sheet(frame)[..., ::-1].copy()):
        raise StreamcliError(f"could not write the snapshot {str(path)!r}")
