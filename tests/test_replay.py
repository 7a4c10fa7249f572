"""Replay: a real loader's batches come back bit-identical; the shards source rebuilds the streams."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from streamcli import ShardReader, StreamLoader, load_source
from streamcli.shards import export, make_header
from streamcli.source import iter_steps

TEXTS = ["the quick brown fox jumps", "over the lazy dog", "a", "streams of bytes, one step at a time!"]


def _export(out: Path, layout: str = "TB", boundary: str = "pad", compress: bool = False) -> None:
    src = load_source("text", TEXTS, width=4)
    with StreamLoader(src, 3, 5, layout=layout, boundary=boundary, seed=1) as loader:
        header = make_header(
            fields=loader.fields,
            batch_size=3,
            time_steps=5,
            layout=layout,
            source={"plugin": "text", "arg": TEXTS, "options": {"width": 4}},
            loader={"seed": 1, "layout": layout, "boundary": boundary},
            shard_bytes=1500,
            compress=compress,
            streams=[loader.stream_name(i) for i in range(loader.num_streams)],
            stream_lengths=[loader.stream_length(i) for i in range(loader.num_streams)],
        )
        export(iter(loader), out, header)


@pytest.mark.parametrize("layout", ["TB", "BT"])
def test_reader_gives_the_exported_batches(tmp_path: Path, layout: str) -> None:
    src = load_source("text", TEXTS, width=4)
    with StreamLoader(src, 3, 5, layout=layout, seed=1) as loader:
        header = make_header(
            fields=loader.fields, batch_size=3, time_steps=5, layout=layout, source={}, loader={},
            shard_bytes=1500, compress=False,
        )  # fmt: skip
        want = []

        def keep():
            for b in loader:
                want.append(b.clone())
                yield b

        export(keep(), tmp_path, header)
    got = list(ShardReader(tmp_path))
    assert len(got) == len(want) > 1
    for g, w in zip(got, want, strict=True):
        assert (g.index, g.epoch, g.layout) == (w.index, w.epoch, w.layout)
        assert set(g) == set(w)
        for k in w:
            assert torch.equal(g[k], w[k]) and g[k].dtype == w[k].dtype
        for k, v in w.flags().items():
            assert torch.equal(g.flags()[k], v) and g.flags()[k].dtype == v.dtype, k


@pytest.mark.parametrize(
    ("boundary", "layout", "compress"), [("pad", "TB", False), ("pack", "TB", True), ("pack", "BT", False)]
)
def test_shards_source_rebuilds_every_stream(tmp_path: Path, boundary: str, layout: str, compress: bool) -> None:
    _export(tmp_path, layout=layout, boundary=boundary, compress=compress)
    shards = load_source("shards", str(tmp_path))
    text = load_source("text", TEXTS, width=4)
    assert len(shards.items()) == len(TEXTS)
    for sid in shards.items():
        want = list(iter_steps(text, text.items()[sid]))
        got = list(iter_steps(shards, sid))
        assert shards.length(sid) == len(want) == len(got)
        for g, w in zip(got, want, strict=True):
            assert np.array_equal(g["text"], w["text"]) and int(g["nbytes"]) == int(w["nbytes"])
        assert [np.asarray(s["text"]).tobytes() for s in iter_steps(shards, sid, start=2)] == [
            np.asarray(s["text"]).tobytes() for s in want[2:]
        ]
    assert shards.item_name(0) == text.item_name(text.items()[0])


def test_shards_source_feeds_a_loader(tmp_path: Path) -> None:
    _export(tmp_path)
    shards = load_source("shards", str(tmp_path))
    with StreamLoader(shards, 2, 3, shuffle=False) as loader:
        steps = sum(int(b.valid.sum()) for b in loader)
    assert steps == sum(shards.length(i) for i in shards.items())


class _ShardSteps:
    """The shards source read one step at a time (``iter_steps``): the reference for its blocks."""

    block_steps = False

    def __init__(self, src: object) -> None:
        self.src = src

    def __getattr__(self, name: str) -> object:
        return getattr(self.src, name)

    def open(self, item: int, start: int = 0):  # type: ignore[no-untyped-def]
        return iter_steps(self.src, item, start)  # type: ignore[arg-type]


@pytest.mark.slow
@pytest.mark.parametrize(("layout", "boundary"), [("TB", "pack"), ("BT", "pad")])
def test_shards_source_blocks_are_the_exported_rows_and_batch_like_its_steps(
    tmp_path: Path, layout: str, boundary: str
) -> None:
    _export(tmp_path, layout=layout, boundary=boundary)
    shards = load_source("shards", str(tmp_path))
    for sid in shards.items():
        for start in {0, min(3, shards.length(sid) - 1)}:
            blocks = [b["text"] for b in shards.open(sid, start)]
            assert all(1 <= len(b) <= 5 for b in blocks)  # at most one exported row (T=5) per block
            assert sum(map(len, blocks)) == shards.length(sid) - start
    with StreamLoader(shards, 2, 4, seed=3, num_workers=1) as a, StreamLoader(_ShardSteps(shards), 2, 4, seed=3) as b:
        pairs = list(zip(a, b, strict=True))
    assert pairs
    for x, y in pairs:
        assert torch.equal(x["text"], y["text"]) and torch.equal(x.valid, y.valid) and torch.equal(x.stream, y.stream)
