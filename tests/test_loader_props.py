"""Property tests of the batch contract over random stream lengths, sizes, worker counts and modes."""

from __future__ import annotations

import numpy as np
import pytest
from _invariants import check_epoch, collect
from _sources import CountingSource
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamcli import StreamLoader

MODES = st.sampled_from(["pad", "pack"]), st.sampled_from(["pad", "restream", "drop"])
lengths_st = st.lists(st.integers(0, 12), min_size=0, max_size=14)


def _order(n: int, seed: int, epoch: int, shuffle: bool) -> np.ndarray:
    return np.random.default_rng([seed, epoch]).permutation(n) if shuffle else np.arange(n)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    lengths=lengths_st,
    B=st.integers(1, 4),
    T=st.integers(1, 4),
    boundary=MODES[0],
    epoch_end=MODES[1],
    layout=st.sampled_from(["TB", "BT"]),
    seed=st.integers(0, 3),
    shuffle=st.booleans(),
)
def test_contract_in_process(
    lengths: list[int], B: int, T: int, boundary: str, epoch_end: str, layout: str, seed: int, shuffle: bool
) -> None:
    src = CountingSource(lengths)
    with StreamLoader(
        src, B, T, seed=seed, shuffle=shuffle, boundary=boundary, epoch_end=epoch_end, layout=layout
    ) as loader:
        for epoch in range(2):
            expected_len = len(loader)
            batches = collect(loader)
            check_epoch(batches, lengths, B, T, boundary, epoch_end, _order(len(lengths), seed, epoch, shuffle))
            assert len(batches) == expected_len


@pytest.mark.slow
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    lengths=lengths_st,
    B=st.integers(2, 4),
    T=st.integers(1, 4),
    boundary=MODES[0],
    epoch_end=MODES[1],
    workers=st.sampled_from([1, 2]),
)
def test_bit_identical_across_workers(
    lengths: list[int], B: int, T: int, boundary: str, epoch_end: str, workers: int
) -> None:
    src = CountingSource(lengths, pad=5)
    kw = dict(seed=7, boundary=boundary, epoch_end=epoch_end)
    with StreamLoader(src, B, T, **kw) as ref_loader:  # type: ignore[arg-type]
        ref = [collect(ref_loader) for _ in range(2)]
    with StreamLoader(src, B, T, num_workers=workers, **kw) as loader:  # type: ignore[arg-type]
        got = [collect(loader) for _ in range(2)]
    for e in range(2):
        check_epoch(got[e], lengths, B, T, boundary, epoch_end, _order(len(lengths), 7, e, True))
        assert len(got[e]) == len(ref[e])
        for a, b in zip(ref[e], got[e], strict=True):
            assert a.keys() == b.keys()
            for key in a:
                assert a[key].dtype == b[key].dtype and np.array_equal(a[key], b[key]), key


def test_seed_text_example() -> None:
    """Seed 001's example: 27 strings, batch 8; each row reads as one continuous string across batches."""
    from streamcli import load_source

    texts = ["".join(f"{chr(j)}_{i};" for i in range(1000)) for j in range(97, 97 + 27)]
    src = load_source("text", texts, width=4)
    rows: dict[int, list[bytes]] = {}
    with StreamLoader(src, batch_size=8, time_steps=3, shuffle=False) as loader:
        batches = list(loader)
        first = batches[0]
        for b in range(8):  # batch 1 row b begins the b-th string, as in the seed
            got = bytes(first["text"][:, b].reshape(-1).numpy()).rstrip(b"\0")
            assert got == f"{chr(97 + b)}_0;{chr(97 + b)}_1;{chr(97 + b)}_2;".encode()
        for batch in batches:
            for b in range(8):
                for t in range(3):
                    if batch.valid[t, b]:
                        s = int(batch.stream[t, b])
                        n = int(batch["nbytes"][t, b])
                        rows.setdefault(s, []).append(bytes(batch["text"][t, b, :n].numpy()))
    assert sorted(rows) == list(range(27))
    for s, chunks in rows.items():
        assert b"".join(chunks).decode() == texts[s]


@pytest.mark.slow
def test_seed_text_example_workers_match() -> None:
    from streamcli import load_source

    texts = ["".join(f"{chr(j)}_{i};" for i in range(60)) for j in range(97, 97 + 27)]
    outs = []
    for w in (0, 2):
        with StreamLoader(load_source("text", texts, width=4), 8, 3, num_workers=w) as loader:
            outs.append([b["text"].clone() for b in loader])
    assert len(outs[0]) == len(outs[1]) and all(bool((a == b).all()) for a, b in zip(*outs, strict=True))
