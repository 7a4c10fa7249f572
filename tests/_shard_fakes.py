"""Hand-built batches for export/replay/preview tests (no loader needed)."""

from __future__ import annotations

import numpy as np
import torch

from streamcli.batch import Batch
from streamcli.source import Field

FIELDS = (Field("frame", (4, 6, 3), "uint8"), Field("score", (), "float32"))


def make_batch(i: int, *, b: int = 3, t: int = 4, layout: str = "TB", epoch: int = 0) -> Batch:
    rng = np.random.default_rng(i)
    shape = (t, b) if layout == "TB" else (b, t)
    valid = np.ones(shape, bool)
    valid[-1, -1] = i % 2 == 0
    return Batch(
        data={
            "frame": torch.from_numpy(rng.integers(0, 256, (*shape, 4, 6, 3), dtype=np.uint8)),
            "score": torch.from_numpy(rng.standard_normal(shape).astype(np.float32)),
        },
        is_first=torch.from_numpy(rng.random(shape) < 0.2),
        reset=torch.from_numpy(rng.random(b) < 0.5),
        valid=torch.from_numpy(valid),
        stream=torch.from_numpy(rng.integers(-1, 5, shape)),
        position=torch.from_numpy(rng.integers(-1, 50, shape)),
        replayed=torch.zeros(shape, dtype=torch.bool),
        epoch=epoch,
        index=i,
        layout=layout,
    )
