"""A mix's epoch order: each source's streams interleaved by *step deficit* (``streamcli.mix``).

Each source's streams are shuffled by its own seeded permutation (from the seed, the epoch, the source and the
pass), then the next stream always comes from the source whose steps so far are furthest below its weight times
the steps so far of all. The order is a pure function of its arguments. Shares are measured in steps when every
length is known, else in streams.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def deficit_order(
    items: np.ndarray,
    source_of: np.ndarray,
    pass_of: np.ndarray,
    n_steps: Sequence[float],
    weights: Sequence[float],
    *,
    restream: bool,
    seed: int,
    epoch: int,
    shuffle: bool,
) -> np.ndarray:
    """The positions in ``items`` (the epoch's streams, as item indices into ``source_of`` and ``pass_of``) in the
    order the rows take them; ``n_steps`` holds each stream's steps (``stream_steps``). Without ``restream`` the
    order ends when the first source runs out; with it, once every source is covered once."""
    k = len(weights)
    src, pas = source_of[items], pass_of[items]
    queues: list[list[int]] = []
    first_pass: list[int] = []  # streams of pass 0 per source
    for i in range(k):
        mine = np.nonzero(src == i)[0]
        parts = []
        for p in range(int(pas[mine].max()) + 1 if len(mine) else 0):
            sel = mine[pas[mine] == p]
            if shuffle:
                sel = sel[np.random.default_rng([seed, epoch, i, p, 0x6D6978]).permutation(len(sel))]
            parts.append(sel)
        queues.append(np.concatenate(parts).tolist() if parts else [])
        first_pass.append(len(parts[0]) if parts else 0)
    w = weights
    pos = [0] * k
    taken = [0.0] * k
    total = 0.0
    out: list[int] = []
    while True:
        # The source furthest below its share; ties to the lowest index.
        i = max(range(k), key=lambda q: (w[q] * total - taken[q], -q))
        if pos[i] >= len(queues[i]):
            break  # "first": the first source ran out; "restream": the one that needs a single pass did
        j = queues[i][pos[i]]
        pos[i] += 1
        out.append(j)
        taken[i] += n_steps[j]
        total += n_steps[j]
    if restream:  # every source covered once, even if the last one is a stream short
        for i in range(k):
            out += queues[i][pos[i] : first_pass[i]]
    return np.asarray(out, np.int64)


def stream_steps(items: np.ndarray, steps: np.ndarray | None, item_steps: Sequence[int | None]) -> list[float]:
    """Each stream's steps: promised, or estimated (an item's length, from ``item_steps``, shared among its
    streams; unknown lengths count as the mean known stream)."""
    if steps is not None:
        return [float(n) for n in steps.tolist()]
    per_item = np.bincount(items, minlength=len(item_steps)) if len(items) else np.zeros(0, np.int64)
    est: list[float | None] = []
    for it in items.tolist():
        n = item_steps[it]
        est.append(None if n is None else n / max(int(per_item[it]), 1))
    known = [x for x in est if x is not None]
    fill = sum(known) / len(known) if known else 1.0
    return [fill if x is None else x for x in est]


def source_size(lengths: Sequence[int | None]) -> float:
    """A source's size: its steps when every length is known, else its streams."""
    if all(n is not None for n in lengths):
        return float(sum(n for n in lengths if n is not None))
    return float(len(lengths))


def restream_passes(sizes: Sequence[float], weights: Sequence[float]) -> list[int]:
    """Passes per source under ``until="restream"``: the source that takes longest to cover at its weight needs
    one; every other enough to keep pace until then, plus one for the interleaving's slack. A source of no steps
    has nothing to restream: one pass."""
    need = [s / w for s, w in zip(sizes, weights, strict=True)]
    last = max(range(len(sizes)), key=lambda i: (need[i], -i))
    return [
        1 if i == last or s <= 0 else math.ceil(w * need[last] / s) + 1
        for i, (s, w) in enumerate(zip(sizes, weights, strict=True))
    ]
