"""One checker for every promise of the batch contract, used by the property tests."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from streamcli import Batch, StreamLoader


def collect(loader: StreamLoader) -> list[dict[str, np.ndarray]]:
    """One epoch as numpy copies, in (T, B) layout whatever the loader's layout."""
    out = []
    for batch in loader:
        out.append(to_numpy(batch))
    return out


def to_numpy(batch: Batch) -> dict[str, np.ndarray]:
    d: dict[str, Any] = {k: v.numpy().copy() for k, v in batch.data.items()}
    d.update({k: v.numpy().copy() for k, v in batch.flags().items()})
    if batch.layout == "BT":
        d = {k: (v if k == "reset" else np.swapaxes(v, 0, 1)) for k, v in d.items()}
    return d


def check_epoch(
    batches: list[dict[str, np.ndarray]],
    lengths: list[int],
    B: int,
    T: int,
    boundary: str,
    epoch_end: str,
    order: np.ndarray,
) -> None:
    n = len(lengths)
    seen: Counter[tuple[int, int]] = Counter()
    cur: list[list[int] | None] = [None] * B  # per row: [stream, next position, replayed]
    padded = [False] * B  # the row has shown padding since its last stream started
    starts: list[tuple[int, int, int, int]] = []  # (batch, t, row, stream) of original stream starts
    for k, bt in enumerate(batches):
        valid, first, stream, pos, rep, x = (
            bt["valid"],
            bt["is_first"],
            bt["stream"],
            bt["position"],
            bt["replayed"],
            bt["x"],
        )
        assert valid.shape == (T, B)
        assert valid.any(), f"batch {k} is all padding"
        assert (bt["reset"] == first[0]).all()
        for b in range(B):
            if boundary == "pad":
                padded[b] = False  # a new batch may start a new stream
            for t in range(T):
                if not valid[t, b]:
                    assert stream[t, b] == -1 and pos[t, b] == -1 and not first[t, b] and not rep[t, b]
                    assert (x[t, b] == 0).all(), "padding must be zeros"
                    if cur[b] is not None and epoch_end != "drop":
                        s, nxt, _ = cur[b]  # type: ignore[misc]
                        assert nxt == lengths[s], f"row {b} padded before stream {s} ended"
                    cur[b] = None
                    padded[b] = True
                    continue
                s, p = int(stream[t, b]), int(pos[t, b])
                assert list(x[t, b]) == [s, p], "data disagrees with the stream/position flags"
                if first[t, b]:
                    assert p == 0
                    assert not padded[b], f"row {b} restarted after padding in the same batch/epoch tail"
                    if boundary == "pad":
                        assert t == 0, "with boundary='pad' a stream may only begin a batch"
                    if cur[b] is not None:
                        ps, pn, _ = cur[b]  # type: ignore[misc]
                        assert pn == lengths[ps], f"stream {ps} was cut off by stream {s} in row {b}"
                    cur[b] = [s, 1, int(rep[t, b])]
                    if not rep[t, b]:
                        starts.append((k, t, b, s))
                else:
                    assert cur[b] is not None and cur[b][0] == s and cur[b][1] == p, (
                        f"row {b} broke continuity at batch {k} step {t}: expected {cur[b]}, got stream {s} pos {p}"
                    )
                    assert cur[b][2] == int(rep[t, b])  # type: ignore[index]
                    cur[b][1] += 1  # type: ignore[index]
                if rep[t, b]:
                    assert epoch_end == "restream"
                else:
                    seen[(s, p)] += 1
    assert all(c == 1 for c in seen.values()), "a step was delivered twice"
    everything = {(s, p) for s in range(n) for p in range(lengths[s])}
    if epoch_end in ("pad", "restream"):
        assert set(seen) == everything, f"missing steps: {sorted(everything - set(seen))[:5]}"
    else:  # drop: whatever was delivered of a stream is a prefix of it
        for s in {s for s, _ in seen}:
            got = sorted(p for ss, p in seen if ss == s)
            assert got == list(range(len(got)))
    # Streams start in the seeded order, just in time, in canonical (batch, step, row) order.
    claimed = [s for *_, s in sorted(starts)]
    expected = [int(s) for s in order if lengths[int(s)] > 0]
    assert claimed == expected[: len(claimed)]
