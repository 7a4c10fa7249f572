"""Shards: failures while writing leave nothing half-done, finishing is atomic, and replay maps safely."""

from __future__ import annotations

import errno
import gc
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from _shard_fakes import FIELDS, make_batch
from typer.testing import CliRunner

from streamcli.batch import FLAG_DTYPES, FLAGS
from streamcli.cli import app
from streamcli.errors import ShardError
from streamcli.shards import (
    PARTIAL,
    ShardReader,
    ShardWriter,
    batch_nbytes,
    export,
    load_manifest,
    make_header,
    open_shard,
    verify,
)
from streamcli.shards.npz import open_folder_shard
from streamcli.shards.records import read_partial, write_partial

runner = CliRunner()
TINY = ["-b", "2", "-t", "4", "-w", "0"]


def header(*, per_shard: int = 2, compress: bool | str = False) -> dict[str, Any]:
    return make_header(
        fields=FIELDS,
        batch_size=3,
        time_steps=4,
        layout="TB",
        source={"plugin": "fake", "arg": None, "options": {}},
        loader={"seed": 0},
        shard_bytes=batch_nbytes(FIELDS, 3, 4) * per_shard,
        compress=compress,
    )


def files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def temps(d: Path) -> list[str]:
    return [p.name for p in d.iterdir() if p.name.endswith(".tmp")]


def test_flag_dtypes_are_declared_once_next_to_flags() -> None:
    assert tuple(FLAG_DTYPES) == FLAGS
    assert (
        make_header(
            fields=FIELDS, batch_size=1, time_steps=1, layout="TB", source={}, loader={}, shard_bytes=1, compress=False
        )["flags"]
        == FLAG_DTYPES
    )


@pytest.mark.parametrize("compress", [False, True, "zstd"])
def test_disk_full_leaves_no_temp_file_and_resumes_byte_identical(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, compress: bool | str
) -> None:
    full, cut = tmp_path / "full", tmp_path / "cut"
    export((make_batch(i) for i in range(7)), full, header(compress=compress))
    real = np.lib.format.write_array
    calls = [0]

    def write_array(fp: Any, arr: np.ndarray, **kw: Any) -> None:
        calls[0] += 1
        if calls[0] > 12:  # the second shard, part-way through its members
            fp.write(b"\0" * 100)
            raise OSError(errno.ENOSPC, "No space left on device")
        real(fp, arr, **kw)

    monkeypatch.setattr(np.lib.format, "write_array", write_array)
    with pytest.raises(ShardError, match=r"No space left on device.*--resume"):
        export((make_batch(i) for i in range(7)), cut, header(compress=compress))
    assert temps(cut) == []
    assert sorted(p.name for p in cut.iterdir()) == [PARTIAL, "shard-00000.npz"]
    monkeypatch.setattr(np.lib.format, "write_array", real)
    export((make_batch(i) for i in range(7)), cut, header(compress=compress), mode="resume")
    assert files(cut) == files(full)


def test_failed_manifest_write_leaves_no_temp_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = os.replace

    def replace(src: Any, dst: Any) -> None:
        if Path(dst).name == "index.json":
            raise OSError(errno.ENOSPC, "No space left on device")
        real(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(OSError, match="No space"):
        export((make_batch(i) for i in range(3)), tmp_path, header())
    assert temps(tmp_path) == [] and not (tmp_path / "index.json").exists()
    assert (tmp_path / PARTIAL).exists()  # still resumable


def test_a_kill_after_the_manifest_leaves_nothing_that_confuses(tmp_path: Path) -> None:
    export((make_batch(i) for i in range(5)), tmp_path, header())
    finished = files(tmp_path)
    write_partial(tmp_path, header(), [])  # what a kill between index.json and removing .partial.json leaves
    (tmp_path / ".shard-00009.npz.tmp").write_bytes(b"half")
    assert len(list(ShardReader(tmp_path))) == 5  # index.json is the commit point: readers ignore the rest
    problems = verify(tmp_path)
    assert any(PARTIAL in p and "--resume removes it" in p for p in problems)
    assert any(".shard-00009.npz.tmp" in p and "--resume removes it" in p for p in problems)
    w = ShardWriter(tmp_path, header(), mode="resume")
    assert w.complete and w.skip == 0
    assert files(tmp_path) == finished  # resume said "complete" and tidied up
    assert export((make_batch(i) for i in range(5)), tmp_path, header(), mode="resume")["batches"] == 5
    assert files(tmp_path) == finished and verify(tmp_path) == []


def test_cli_resume_of_a_complete_export_says_so_and_tidies(books: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = ["export", "text", str(books), str(out), *TINY, "-s", "width=8"]
    assert runner.invoke(app, args).exit_code == 0
    (out / PARTIAL).write_text("{}")
    result = runner.invoke(app, [*args, "--resume"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "already a complete export" in text and "stale .partial.json" in text
    assert not (out / PARTIAL).exists()


def test_cli_verify_reports_leftovers_without_removing_them_and_reports_unknown_files(
    books: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    assert runner.invoke(app, ["export", "text", str(books), str(out), *TINY, "-s", "width=8"]).exit_code == 0
    (out / PARTIAL).write_text("{}")
    result = runner.invoke(app, ["verify", str(out)])
    assert result.exit_code == 1, result.output
    assert "--resume removes it" in " ".join(result.output.split()) and (out / PARTIAL).exists()
    (out / PARTIAL).unlink()
    (out / "notes.txt").write_text("mine")
    (out / "sub").mkdir()
    result = runner.invoke(app, ["verify", str(out)])
    assert result.exit_code == 1
    assert "file 'notes.txt' is on disk but not in the manifest" in result.output
    assert "folder 'sub' is on disk but not in the manifest" in result.output


def test_verify_reports_every_file_the_manifest_does_not_name(tmp_path: Path) -> None:
    export((make_batch(i) for i in range(3)), tmp_path, header())
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / ".hidden").write_text("")
    (tmp_path / "shard-00007.npz").write_bytes(b"")
    text = "\n".join(verify(tmp_path))
    for name in ("notes.txt", ".hidden", "shard-00007.npz"):
        assert f"{name}' is on disk but not in the manifest" in text


def test_cli_batches_beyond_one_epoch_runs_more_epochs(books: Path, tmp_path: Path) -> None:
    base = ["export", "text", str(books), *TINY, "-s", "width=8"]
    assert runner.invoke(app, [*base, str(tmp_path / "one")]).exit_code == 0
    per_epoch = load_manifest(tmp_path / "one")["batches"]
    n = 2 * per_epoch + 1
    result = runner.invoke(app, [*base, str(tmp_path / "many"), "--batches", str(n)])
    assert result.exit_code == 0, result.output
    assert f"wrote {n} batches" in result.output
    epochs = {b.epoch for b in ShardReader(tmp_path / "many")}
    assert epochs == {0, 1, 2}
    result = runner.invoke(app, [*base, str(tmp_path / "capped"), "--batches", str(n), "--epochs", "1"])
    assert result.exit_code == 0 and load_manifest(tmp_path / "capped")["batches"] == per_epoch


def test_export_help_says_what_batches_does() -> None:
    result = runner.invoke(app, ["export", "--help"])
    assert result.exit_code == 0
    assert "as many epochs as" in " ".join(result.output.replace("│", " ").split())


def test_state_of_each_shards_last_batch_is_kept_for_resume(tmp_path: Path) -> None:
    def crashing():  # type: ignore[no-untyped-def]
        for i in range(7):
            if i == 5:
                raise RuntimeError("killed")
            yield i

    with pytest.raises(RuntimeError), ShardWriter(tmp_path, header()) as w:
        for i in crashing():
            w.write(make_batch(i), state={"after": i})
    partial = read_partial(tmp_path)
    assert partial is not None
    assert [r["state"] for r in partial[1] or []] == [{"after": 1}, {"after": 3}]
    w = ShardWriter(tmp_path, header(), mode="resume")
    assert w.skip == 4 and w.resume_states == [{"after": 1}, {"after": 3}]


def test_a_shard_renamed_but_never_recorded_is_rewritten(tmp_path: Path) -> None:
    full, cut = tmp_path / "full", tmp_path / "cut"
    export((make_batch(i) for i in range(5)), full, header())
    with pytest.raises(RuntimeError), ShardWriter(cut, header()) as w:
        for i in range(4):
            w.write(make_batch(i))
        raise RuntimeError("killed")
    header_, records = read_partial(cut) or ({}, None)
    write_partial(cut, header_, (records or [])[:1])  # the kill landed between shard 1's rename and record
    assert ShardWriter(cut, header(), mode="resume").skip == 2
    export((make_batch(i) for i in range(5)), cut, header(), mode="resume")
    assert files(cut) == files(full)


def test_mapped_batches_outlive_the_reader_and_never_write_the_file(tmp_path: Path) -> None:
    export((make_batch(i) for i in range(3)), tmp_path, header())
    before = files(tmp_path)
    frames = [b["frame"] for b in ShardReader(tmp_path)]
    gc.collect()
    for i, f in enumerate(frames):
        assert torch.equal(f, make_batch(i)["frame"])
    frames[0].zero_()  # copy-on-write: the tensor is writable and the shard stays as it was
    assert files(tmp_path) == before


def test_members_are_aligned_for_mapping(tmp_path: Path) -> None:
    export((make_batch(i) for i in range(3)), tmp_path, header())
    m = load_manifest(tmp_path)
    stored = open_folder_shard(tmp_path, m, m["shards"][0])  # the members as the file holds them (runs, not flags)
    assert all(a.ctypes.data % 64 == 0 for a in stored.values()) and "run.length" in stored
    arrays = open_shard(tmp_path, m, m["shards"][0])
    assert isinstance(arrays["data.frame"].base, __import__("mmap").mmap)


def test_a_truncated_shard_raises_naming_it(tmp_path: Path) -> None:
    export((make_batch(i) for i in range(3)), tmp_path, header())
    p = tmp_path / "shard-00000.npz"
    p.write_bytes(p.read_bytes()[:-10])
    with pytest.raises(ShardError, match=r"shard 'shard-00000\.npz'"):
        list(ShardReader(tmp_path))
    m = json.loads((tmp_path / "index.json").read_text())
    m["shards"][0]["bytes"] = p.stat().st_size  # a manifest that agrees: the zip structure still tells
    (tmp_path / "index.json").write_text(json.dumps(m))
    with pytest.raises(ShardError, match=r"shard 'shard-00000\.npz' is truncated or corrupted"):
        list(ShardReader(tmp_path))
