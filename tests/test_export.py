"""Export: shard contents, rollover, determinism, resume, and the refusals."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from _shard_fakes import FIELDS, make_batch

from streamcli.errors import ShardError
from streamcli.shards import ShardReader, ShardWriter, batch_nbytes, export, iter_limit, make_header, verify


def header(*, layout: str = "TB", per_shard: int = 2, compress: bool = False) -> dict:
    nbytes = batch_nbytes(FIELDS, 3, 4)
    return make_header(
        fields=FIELDS,
        batch_size=3,
        time_steps=4,
        layout=layout,
        source={"plugin": "fake", "arg": None, "options": {}},
        loader={"seed": 0},
        shard_bytes=nbytes * per_shard,
        compress=compress,
    )


def files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


@pytest.mark.parametrize("layout", ["TB", "BT"])
@pytest.mark.parametrize("compress", [False, True])
def test_round_trip_is_bit_identical(tmp_path: Path, layout: str, compress: bool) -> None:
    m = export((make_batch(i, layout=layout) for i in range(5)), tmp_path, header(layout=layout, compress=compress))
    assert [s["batches"] for s in m["shards"]] == [2, 2, 1]  # rollover by size
    assert m["batches"] == 5 and verify(tmp_path) == []
    got = list(ShardReader(tmp_path))
    assert len(got) == 5
    for i, b in enumerate(got):
        want = make_batch(i, layout=layout)
        assert b.layout == layout and b.index == i and b.epoch == 0
        for k in want:
            assert torch.equal(b[k], want[k]) and b[k].dtype == want[k].dtype
        for k, v in want.flags().items():
            assert torch.equal(b.flags()[k], v), k


def test_manifest_records_what_decides_the_bytes(tmp_path: Path) -> None:
    export((make_batch(i) for i in range(3)), tmp_path, header())
    m = json.loads((tmp_path / "index.json").read_text())
    assert m["format_version"] == 3 and m["streamcli_version"]
    assert m["fields"][0] == {"name": "frame", "shape": [4, 6, 3], "dtype": "|u1"}
    assert (m["batch_size"], m["time_steps"], m["layout"]) == (3, 4, "TB")
    assert m["source"]["plugin"] == "fake" and m["loader"] == {"seed": 0}
    for s in m["shards"]:
        assert set(s) == {"name", "batches", "bytes", "sha256"}
        assert (tmp_path / s["name"]).stat().st_size == s["bytes"]
    assert not list(tmp_path.glob(".*"))  # no temp or partial files left


def test_shards_are_deterministic_zips_without_timestamps(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    export((make_batch(i) for i in range(3)), a, header())
    export((make_batch(i) for i in range(3)), b, header())
    assert files(a) == files(b)
    with zipfile.ZipFile(a / "shard-00000.npz") as zf:
        assert {i.date_time for i in zf.infolist()} == {(1980, 1, 1, 0, 0, 0)}
        assert zf.namelist()[0] == "data.frame.npy"


def test_resume_after_a_crash_is_byte_identical(tmp_path: Path) -> None:
    full, cut = tmp_path / "full", tmp_path / "cut"
    export((make_batch(i) for i in range(7)), full, header())

    def crashing():
        for i in range(7):
            if i == 5:
                raise RuntimeError("killed")
            yield make_batch(i)

    with pytest.raises(RuntimeError):
        export(crashing(), cut, header())
    assert not (cut / "index.json").exists() and (cut / ".partial.json").exists()
    (cut / ".shard-00002.npz.tmp").write_bytes(b"half a shard")  # what a kill mid-write leaves
    (cut / "shard-00002.npz").write_bytes(b"truncated")  # never renamed normally, but must not be trusted
    w = ShardWriter(cut, header(), mode="resume")
    assert w.skip == 4  # two complete shards of two batches
    del w  # a live writer holds the folder's lock
    export((make_batch(i) for i in range(7)), cut, header(), mode="resume")
    assert files(cut) == files(full)


def test_resume_refuses_other_settings(tmp_path: Path) -> None:
    ShardWriter(tmp_path, header())  # leaves .partial.json
    other = header()
    other["batch_size"] = 9
    with pytest.raises(ShardError, match="batch_size was 3"):
        ShardWriter(tmp_path, other, mode="resume")


def test_refuses_a_non_empty_folder(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(ShardError, match="not empty"):
        ShardWriter(tmp_path, header())
    with pytest.raises(ShardError, match="not part of an export"):
        ShardWriter(tmp_path, header(), mode="overwrite")


def test_overwrite_replaces_a_previous_export(tmp_path: Path) -> None:
    export((make_batch(i) for i in range(5)), tmp_path, header())
    export((make_batch(i) for i in range(2)), tmp_path, header(), mode="overwrite")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["index.json", "shard-00000.npz"]


def test_iter_limit_stops_before_pulling_more() -> None:
    pulled = []

    def epoch(e: int):
        for i in range(3):
            pulled.append((e, i))
            yield make_batch(i, epoch=e)

    out = list(iter_limit((epoch(e) for e in range(5)), 4))
    assert len(out) == 4 and pulled == [(0, 0), (0, 1), (0, 2), (1, 0)]


def test_flipped_byte_fails_verify_and_reader(tmp_path: Path) -> None:
    export((make_batch(i) for i in range(3)), tmp_path, header())
    p = tmp_path / "shard-00001.npz"
    data = bytearray(p.read_bytes())
    data[len(data) // 2] ^= 0x01
    p.write_bytes(bytes(data))
    problems = verify(tmp_path)
    assert len(problems) == 1 and "shard-00001.npz" in problems[0] and "sha256" in problems[0]
    with pytest.raises(ShardError, match=r"shard-00001\.npz.*sha256"):
        list(ShardReader(tmp_path, check=True))  # the default reader trusts the data bytes (see its docs)


def test_verify_lists_every_problem(tmp_path: Path) -> None:
    export((make_batch(i) for i in range(5)), tmp_path, header())
    (tmp_path / "shard-00000.npz").unlink()
    p = tmp_path / "shard-00001.npz"
    p.write_bytes(p.read_bytes()[:100])
    (tmp_path / "shard-00009.npz").write_bytes(b"")
    problems = verify(tmp_path)
    text = "\n".join(problems)
    assert "'shard-00000.npz' is missing" in text
    assert "shard-00001.npz" in text and "bytes" in text
    assert "shard-00009.npz' is on disk but not in the manifest" in text


def _plant(tmp_path: Path, member: str, arr: np.ndarray) -> None:
    """Rewrite shard 0 with ``member`` replaced (pickled if object) and fix its checksum in the manifest."""
    import hashlib

    p = tmp_path / "shard-00000.npz"
    with np.load(p) as npz:
        arrays = {k: npz[k] for k in npz.files}
    arrays[member] = arr
    with open(p, "wb") as f:
        np.savez(f, **arrays)  # allow_pickle is on by default when saving
    m = json.loads((tmp_path / "index.json").read_text())
    m["shards"][0].update(bytes=p.stat().st_size, sha256=hashlib.sha256(p.read_bytes()).hexdigest())
    (tmp_path / "index.json").write_text(json.dumps(m))


def test_pickled_object_array_is_refused(tmp_path: Path) -> None:
    export((make_batch(i) for i in range(2)), tmp_path, header())
    evil = np.empty(2, dtype=object)
    evil[:] = [{"x": 1}, "boom"]
    _plant(tmp_path, "meta.index", evil)
    with pytest.raises(ShardError, match=r"shard-00000\.npz.*pickled"):
        list(ShardReader(tmp_path))
    assert any("pickled" in p for p in verify(tmp_path))


def test_wrong_shape_is_refused(tmp_path: Path) -> None:
    export((make_batch(i) for i in range(2)), tmp_path, header())
    _plant(tmp_path, "data.score", np.zeros((2, 4, 3, 1), np.float32))
    with pytest.raises(ShardError, match=r"data.score is <f4\[2, 4, 3, 1\], the manifest says <f4\[2, 4, 3\]"):
        list(ShardReader(tmp_path))


@pytest.mark.parametrize("name", ["../evil.npz", "/etc/passwd", "sub/shard.npz", ".hidden.npz", "x.txt", 7])
def test_manifest_paths_must_be_plain_names(tmp_path: Path, name: object) -> None:
    export((make_batch(i) for i in range(2)), tmp_path, header())
    m = json.loads((tmp_path / "index.json").read_text())
    m["shards"][0]["name"] = name
    (tmp_path / "index.json").write_text(json.dumps(m))
    with pytest.raises(ShardError, match="unsafe shard name"):
        ShardReader(tmp_path)
    assert any("unsafe shard name" in p for p in verify(tmp_path))


def test_symlink_escaping_the_folder_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "out"
    export((make_batch(i) for i in range(2)), out, header())
    (tmp_path / "outside.npz").write_bytes((out / "shard-00000.npz").read_bytes())
    (out / "shard-00000.npz").unlink()
    (out / "shard-00000.npz").symlink_to(tmp_path / "outside.npz")
    with pytest.raises(ShardError, match="outside"):
        list(ShardReader(out))


def test_missing_manifest_hints_at_resume(tmp_path: Path) -> None:
    ShardWriter(tmp_path, header())
    with pytest.raises(ShardError, match="--resume"):
        ShardReader(tmp_path)
