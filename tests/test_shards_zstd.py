"""zstd-compressed shards: bit-identical replay, byte-identical resume and Ray tasks, and hostile frames refused."""

from __future__ import annotations

import json
import sys
import tracemalloc
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import zstandard
from streamcli_sources.shards import ShardSource
from typer.testing import CliRunner

from streamcli import ShardReader, StreamLoader, load_source
from streamcli.cli import app
from streamcli.errors import ShardError
from streamcli.shards import MANIFEST, export, load_manifest, make_header, verify
from streamcli.shards.exporting import export_loader
from streamcli.shards.npz_write import complete_batches, sha256_file
from streamcli.shards.on_ray import Job, export_range
from streamcli.shards.writer import ShardWriter

runner = CliRunner()
TEXTS = ["the quick brown fox jumps", "over the lazy dog", "a", "streams of bytes, one step at a time!"]
CAM = {"count": 4, "steps": 17, "size": (8, 8)}


def text_source() -> Any:
    return load_source("text", TEXTS, width=4)


def camera_source() -> Any:
    return load_source("camera", **CAM)


SOURCES: dict[str, Callable[[], Any]] = {"text": text_source, "camera": camera_source}


def make_export(out: Path, make: Callable[[], Any], compress: str, level: int | None = None) -> dict[str, Any]:
    with StreamLoader(make(), 3, 5, seed=1) as loader:
        header = make_header(
            fields=loader.fields, batch_size=3, time_steps=5, layout="TB", source={}, loader={"seed": 1},
            shard_bytes=1500, compress=compress, level=level,
            streams=[loader.stream_name(i) for i in range(loader.num_streams)],
            stream_lengths=[loader.stream_length(i) for i in range(loader.num_streams)],
        )  # fmt: skip
        return export(iter(loader), out, header)


def files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def members(shard: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(shard) as zf:
        return {i.filename: zf.read(i) for i in zf.infolist()}


def replace_member(out: Path, filename: str, payload: bytes) -> None:
    """Rewrite shard 0 with ``filename`` holding ``payload`` (stored), and fix the manifest's size and checksum so
    that only the member is wrong."""
    path = out / "shard-00000.npz"
    old = members(path)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        for name, data in old.items():
            zf.writestr(name, payload if name == filename else data)
    m = json.loads((out / MANIFEST).read_text())
    m["shards"][0].update(bytes=path.stat().st_size, sha256=sha256_file(path))
    (out / MANIFEST).write_text(json.dumps(m))


def npy(arr: np.ndarray, tail: bytes = b"") -> bytes:
    import io

    buf = io.BytesIO()
    np.lib.format.write_array(buf, arr, allow_pickle=False)
    return buf.getvalue() + tail


def refused_peak(fn: Callable[[], object], match: str) -> int:
    """The most Python and numpy memory ``fn`` held at once before it raised ``ShardError`` matching ``match``."""
    tracemalloc.start()
    try:
        with pytest.raises(ShardError, match=match):
            fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# replay


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_zstd_shards_replay_bit_identical_to_uncompressed_ones(tmp_path: Path, source: str) -> None:
    plain = make_export(tmp_path / "plain", SOURCES[source], "none")
    packed = make_export(tmp_path / "zstd", SOURCES[source], "zstd")
    assert packed["compression"] == "zstd" and packed["compression_level"] == 3
    assert "compression_level" not in plain and plain["compression"] is None
    assert sum(s["bytes"] for s in packed["shards"]) < sum(s["bytes"] for s in plain["shards"])
    assert verify(tmp_path / "zstd") == []
    want, got = list(ShardReader(tmp_path / "plain")), list(ShardReader(tmp_path / "zstd", check=True))
    assert len(got) == len(want) > 1
    for g, w in zip(got, want, strict=True):
        assert (g.index, g.epoch) == (w.index, w.epoch)
        for k in w:
            assert torch.equal(g[k], w[k]) and g[k].dtype == w[k].dtype
        for k, v in w.flags().items():
            assert torch.equal(g.flags()[k], v) and g.flags()[k].dtype == v.dtype, k
    a, b = ShardSource(str(tmp_path / "plain")), ShardSource(str(tmp_path / "zstd"))
    assert a.items() == b.items()
    for item in a.items():
        for x, y in zip(a.open(item), b.open(item), strict=True):
            assert x.keys() == y.keys() and all(np.array_equal(x[k], y[k]) for k in x)


def test_each_array_is_a_stored_zstd_frame_that_declares_its_size(tmp_path: Path) -> None:
    make_export(tmp_path, text_source, "zstd", level=7)
    assert load_manifest(tmp_path)["compression_level"] == 7
    with zipfile.ZipFile(tmp_path / "shard-00000.npz") as zf:
        infos = zf.infolist()
        assert {i.compress_type for i in infos} == {zipfile.ZIP_STORED}
        assert all(i.filename.endswith(".npy.zst") for i in infos)
        frame = zf.read("meta.index.npy.zst")
    params = zstandard.get_frame_parameters(frame)
    assert params.has_checksum and params.content_size == len(zstandard.ZstdDecompressor().decompress(frame))


def test_old_manifests_without_a_codec_read_as_before(tmp_path: Path) -> None:
    make_export(tmp_path, text_source, "none")
    m = json.loads((tmp_path / MANIFEST).read_text())
    del m["compression"]
    (tmp_path / MANIFEST).write_text(json.dumps(m))
    assert verify(tmp_path) == [] and len(list(ShardReader(tmp_path))) == m["batches"]


# refusals: codec, package, options


def test_an_unknown_codec_is_refused_naming_it(tmp_path: Path) -> None:
    make_export(tmp_path, text_source, "zstd")
    m = json.loads((tmp_path / MANIFEST).read_text())
    m["compression"] = "lz4"
    (tmp_path / MANIFEST).write_text(json.dumps(m))
    with pytest.raises(ShardError, match=r"compression 'lz4' is unknown.*deflate or zstd"):
        ShardReader(tmp_path)
    with pytest.raises(ShardError, match="compression 'lz4' is unknown"):
        ShardSource(str(tmp_path))
    result = runner.invoke(app, ["verify", str(tmp_path)])
    assert result.exit_code == 1 and "compression 'lz4' is unknown" in result.output, result.output


def test_zstd_shards_without_zstandard_name_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_export(tmp_path / "out", text_source, "zstd")
    monkeypatch.setitem(sys.modules, "zstandard", None)  # import zstandard now raises ImportError
    fix = r"zstd shards need the zstandard package: pip install 'streamcli\[zstd\]'"
    with pytest.raises(ShardError, match=fix):
        ShardReader(tmp_path / "out")
    with pytest.raises(ShardError, match=fix):
        make_export(tmp_path / "again", text_source, "zstd")
    result = runner.invoke(app, ["export", "text", *TEXTS[:1], str(tmp_path / "cli"), "--compress", "zstd"])
    assert result.exit_code == 2 and "pip install 'streamcli[zstd]'" in result.output, result.output
    assert not (tmp_path / "cli").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--compress", "lz4"], "--compress 'lz4' must be one of none, deflate, zstd"),
        (["--level", "5"], "--level 5 needs --compress zstd"),
        (["--compress", "zstd", "--level", "23"], "--level 23 must be from 1 to 22"),
    ],
)
def test_export_refuses_a_bad_codec_or_level(tmp_path: Path, args: list[str], message: str) -> None:
    result = runner.invoke(app, ["export", "camera", str(tmp_path / "out"), *args])
    assert result.exit_code == 2 and message in " ".join(result.output.split()), result.output
    assert not (tmp_path / "out").exists()


# corruption and hostile frames


def test_a_flipped_bit_in_a_frame_is_caught_by_verify_and_by_replay_without_check(tmp_path: Path) -> None:
    make_export(tmp_path, camera_source, "zstd")
    path = tmp_path / "shard-00000.npz"
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo("data.frame.npy.zst")
    data[info.header_offset + 30 + len(info.filename) + len(info.extra) + info.compress_size // 2] ^= 0x10
    path.write_bytes(bytes(data))
    assert any("shard-00000.npz" in p and "sha256" in p for p in verify(tmp_path))
    with pytest.raises(ShardError, match=r"shard 'shard-00000.npz' is truncated or corrupted: data.frame"):
        list(ShardReader(tmp_path))  # no sha256 check: the frame's own checksum fails


@pytest.mark.timeout(60)
def test_a_frame_whose_header_claims_a_huge_array_is_refused_before_it_is_inflated(tmp_path: Path) -> None:
    make_export(tmp_path, text_source, "zstd")
    bomb = zstandard.ZstdCompressor(level=1).compress(npy(np.zeros((64, 1024, 1024), np.uint8)))
    assert len(bomb) < 1 << 20  # 64 MiB of zeros in a few kB
    replace_member(tmp_path, "run.length.npy.zst", bomb)
    m = load_manifest(tmp_path)
    assert any("run.length is |u1[64, 1024, 1024], the manifest says <i8" in p for p in verify(tmp_path))
    for read in (lambda: list(ShardReader(tmp_path)), lambda: ShardSource(str(tmp_path))):
        assert refused_peak(read, r"run.length is \|u1\[64, 1024, 1024\]") < 8 << 20
    assert complete_batches(tmp_path / "shard-00000.npz", m) == -1  # so resume rewrites it


@pytest.mark.timeout(60)
def test_a_frame_declaring_more_than_the_manifest_is_refused_before_the_rest_is_inflated(tmp_path: Path) -> None:
    make_export(tmp_path, text_source, "zstd")
    m = load_manifest(tmp_path)
    real = zstandard.ZstdDecompressor().decompress(members(tmp_path / "shard-00000.npz")["flag.reset.npy.zst"])
    lying = zstandard.ZstdCompressor(level=1).compress(real + bytes(64 << 20))  # the right header, 64 MiB more
    replace_member(tmp_path, "flag.reset.npy.zst", lying)
    assert refused_peak(lambda: list(ShardReader(tmp_path)), "flag.reset does not fit its zip entry") < 8 << 20
    assert any("flag.reset does not fit" in p for p in verify(tmp_path))
    assert complete_batches(tmp_path / "shard-00000.npz", m) == -1


@pytest.mark.parametrize("how", ["no declared size", "a second frame", "a short frame"])
def test_a_frame_that_does_not_hold_exactly_its_array_is_refused(tmp_path: Path, how: str) -> None:
    make_export(tmp_path, text_source, "zstd")
    real = zstandard.ZstdDecompressor().decompress(members(tmp_path / "shard-00000.npz")["flag.reset.npy.zst"])
    if how == "no declared size":
        frame, match = zstandard.ZstdCompressor(write_content_size=False).compress(real), "does not declare"
    elif how == "a second frame":
        frame = zstandard.ZstdCompressor().compress(real) + zstandard.ZstdCompressor().compress(b"\0" * 64)
        match = "longer than its header says"
    else:
        frame, match = zstandard.ZstdCompressor().compress(real[:-1]), "does not fit its zip entry"
    replace_member(tmp_path, "flag.reset.npy.zst", frame)
    with pytest.raises(ShardError, match=rf"shard 'shard-00000.npz'.*flag.reset.*{match}"):
        list(ShardReader(tmp_path))
    assert any(match in p for p in verify(tmp_path))


def test_a_zstd_manifest_declaring_more_than_zstd_can_expand_is_refused(tmp_path: Path) -> None:
    make_export(tmp_path, text_source, "zstd")
    m = json.loads((tmp_path / MANIFEST).read_text())
    m["fields"][0]["shape"] = [1 << 24]  # far more than 32768x the shard's bytes
    (tmp_path / MANIFEST).write_text(json.dumps(m))
    with pytest.raises(ShardError, match=r"more than its \d+ bytes can hold zstd-compressed \(at most 32768x\)"):
        load_manifest(tmp_path)


# resume and Ray: the same bytes


def test_an_interrupted_zstd_export_resumes_byte_identical(tmp_path: Path) -> None:
    full = make_export(tmp_path / "full", camera_source, "zstd")
    assert len(full["shards"]) > 2
    cut = tmp_path / "cut"
    with StreamLoader(camera_source(), 3, 5, seed=1) as loader:
        header = {k: v for k, v in full.items() if k not in ("shards", "batches")}
        with pytest.raises(RuntimeError), ShardWriter(cut, header) as w:
            for i, b in enumerate(loader):
                if i == 2 * header["batches_per_shard"]:
                    raise RuntimeError("killed")
                w.write(b)
    assert not (cut / MANIFEST).exists() and len(list(cut.glob("shard-*.npz"))) == 2
    with StreamLoader(camera_source(), 3, 5, seed=1) as loader:
        export(iter(loader), cut, header, mode="resume")
    assert files(cut) == files(tmp_path / "full")


def test_the_cli_resumes_an_interrupted_zstd_export_byte_identical(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    args = ["export", "camera", "-s", "size=32x32", "-s", "count=4", "-s", "steps=24", "-b", "2", "-t", "4"]
    args += ["-w", "0", "--shard-size", "1", "--compress", "zstd", "--level", "5"]
    assert runner.invoke(app, [*args, str(tmp_path / "full")]).exit_code == 0
    real_write, calls = ShardWriter.write, [0]

    def write(self: ShardWriter, *a: Any, **kw: Any) -> Any:
        calls[0] += 1
        if calls[0] == 4:
            raise KeyboardInterrupt
        return real_write(self, *a, **kw)

    with monkeypatch.context() as mp:
        mp.setattr(ShardWriter, "write", write)
        assert runner.invoke(app, [*args, str(tmp_path / "cut")]).exit_code == 130
    assert not (tmp_path / "cut" / MANIFEST).exists()
    result = runner.invoke(app, [*args, str(tmp_path / "cut"), "--resume"])
    assert result.exit_code == 0, result.output
    assert files(tmp_path / "cut") == files(tmp_path / "full")
    assert load_manifest(tmp_path / "cut")["compression_level"] == 5
    result = runner.invoke(app, ["replay", str(tmp_path / "cut"), "--json"])
    assert result.exit_code == 0 and json.loads(result.output)["ok"] is True, result.output


def test_a_ray_task_writes_the_same_zstd_shards_as_a_local_export(tmp_path: Path) -> None:
    """``export_range`` is what each Ray task runs; here it runs in this process, without a cluster."""
    source = {"plugin": "camera", "arg": None, "options": CAM}
    loader_kw = {"batch_size": 3, "time_steps": 5, "seed": 1}
    with StreamLoader(camera_source(), 3, 5, seed=1) as loader:
        header = make_header(fields=loader.fields, batch_size=3, time_steps=5, layout="TB", source=source,
                             loader=loader_kw, shard_bytes=1500, compress="zstd", level=2)  # fmt: skip
        total, fingerprint = len(loader), loader.state_dict()["fingerprint"]
        (tmp_path / "local").mkdir()
        manifest = export_loader(loader, tmp_path / "local", header)
    n = len(manifest["shards"])
    assert n > 2
    job = Job(source=source, loader=loader_kw, header=header, out_dir=str(tmp_path / "ray"), epochs=1, total=total,
              fingerprint=fingerprint)  # fmt: skip
    (tmp_path / "ray").mkdir()
    records = export_range(job, 0, 2) + export_range(job, 2, n)  # two tasks; the second seeks
    assert records == manifest["shards"]
    local = {k: v for k, v in files(tmp_path / "local").items() if k != MANIFEST}
    assert files(tmp_path / "ray") == local


def test_a_frame_whose_zip_header_lies_outside_the_file_is_refused(tmp_path: Path) -> None:
    make_export(tmp_path, text_source, "zstd")
    path = tmp_path / "shard-00000.npz"
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as zf:
        entry = zf.start_dir  # the first central directory entry: data.text's
    assert data[entry : entry + 4] == b"PK\x01\x02"
    data[entry + 42 : entry + 46] = (len(data) - 8).to_bytes(4, "little")  # its local header: 8 bytes from the end
    path.write_bytes(bytes(data))
    m = json.loads((tmp_path / MANIFEST).read_text())
    m["shards"][0].update(sha256=sha256_file(path))
    (tmp_path / MANIFEST).write_text(json.dumps(m))
    with pytest.raises(ShardError, match=r"shard 'shard-00000.npz' is truncated or corrupted: data.text"):
        list(ShardReader(tmp_path))


@pytest.mark.slow
@pytest.mark.xdist_group("ray")  # see test_ray_export.py
@pytest.mark.timeout(300)
def test_export_engine_ray_with_zstd_writes_the_local_files(tmp_path: Path, ray_session: str) -> None:
    import subprocess

    args = ["export", "camera", "-s", "count=4", "-s", "steps=15", "-s", "size=8x8", "-b", "2", "-t", "4", "-w", "0",
            "--segment", "5", "--shard-size", "2kB", "--compress", "zstd", "--level", "4"]  # fmt: skip

    def run(*extra: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "streamcli", *args, *extra]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=240)

    r = run(str(tmp_path / "local"))
    assert r.returncode == 0, r.stderr
    r = run(str(tmp_path / "ray"), "--engine", "ray", "--partitions", "2", "--address", ray_session)
    assert r.returncode == 0, r.stderr
    assert files(tmp_path / "ray") == files(tmp_path / "local")
    m = load_manifest(tmp_path / "ray")
    assert m["compression_level"] == 4 and len(m["shards"]) > 2
