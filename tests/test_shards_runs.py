"""Format 2 of the shards: flags stored per run and integers stored narrow, so that an export of a text or token
corpus stays near its size; replay stays bit-identical, and exports of format 1 (per-step flags) still replay."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from _invariants import to_numpy
from _resume import assert_same, run_epochs
from conftest import require_shared
from streamcli_sources.shards import ShardSource

import streamcli
from streamcli import Batch, StreamLoader, load_source
from streamcli.errors import ShardError
from streamcli.shards import MANIFEST, ShardReader, export, load_manifest, make_header, member_names, open_shard, verify
from streamcli.shards.codec import Codec
from streamcli.shards.npz import open_folder_shard
from streamcli.shards.npz_write import sha256_file, write_npz
from streamcli.source import Field, iter_steps

B, T = 4, 16


def fortunes() -> str:
    return str(require_shared("text") / "fortunes_literature.txt")


def text_loader(width: int = 16) -> StreamLoader:
    return StreamLoader(load_source("text", fortunes(), width=width), B, T, segment=64, boundary="pack")


def replayed(out: Path) -> list[dict[str, np.ndarray]]:
    return [to_numpy(b) for b in ShardReader(out)]


def test_flags_are_stored_per_run_and_replay_bit_identically(tmp_path: Path) -> None:
    with text_loader() as loader:
        want = run_epochs(loader, 1)
    with text_loader() as loader:
        streamcli.export(loader, tmp_path, epochs=1)
    m = load_manifest(tmp_path)
    assert m["format_version"] == 3 and verify(tmp_path) == []
    stored = open_folder_shard(tmp_path, m, m["shards"][0])
    assert not any(k.startswith("flag.") and k != "flag.reset" for k in stored)  # no per-step flags on disk
    steps = stored["data.text"].shape[0] * T * B
    assert 0 < len(stored["run.length"]) < steps / 8 and int(stored["run.length"].sum()) == steps
    assert stored["data.nbytes"].dtype == np.uint8  # int32 byte counts of at most 16, stored in a byte
    assert_same(want, replayed(tmp_path), "replay of format 2")
    assert open_shard(tmp_path, m, m["shards"][0])["data.nbytes"].dtype == np.int32


def test_an_export_of_text_is_at_most_one_and_a_half_times_its_bytes(tmp_path: Path) -> None:
    raw = Path(fortunes()).stat().st_size
    with text_loader(width=16) as loader:
        summary = streamcli.export(loader, tmp_path, epochs=1)
    assert summary.useful_share > 0.95
    assert summary.bytes <= 1.5 * raw, f"{summary.bytes} bytes for {raw} bytes of text"


def token_batch(i: int, layout: str = "TB") -> Batch:
    """A batch of int64 ids below 50,000 (a BPE vocabulary), two streams a row and padding at the end."""
    rng = np.random.default_rng(i)
    shape = (T, B) if layout == "TB" else (B, T)
    pos = np.broadcast_to(np.arange(T)[:, None] if layout == "TB" else np.arange(T)[None, :], shape).copy()
    stream = np.broadcast_to(np.arange(B)[None, :] if layout == "TB" else np.arange(B)[:, None], shape).copy()
    valid = np.ones(shape, bool)
    cut = (slice(T - 3, None), 0) if layout == "TB" else (0, slice(T - 3, None))
    valid[cut], stream[cut], pos[cut] = False, -1, -1
    first = pos == 0
    return Batch(
        data={"tokens": torch.from_numpy(rng.integers(0, 50_000, (*shape, 1)))},
        is_first=torch.from_numpy(first),
        reset=torch.from_numpy(first[0] if layout == "TB" else first[:, 0]),
        valid=torch.from_numpy(valid),
        stream=torch.from_numpy(stream),
        position=torch.from_numpy(pos + 100 * i),
        replayed=torch.zeros(shape, dtype=torch.bool),
        epoch=0,
        index=i,
        layout=layout,
    )


@pytest.mark.parametrize("layout", ["TB", "BT"])
def test_token_ids_are_stored_in_two_bytes_and_read_back_as_int64(tmp_path: Path, layout: str) -> None:
    fields = (Field("tokens", (1,), "int64"),)
    head = make_header(
        fields=fields,
        batch_size=B,
        time_steps=T,
        layout=layout,
        source={},
        loader={},
        shard_bytes=1 << 20,
        compress=False,
    )
    batches = [token_batch(i, layout) for i in range(6)]
    m = export(iter(batches), tmp_path, head)
    stored = open_folder_shard(tmp_path, load_manifest(tmp_path), m["shards"][0])
    assert stored["data.tokens"].dtype == np.uint16
    assert sum(s["bytes"] for s in m["shards"]) < 1.5 * 2 * 6 * T * B + 8192  # ids as a uint16 file, and headers
    got = list(ShardReader(tmp_path))
    for a, b in zip(batches, got, strict=True):
        assert b["tokens"].dtype == torch.int64 and torch.equal(a["tokens"], b["tokens"])
        for k, v in a.flags().items():
            assert torch.equal(b.flags()[k], v), k


def as_format_1(out: Path) -> None:
    """Rewrite an export in place as format 1 laid it out: every flag per step, every member in its own dtype."""
    m = json.loads((out / MANIFEST).read_text())
    old = {**m, "format_version": 1}
    full = load_manifest(out)
    for entry in m["shards"]:
        arrays = open_shard(out, full, entry)
        path = out / entry["name"]
        write_npz(path, {n: np.ascontiguousarray(arrays[n]) for n in member_names(old)}, Codec.of(old))
        entry["bytes"], entry["sha256"] = path.stat().st_size, sha256_file(path)
    (out / MANIFEST).write_text(json.dumps(old))


@pytest.mark.parametrize("compress", ["none", "deflate"])
def test_an_export_of_format_1_still_replays(tmp_path: Path, compress: str) -> None:
    with text_loader() as loader:
        want = run_epochs(loader, 1)
    with text_loader() as loader:
        streamcli.export(loader, tmp_path, epochs=1, compress=compress)
    as_format_1(tmp_path)
    m = load_manifest(tmp_path)
    assert m["format_version"] == 1 and "flag.valid" in open_folder_shard(tmp_path, m, m["shards"][0])
    assert verify(tmp_path) == []
    assert_same(want, replayed(tmp_path), "replay of format 1")
    src = ShardSource(str(tmp_path))  # the shards source reads it too
    item = src.items()[0]
    first = b"".join(s["text"][: int(s["nbytes"])].tobytes() for s in iter_steps(src, item))
    assert first == Path(fortunes()).read_bytes()  # its segments, joined back into the whole file


def test_runs_that_leave_a_step_out_are_refused(tmp_path: Path) -> None:
    head = make_header(
        fields=(Field("tokens", (1,), "int64"),),
        batch_size=B,
        time_steps=T,
        layout="TB",
        source={},
        loader={},
        shard_bytes=1 << 20,
        compress=False,
    )
    m = export(iter([token_batch(0), token_batch(1)]), tmp_path, head)
    path = tmp_path / m["shards"][0]["name"]
    full = load_manifest(tmp_path)
    arrays = open_folder_shard(tmp_path, full, m["shards"][0])
    arrays = {n: np.array(a) for n, a in arrays.items()}
    arrays["run.length"][0] -= 1  # one step of the first run is covered by no run
    write_npz(path, arrays, Codec.of(full))
    with pytest.raises(ShardError, match="do not cover each of its steps once, in order"):
        list(ShardReader(tmp_path))
