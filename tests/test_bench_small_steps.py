"""Smoke tests for ``benchmarks/bench_small_steps.py`` (issue 24's acceptance benchmark): it runs and prints its
tables, and its hand loop (the baseline every goal is a ratio to) does the job it claims."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from benchmarks import bench_small_steps as bench


@pytest.mark.slow
def test_every_section_runs_in_its_quickest_form_and_prints_its_table(capsys: pytest.CaptureFixture[str]) -> None:
    bench.main(["--quick", "--rounds", "1", "--batches", "1", "--max-workers", "1"])
    out = capsys.readouterr().out
    for title in ("### (a) byte-level text", "### (b) block plugin", "### (c) engine cost"):
        assert title in out
    for row in ("| hand loop |", "| streamcli, 1 workers |", "| streamcli, best worker count |",
                "| B=1024, streamcli, 0 workers |", "| B=256, slice copies alone |"):  # fmt: skip
        assert row in out
    assert "| streamcli, 2 workers |" not in out  # --max-workers 1


def test_hand_loop_continues_each_segment_along_its_row_and_flags_first_and_valid(tmp_path: Path) -> None:
    files = []
    for i, text in enumerate([b"\xef\xbb\xbfabcdefghij", b"0123456789ABCDEFGHIJKLMNOPQRSTU", b"xyz"]):
        files.append(tmp_path / f"{i}.txt")
        files[-1].write_bytes(text)
    arrays, spans = bench.text_spans([str(p) for p in files], segment=8)
    assert bytes(arrays[0][:, 0]) == b"abcdefghij"  # the byte-order mark dropped, as the text source does
    assert spans.tolist() == [[0, 0, 8], [0, 8, 10], [1, 0, 8], [1, 8, 16], [1, 16, 24], [1, 24, 31], [2, 0, 3]]
    B, T = 2, 5
    loop = bench.HandLoop(arrays, spans, B, T, seed=3)
    rows: list[list[int]] = [[], []]
    firsts: list[list[int]] = [[], []]
    for _ in range(12):  # 60 steps a row: every segment (55 bytes in all) ends inside them; then a new pass
        out = next(loop)
        assert out.shape == (T, B, 1) and loop.valid.all()
        for b in range(B):
            firsts[b] += [len(rows[b]) + t for t in np.flatnonzero(loop.is_first[:, b])]
            rows[b] += out[:, b, 0].tolist()
    got = set()
    for b in range(B):
        bounds = [*firsts[b], len(rows[b])]
        assert bounds[0] == 0
        got |= {bytes(rows[b][s:e]) for s, e in itertools.pairwise(bounds) if e - s}
    want = {bytes(arrays[a][s:e, 0]) for a, s, e in spans.tolist()}
    assert want <= got  # each run between two is_first flags is one whole segment
