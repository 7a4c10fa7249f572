"""Sensor-like recordings made of real audio, and the streams a loader's batches hold, for the arrays and table tests.

The shared set's 48 kHz WAV files, read with ``wave``, become ``(rows, 12)`` float32 recordings: 12 consecutive
samples a row, scaled to [-1, 1), each cut to its own length so that no two recordings have the same.
"""

from __future__ import annotations

import wave
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from conftest import require_shared

from streamcli import StreamLoader, StreamSource

CHANNELS = 12


def recordings(count: int = 4, rows: int = 1500) -> list[np.ndarray]:
    """``count`` recordings of ``rows + 173 * i`` rows each (``i`` the recording's rank)."""
    folder = require_shared("audio")
    out = []
    for i, path in enumerate(sorted(Path(folder).glob("*.wav"))[:count]):
        with wave.open(str(path)) as w:
            pcm = np.frombuffer(w.readframes(w.getnframes()), "<i2")
        n = rows + 173 * i
        assert len(pcm) >= n * CHANNELS, f"{path} is shorter than the test needs"
        out.append((pcm[: n * CHANNELS].reshape(n, CHANNELS) / 32768.0).astype(np.float32))
    return out


def streams_of(source: StreamSource, batch_size: int, time_steps: int, **kw: Any) -> dict[int, dict[str, np.ndarray]]:
    """One epoch read back as whole streams: for each item index, each field's steps in position order. Fails if
    a step comes twice or a stream has a gap."""
    got: dict[int, dict[int, dict[str, np.ndarray]]] = defaultdict(dict)
    with StreamLoader(source, batch_size, time_steps, **kw) as loader:
        for batch in loader:
            valid = batch.valid.numpy()
            stream, pos = batch.stream.numpy(), batch.position.numpy()
            data = {k: v.numpy() for k, v in batch.data.items()}
            for t, b in zip(*np.nonzero(valid), strict=True):
                s, p = int(stream[t, b]), int(pos[t, b])
                assert p not in got[s], f"stream {s} step {p} delivered twice"
                got[s][p] = {k: a[t, b].copy() for k, a in data.items()}
    out = {}
    for s, steps in got.items():
        assert sorted(steps) == list(range(len(steps))), f"stream {s} has gaps"
        out[s] = {k: np.stack([steps[p][k] for p in range(len(steps))]) for k in steps[0]}
    return out
