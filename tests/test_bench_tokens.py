"""The token benchmark's hand loop (the baseline of issue 47's goals) does the job it is compared on: every
document of the file, whole, each row continuing its own, flagged at its first step."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np

from benchmarks import bench_tokens as bench


def test_the_hand_loop_gives_every_document_whole_along_its_row(tmp_path: Path) -> None:
    path = tmp_path / "train.bin"
    n_docs = bench.write_corpus(path, n_ids=30_000, seed=1)
    ids = np.fromfile(path, np.uint16)
    eots = np.flatnonzero(ids == bench.EOT)
    assert len(eots) == n_docs and 10 <= n_docs <= 45
    want = {ids[a + 1 : b].tobytes() for a, b in itertools.pairwise([-1, *eots.tolist(), len(ids)]) if b > a + 1}
    loop = bench.TokenHandLoop(str(path), B=3, T=64, seed=0)
    rows: list[list[int]] = [[], [], []]
    firsts: list[list[int]] = [[], [], []]
    for _ in range(200):  # 38,400 ids a row-set: every document (30,000 ids in all) starts within them
        out = next(loop)
        assert out.dtype == np.int64 and out.shape == (64, 3)
        for b in range(3):
            firsts[b] += [len(rows[b]) + t for t in np.flatnonzero(loop.is_first[:, b])]
            rows[b] += out[:, b].tolist()
    got = set()
    for b in range(3):
        for s, e in itertools.pairwise(firsts[b]):  # whole documents: from one first step to the next
            got.add(np.asarray(rows[b][s:e], np.uint16).tobytes())
    assert want <= got  # (documents of the next pass too, reshuffled)
    assert all(bench.EOT not in r for r in rows)
