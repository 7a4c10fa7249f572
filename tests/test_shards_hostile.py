"""Hostile or odd export folders: refused with a ShardError naming the file, never hanging, never allocating what a
shard only claims, and never changing anything the writer did not make."""

from __future__ import annotations

import io
import json
import os
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from streamcli_sources.shards import ShardSource
from typer.testing import CliRunner

from streamcli import ShardReader, StreamLoader, load_source
from streamcli.cli import app
from streamcli.errors import ShardError
from streamcli.shards import MANIFEST, PARTIAL, ShardWriter, export, load_manifest, make_header, verify
from streamcli.shards.npz_write import complete_batches, sha256_file
from streamcli.shards.records import read_partial

TEXTS = ["the quick brown fox jumps", "over the lazy dog", "a", "streams of bytes, one step at a time!"]
runner = CliRunner()


def _header(loader: StreamLoader, compress: bool) -> dict[str, Any]:
    return make_header(
        fields=loader.fields, batch_size=3, time_steps=5, layout="TB", source={}, loader={"seed": 1},
        shard_bytes=1500, compress=compress,
        streams=[loader.stream_name(i) for i in range(loader.num_streams)],
        stream_lengths=[loader.stream_length(i) for i in range(loader.num_streams)],
    )  # fmt: skip


def make_export(out: Path, *, compress: bool = False, stop: int | None = None) -> None:
    """A real export of TEXTS; ``stop`` ends it with an error after that many batches (an interrupted one)."""
    with StreamLoader(load_source("text", TEXTS, width=4), 3, 5, seed=1) as loader:
        header = _header(loader, compress)
        if stop is None:
            export(iter(loader), out, header)
            return
        with pytest.raises(RuntimeError), ShardWriter(out, header) as w:
            for i, b in enumerate(loader):
                if i == stop:
                    raise RuntimeError("killed")
                w.write(b)


def files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def edit_manifest(out: Path, **changes: Any) -> None:
    m = json.loads((out / MANIFEST).read_text())
    m.update(changes)
    (out / MANIFEST).write_text(json.dumps(m))


# verify changes nothing; cleanup touches only the writer's own temporary names


def test_verify_changes_nothing_and_keeps_a_users_tmp_file(tmp_path: Path) -> None:
    make_export(tmp_path)
    (tmp_path / ".notes.tmp").write_text("mine")
    (tmp_path / PARTIAL).write_text("{}")  # a kill while finishing: reported, not removed
    before = files(tmp_path)
    problems = verify(tmp_path)
    assert any(".notes.tmp" in p for p in problems) and any(PARTIAL in p for p in problems)
    result = runner.invoke(app, ["verify", str(tmp_path)])
    assert result.exit_code == 1, result.output
    assert files(tmp_path) == before


def test_resume_and_overwrite_remove_only_the_writers_temporary_files(tmp_path: Path) -> None:
    make_export(tmp_path, stop=1)
    (tmp_path / ".notes.tmp").write_text("mine")
    (tmp_path / ".shard-00009.npz.tmp").write_bytes(b"half")  # the writer's own: removed
    header = read_partial(tmp_path)[0]  # type: ignore[index]
    w = ShardWriter(tmp_path, header, mode="resume")
    del w
    assert (tmp_path / ".notes.tmp").read_text() == "mine"
    assert not (tmp_path / ".shard-00009.npz.tmp").exists()
    with pytest.raises(ShardError, match=r"not part of an export \(e.g. '.notes.tmp'\)"):
        ShardWriter(tmp_path, header, mode="overwrite")  # refused rather than deleting it
    assert (tmp_path / ".notes.tmp").read_text() == "mine"


# hostile manifests


def test_a_symlinked_manifest_pointing_outside_is_refused(tmp_path: Path) -> None:
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    make_export(out)
    elsewhere.mkdir()
    (out / MANIFEST).rename(elsewhere / MANIFEST)
    (out / MANIFEST).symlink_to(elsewhere / MANIFEST)
    with pytest.raises(ShardError, match="outside the export folder"):
        load_manifest(out)
    with pytest.raises(ShardError, match="outside the export folder"):
        ShardReader(out)
    assert any("outside the export folder" in p for p in verify(out))


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"batches": "3"}, r"index.json'?: batches must be a non-negative integer, found '3'"),
        ({"batches": 2.5}, "batches must be a non-negative integer"),
        ({"batch_size": True}, "batch_size must be a positive integer"),
        ({"streams": [1, 2]}, "streams must be a list of names"),
        ({"stream_lengths": ["x"]}, "stream_lengths must be a list of integers or nulls"),
        ({"fields": [{"name": "x", "shape": [-1], "dtype": "uint8"}]}, "bad field description"),
    ],
)
def test_a_manifest_of_wrong_types_is_a_shard_error_naming_the_field(
    tmp_path: Path, changes: dict[str, Any], match: str
) -> None:
    make_export(tmp_path)
    edit_manifest(tmp_path, **changes)
    with pytest.raises(ShardError, match=match):
        load_manifest(tmp_path)


def test_a_non_integer_shard_entry_is_a_shard_error(tmp_path: Path) -> None:
    make_export(tmp_path)
    m = json.loads((tmp_path / MANIFEST).read_text())
    m["shards"][0]["batches"] = "two"
    (tmp_path / MANIFEST).write_text(json.dumps(m))
    with pytest.raises(ShardError, match=r"shard 'shard-00000.npz': batches must be a non-negative integer"):
        load_manifest(tmp_path)


def test_deeply_nested_json_is_a_shard_error(tmp_path: Path) -> None:
    (tmp_path / MANIFEST).write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ShardError, match=r"index.json' is nested too deeply"):
        load_manifest(tmp_path)
    assert verify(tmp_path) and "nested too deeply" in verify(tmp_path)[0]


def test_verify_checks_streams_and_stream_lengths_against_the_shards(tmp_path: Path) -> None:
    make_export(tmp_path)
    assert verify(tmp_path) == []
    m = json.loads((tmp_path / MANIFEST).read_text())
    edit_manifest(tmp_path, streams=m["streams"][:2], stream_lengths=m["stream_lengths"][:2])
    assert any("valid steps of stream" in p and "streams are 0..1" in p for p in verify(tmp_path))
    edit_manifest(tmp_path, streams=m["streams"], stream_lengths=[1] * len(m["stream_lengths"]))
    assert any("but stream_lengths says 1 steps" in p for p in verify(tmp_path))
    edit_manifest(tmp_path, stream_lengths=m["stream_lengths"][:1])
    assert any("4 streams but 1 stream_lengths" in p for p in verify(tmp_path))


# zip bombs and declared sizes


def _bomb(out: Path, member: str, shape: tuple[int, ...]) -> None:
    """Rewrite shard 0 so that ``member``'s .npy header declares ``shape`` (uint8 zeros, deflated to almost nothing),
    and fix the manifest's size and checksum so that only the shape is wrong."""
    path = out / "shard-00000.npz"
    with zipfile.ZipFile(path) as zf:
        members = {i.filename: zf.read(i) for i in zf.infolist()}
    head = io.BytesIO()
    np.lib.format.write_array_header_2_0(head, {"descr": "|u1", "fortran_order": False, "shape": shape})
    n, chunk = int(np.prod(shape)), bytes(1 << 20)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            if name != f"{member}.npy":
                zf.writestr(name, data)
        # a member whose header says `shape`; its data is n zero bytes, really there
        info = zipfile.ZipInfo(f"{member}.npy")
        info.compress_type = zipfile.ZIP_DEFLATED
        with zf.open(info, "w", force_zip64=True) as f:
            f.write(head.getvalue())
            for _ in range(n >> 20):
                f.write(chunk)
    m = json.loads((out / MANIFEST).read_text())
    m["shards"][0].update(bytes=path.stat().st_size, sha256=sha256_file(path))
    (out / MANIFEST).write_text(json.dumps(m))


@pytest.fixture
def inflated(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Bytes decompressed from zip members, counted."""
    count = [0]
    real = zipfile.ZipExtFile.read

    def read(self: zipfile.ZipExtFile, n: int = -1) -> bytes:
        data = real(self, n)
        count[0] += len(data)
        return data

    monkeypatch.setattr(zipfile.ZipExtFile, "read", read)
    return count


@pytest.mark.timeout(60)
def test_a_member_declaring_more_than_the_manifest_is_refused_before_it_is_inflated(
    tmp_path: Path, inflated: list[int]
) -> None:
    make_export(tmp_path, compress=True)
    _bomb(tmp_path, "run.length", (64, 1024, 1024))  # 64 MiB of zeros in about 64 kB
    assert (tmp_path / "shard-00000.npz").stat().st_size < 1 << 20
    inflated[0] = 0
    problems = verify(tmp_path)
    assert any("run.length is |u1[64, 1024, 1024], the manifest says <i8" in p for p in problems)
    with pytest.raises(ShardError, match=r"run.length is"):
        list(ShardReader(tmp_path))
    with pytest.raises(ShardError, match=r"run.length is"):
        ShardSource(str(tmp_path))
    assert inflated[0] < 1 << 20  # headers and the small members only, never the 64 MiB


@pytest.mark.timeout(60)
def test_resume_checks_a_shard_by_its_headers_before_inflating_it(tmp_path: Path, inflated: list[int]) -> None:
    make_export(tmp_path, compress=True)
    m = json.loads((tmp_path / MANIFEST).read_text())
    shard = tmp_path / "shard-00000.npz"
    assert complete_batches(shard, m) == m["shards"][0]["batches"]
    _bomb(tmp_path, "meta.index", (64 << 20,))  # claims 64 Mi batches (64 MiB of zeros in about 64 kB)
    inflated[0] = 0
    assert complete_batches(shard, m) == -1  # so resume rewrites it
    assert inflated[0] < 1 << 20


def test_a_manifest_declaring_more_than_its_shards_can_hold_is_refused(tmp_path: Path) -> None:
    make_export(tmp_path, compress=True)
    m = json.loads((tmp_path / MANIFEST).read_text())
    m["fields"][0]["shape"] = [1 << 20]  # about 1000x more than deflate can expand the shard's bytes to
    (tmp_path / MANIFEST).write_text(json.dumps(m))
    match = r"declares \d+ bytes of arrays, more than its \d+ bytes can hold deflated \(at most 1032x\)"
    with pytest.raises(ShardError, match=match):
        load_manifest(tmp_path)
    with pytest.raises(ShardError, match=match):
        ShardSource(str(tmp_path))
    assert any("at most 1032x" in p for p in verify(tmp_path))
    k = m["shards"][0]["batches"]
    m["fields"][0]["shape"] = [(3 << 30) // (15 * k)]  # 3 GiB in 3.2 MB: just possible for deflate, but a bomb
    m["shards"][0]["bytes"] = 3_200_000
    (tmp_path / MANIFEST).write_text(json.dumps(m))
    with pytest.raises(ShardError, match=r"shards over 1 GiB may inflate at most 100x \(a zip bomb\?\)"):
        load_manifest(tmp_path)
    make_export(tmp_path / "plain")
    edit_manifest(tmp_path / "plain", batch_size=300)  # 100x the rows the files hold, uncompressed
    with pytest.raises(ShardError, match="can hold uncompressed"):
        load_manifest(tmp_path / "plain")


# named pipes never hang a reader


@pytest.mark.timeout(20)
@pytest.mark.parametrize("compress", [False, True])
def test_a_named_pipe_as_a_shard_is_refused_without_hanging(tmp_path: Path, compress: bool) -> None:
    make_export(tmp_path, compress=compress)
    (tmp_path / "shard-00000.npz").unlink()
    os.mkfifo(tmp_path / "shard-00000.npz")
    assert any("not a regular file" in p for p in verify(tmp_path))
    with pytest.raises(ShardError, match=r"shard 'shard-00000.npz' is not a regular file"):
        list(ShardReader(tmp_path))
    with pytest.raises(ShardError, match="not a regular file"):
        ShardSource(str(tmp_path))


@pytest.mark.timeout(20)
@pytest.mark.parametrize("name", [MANIFEST, PARTIAL])
def test_a_named_pipe_as_the_manifest_is_refused_without_hanging(tmp_path: Path, name: str) -> None:
    make_export(tmp_path)
    (tmp_path / name).unlink(missing_ok=True)
    os.mkfifo(tmp_path / name)
    if name == MANIFEST:
        assert "not a regular file" in verify(tmp_path)[0]
        for make in (ShardReader, ShardSource):
            with pytest.raises(ShardError, match=r"index.json' is not a regular file"):
                make(str(tmp_path))
    else:
        with pytest.raises(ShardError, match=r"partial.json' is not a regular file"):
            read_partial(tmp_path)


def test_a_link_planted_at_the_manifests_temporary_name_is_not_written_through(tmp_path: Path) -> None:
    from streamcli.shards.records import write_json

    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    out = tmp_path / "out"
    out.mkdir()
    (out / ".index.json.tmp").symlink_to(victim)
    write_json(out / MANIFEST, {"a": 1})
    assert victim.read_text() == "keep me"
    assert json.loads((out / MANIFEST).read_text()) == {"a": 1} and not (out / ".index.json.tmp").exists()
