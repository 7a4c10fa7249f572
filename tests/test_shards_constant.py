"""Format 3 of the shards: a field that holds one value on every real step of a shard (the ``text`` source's
``nbytes`` at ``width=1``) is stored once, so an export of bytes at one byte a step stays near the bytes' size;
replay stays bit-identical, and exports of format 2 still replay."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from _invariants import to_numpy
from _resume import assert_same, run_epochs
from conftest import require_shared
from streamcli_sources.shards import ShardSource

import streamcli
from streamcli import ShardReader, StreamLoader, load_source
from streamcli.shards import MANIFEST, load_manifest, member_names, open_shard, verify
from streamcli.shards.codec import Codec
from streamcli.shards.constant import folded
from streamcli.shards.npz import open_folder_shard
from streamcli.shards.npz_write import sha256_file, write_npz
from streamcli.source import iter_steps

B, T = 8, 128


def text_loader() -> StreamLoader:
    """Bytes at one byte a step, as ``bench_export_size.py`` exports them (smaller: one book, B=8)."""
    book = str(require_shared("text") / "fortunes_literature.txt")
    return StreamLoader(load_source("text", book, width=1), B, T, segment=4096, boundary="pack")


def test_an_export_of_bytes_at_width_1_is_at_most_one_and_a_half_times_the_bytes(tmp_path: Path) -> None:
    raw = (require_shared("text") / "fortunes_literature.txt").stat().st_size
    with text_loader() as loader:
        want = run_epochs(loader, 1)
    with text_loader() as loader:
        summary = streamcli.export(loader, tmp_path, epochs=1)
    m = load_manifest(tmp_path)
    assert m["format_version"] == 3 and verify(tmp_path) == []
    stored = open_folder_shard(tmp_path, m, m["shards"][0])
    assert stored["data.nbytes"].shape == () and int(stored["data.nbytes"]) == 1  # once, not per step
    assert stored["data.text"].shape[1:] == (T, B, 1)  # the text itself still per step
    assert summary.bytes <= 1.5 * raw, f"{summary.bytes} bytes for {raw} bytes of text"
    assert_same(want, [to_numpy(b) for b in ShardReader(tmp_path)], "replay of format 3")
    nbytes = open_shard(tmp_path, m, m["shards"][-1], only=["data.nbytes"])["data.nbytes"]
    assert nbytes.dtype == np.int32 and nbytes.shape[1:] == (T, B)
    last = [b["nbytes"] for b in want[-m["shards"][-1]["batches"] :]]
    assert np.array_equal(nbytes, np.stack(last)) and (nbytes == 0).any()  # its padding rebuilt as zeros
    src = ShardSource(str(tmp_path))  # re-batching it reads the folded field too
    first = b"".join(s["text"][: int(s["nbytes"])].tobytes() for s in iter_steps(src, src.items()[0]))
    assert first == (require_shared("text") / "fortunes_literature.txt").read_bytes()[: len(first)] and first


def as_format_2(out: Path) -> None:
    """Rewrite an export in place as format 2 stored it: every field per step (flags still per run)."""
    m = json.loads((out / MANIFEST).read_text())
    old = {**m, "format_version": 2}
    full = load_manifest(out)
    for entry in m["shards"]:
        arrays = open_folder_shard(out, full, entry)
        steps = open_shard(out, full, entry)
        arrays = {n: np.asarray(steps[n]) if n.startswith("data.") else arrays[n] for n in member_names(old)}
        write_npz(out / entry["name"], arrays, Codec.of(old))
        entry["bytes"], entry["sha256"] = (out / entry["name"]).stat().st_size, sha256_file(out / entry["name"])
    (out / MANIFEST).write_text(json.dumps(old))


def test_an_export_of_format_2_still_replays(tmp_path: Path) -> None:
    with text_loader() as loader:
        want = run_epochs(loader, 1)
    with text_loader() as loader:
        streamcli.export(loader, tmp_path, epochs=1)
    as_format_2(tmp_path)
    m = load_manifest(tmp_path)
    assert m["format_version"] == 2 and open_folder_shard(tmp_path, m, m["shards"][0])["data.nbytes"].ndim == 3
    assert verify(tmp_path) == []
    assert_same(want, [to_numpy(b) for b in ShardReader(tmp_path)], "replay of format 2")


def test_a_format_2_export_may_not_store_a_field_once(tmp_path: Path) -> None:
    with text_loader() as loader:
        streamcli.export(loader, tmp_path, epochs=1)
    m = json.loads((tmp_path / MANIFEST).read_text())
    (tmp_path / MANIFEST).write_text(json.dumps({**m, "format_version": 2}))
    with pytest.raises(streamcli.errors.ShardError, match=r"shard-00000\.npz"):
        list(ShardReader(tmp_path))


def test_a_field_is_folded_only_when_its_bytes_are_the_same_on_every_real_step() -> None:
    valid = np.ones((2, 3, 4), bool)
    valid[1, 2, :] = False
    counts = np.where(valid, 7, 0).astype(np.int32)
    value = folded(counts, valid)
    assert value is not None and value.shape == () and int(value) == 7
    assert folded(np.where(valid, 7, 1).astype(np.int32), valid) is None  # padding that is not zero
    other = counts.copy()
    other[0, 0, 0] = 6
    assert folded(other, valid) is None
    signed = np.where(valid, 0.0, 0.0).astype(np.float32)
    signed[0, 1, 1] = -0.0  # equal to 0.0, not the same bytes
    assert folded(signed, valid) is None
    rows = np.broadcast_to(np.array([1, 2], np.int16), (2, 3, 4, 2)) * valid[..., None]
    got = folded(rows, valid)
    assert got is not None and got.tolist() == [1, 2]
