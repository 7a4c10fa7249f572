"""The epoch's stream table (``scheduled.streams.all_streams``): the streams of every item, cut by ``segment``, built
with arrays only, so a million items cost their arrays and not lists of Python ints while it is built."""

from __future__ import annotations

import random
import tracemalloc

import numpy as np

from streamcli.scheduled.streams import all_streams


def reference(lengths: list[int | None], segment: int) -> list[tuple[int, int, bool, int]]:
    """(item, start, open-ended, steps or -1) of each stream, item by item, as the rules in the module say."""
    out = []
    for i, n in enumerate(lengths):
        if segment and n is not None:
            out += [(i, a, False, min(segment, n - a)) for a in range(0, n, segment)] or [(i, 0, False, 0)]
        else:
            out.append((i, 0, bool(segment), -1 if n is None else n))
    return out


def test_the_table_follows_the_segment_rules_for_known_unknown_and_empty_items() -> None:
    rng = random.Random(0)
    for trial in range(500):
        lengths = [None if trial % 2 and rng.random() < 0.3 else rng.randint(0, 20) for _ in range(rng.randint(0, 8))]
        segment = rng.choice([0, 1, 2, 3, 7, 100])
        s = all_streams(lengths, segment)
        want = reference(lengths, segment)
        assert (s.items.dtype, s.starts.dtype, s.open_ended.dtype) == (
            np.dtype(np.int64),
            np.dtype(np.int64),
            np.dtype(bool),
        )
        assert list(zip(s.items.tolist(), s.starts.tolist(), s.open_ended.tolist(), strict=True)) == [
            w[:3] for w in want
        ]
        if any(n is None for n in lengths):
            assert s.lengths is None
        else:
            assert s.lengths is not None and s.lengths.dtype == np.int64
            assert s.lengths.tolist() == [w[3] for w in want]


def test_building_the_table_takes_little_more_memory_than_the_table() -> None:
    n = 200_000
    for lengths in ([None] * n, [k % 50 + 1 for k in range(n)]):
        tracemalloc.start()
        try:
            s = all_streams(lengths, 0)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        table = s.items.nbytes + s.starts.nbytes + s.open_ended.nbytes + (0 if s.lengths is None else s.lengths.nbytes)
        assert peak < 1.5 * table, (peak, table)  # lists of Python ints took over three times the table
