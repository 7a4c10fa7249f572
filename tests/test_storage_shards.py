"""Exports on object storage (moto's S3 server): write, verify, replay and resume as locally, byte for byte."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from _moto import MotoS3
from _shard_fakes import FIELDS, make_batch

from streamcli.errors import ExportBusyError, ShardError
from streamcli.shards import ShardReader, ShardWriter, batch_nbytes, export, make_header, open_writer, verify
from streamcli.storage.remote import Remote


def header(per_shard: int = 2, compress: bool = False) -> dict:
    return make_header(
        fields=FIELDS, batch_size=3, time_steps=4, layout="TB", source={"plugin": "fake", "arg": None, "options": {}},
        loader={"seed": 0}, shard_bytes=batch_nbytes(FIELDS, 3, 4) * per_shard, compress=compress,
    )  # fmt: skip


def objects(url: str) -> dict[str, bytes]:
    r = Remote(url)
    return {n: r.read(n) for n in sorted(r.listing())}


def files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


@pytest.mark.parametrize("compress", [False, True])
def test_an_export_to_s3_is_byte_identical_to_a_local_one_and_replays(
    tmp_path: Path, bucket: str, compress: bool
) -> None:
    url = f"{bucket}/run"
    export((make_batch(i) for i in range(5)), tmp_path, header(compress=compress))
    m = export((make_batch(i) for i in range(5)), url, header(compress=compress))
    assert objects(url) == files(tmp_path)  # shards and index.json; no lock or partial record left
    assert m["batches"] == 5 and verify(url) == []
    got = list(ShardReader(url))
    assert [b.index for b in got] == list(range(5))
    for b, want in zip(got, (make_batch(i) for i in range(5)), strict=True):
        for k in want:
            assert torch.equal(b[k], want[k])
        for k, v in want.flags().items():
            assert torch.equal(b.flags()[k], v), k


def test_resume_on_s3_after_a_crash_is_byte_identical(tmp_path: Path, bucket: str) -> None:
    url = f"{bucket}/cut"
    export((make_batch(i) for i in range(7)), tmp_path, header())

    def crashing():
        for i in range(7):
            if i == 5:
                raise RuntimeError("killed")
            yield make_batch(i)

    with pytest.raises(RuntimeError):
        export(crashing(), url, header())
    left = objects(url)
    assert "index.json" not in left and ".partial.json" in left
    Remote(url).write("shard-00002.npz", b"uploaded but never recorded")  # a kill between upload and record
    w = open_writer(url, header(), mode="resume")
    assert w.skip == 4  # two complete shards of two batches
    w._release()
    export((make_batch(i) for i in range(7)), url, header(), mode="resume")
    assert objects(url) == files(tmp_path)


def test_a_second_export_to_the_same_url_is_refused_naming_the_first(bucket: str) -> None:
    url = f"{bucket}/busy"
    first = open_writer(url, header())
    try:
        with pytest.raises(ExportBusyError, match=r"being written by another export \(pid \d+"):
            open_writer(url, header(), mode="overwrite")
        assert "writing" in verify(url)[0]
    finally:
        first._release()
    open_writer(url, header(), mode="overwrite")._release()  # free again


def test_a_lock_left_by_a_dead_process_is_taken_over(bucket: str) -> None:
    import socket

    url = f"{bucket}/dead"
    dead = {"pid": 2**22 + 12345, "host": socket.gethostname(), "started": "then", "token": "x", "beat": 9e12}
    Remote(url).write(".streamcli.lock", json.dumps(dead).encode())
    export((make_batch(i) for i in range(2)), url, header())
    assert verify(url) == []


def test_a_writer_whose_lock_was_taken_stops_before_its_next_shard(bucket: str) -> None:
    url = f"{bucket}/taken"
    w = open_writer(url, header(per_shard=1))
    Remote(url).write(".streamcli.lock", b'{"token": "someone else"}')
    with pytest.raises(ExportBusyError, match="took the lock over"):
        with w:
            for i in range(3):
                w.write(make_batch(i))
    assert "shard-00000.npz" not in Remote(url).listing()


def test_verify_on_s3_lists_a_corrupted_shard_and_a_stray_object(bucket: str) -> None:
    url = f"{bucket}/bad"
    export((make_batch(i) for i in range(3)), url, header())
    r = Remote(url)
    data = bytearray(r.read("shard-00000.npz"))
    data[-100] ^= 0xFF
    r.write("shard-00000.npz", bytes(data))
    r.write("notes.txt", b"mine")
    problems = verify(url)
    assert any("shard-00000.npz" in p and "sha256" in p for p in problems)
    assert any("'notes.txt'" in p and "not in the manifest" in p for p in problems)


def test_a_missing_manifest_on_s3_is_a_shard_error_naming_the_url(bucket: str) -> None:
    with pytest.raises(ShardError, match=rf"{bucket}/none/index.json' does not exist"):
        ShardReader(f"{bucket}/none")


def test_a_new_export_refuses_a_non_empty_url(bucket: str) -> None:
    Remote(f"{bucket}/full").write("notes.txt", b"mine")
    with pytest.raises(ShardError, match="not empty"):
        open_writer(f"{bucket}/full", header())
    with pytest.raises(ShardError, match="not part of an export"):
        open_writer(f"{bucket}/full", header(), mode="overwrite")


def test_the_local_writer_is_used_for_file_urls(tmp_path: Path) -> None:
    from streamcli.shards.folder_writer import FolderPlace

    w = open_writer(f"file://{tmp_path}/run", header())
    assert isinstance(w.place, FolderPlace) and w.place.path == tmp_path / "run"
    w._release()


def test_server_stub_is_reachable(moto_s3: MotoS3) -> None:
    assert moto_s3.endpoint.startswith("http://127.0.0.1:")


def test_without_conditional_puts_the_lock_still_admits_one_export(
    bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from streamcli.storage.remote import NoConditionalPut

    real = Remote.write

    def no_create(self: Remote, name: str, data: bytes, *, exclusive: bool = False) -> None:
        if exclusive:
            raise NoConditionalPut(name)
        real(self, name, data)

    monkeypatch.setattr(Remote, "write", no_create)
    url = f"{bucket}/plain"
    first = open_writer(url, header())
    try:
        with pytest.raises(ExportBusyError, match="being written by another export"):
            open_writer(url, header(), mode="overwrite")
    finally:
        first._release()
    assert ".streamcli.lock" not in Remote(url).listing()


def test_a_shard_writer_given_a_url_writes_there(bucket: str) -> None:
    from streamcli.shards.remote_writer import RemotePlace

    with ShardWriter(f"{bucket}/direct", header()) as w:
        assert isinstance(w.place, RemotePlace)
        w.write(make_batch(0))
    assert verify(f"{bucket}/direct") == []


def test_a_writer_dropped_without_close_frees_the_url(bucket: str) -> None:
    import gc

    url = f"{bucket}/dropped"
    w = open_writer(url, header())
    del w
    gc.collect()
    assert ".streamcli.lock" not in Remote(url).listing()
    open_writer(url, header(), mode="overwrite")._release()


def test_the_heartbeat_keeps_the_lock_fresh_and_notices_a_takeover(bucket: str) -> None:
    from streamcli.shards.remote_lock import RemoteLock, read_holder

    lock = RemoteLock(Remote(f"{bucket}/beat"))
    try:
        before = read_holder(lock.remote)["beat"]  # type: ignore[index]
        assert lock.refresh() and read_holder(lock.remote)["beat"] > before  # type: ignore[index]
        Remote(f"{bucket}/beat").write(".streamcli.lock", b'{"token": "other"}')
        assert not lock.refresh() and "took the lock over" in lock.lost
    finally:
        lock.release()
    assert read_holder(lock.remote) == {"token": "other"}  # a lock that is not ours is never removed
