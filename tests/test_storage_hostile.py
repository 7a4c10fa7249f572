"""Storage that loses nothing: every codec over every storage kind reads back, a cache smaller than the data
exports every clip, a missing backend is a usage error, a killed upload leaves no temporary file, an outage fails
in seconds naming the upload, and replay tells a running export from an interrupted one."""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from _moto import MotoS3
from conftest import needs_shared, shared_data
from streamcli_sources.shards import ShardSource
from typer.testing import CliRunner

from streamcli import StreamLoader
from streamcli.batch import Batch
from streamcli.cli import app
from streamcli.errors import StorageError
from streamcli.shards import ShardReader, ShardWriter, export, make_header, verify
from streamcli.shards.codec import CODECS
from streamcli.source import BaseSource, Field, Step

LENGTHS = (7, 12, 3, 9, 5)
runner = CliRunner()
BIN = Path(sys.executable).parent / "streamcli"


class Counting(BaseSource):
    """Five streams of known, uneven lengths whose steps say which stream and step they are."""

    def items(self) -> list[int]:
        return list(range(len(LENGTHS)))

    def fields(self) -> Sequence[Field]:
        return (Field("x", (3,), "int32"), Field("y", (2, 2), "float32"))

    def length(self, item: int) -> int:
        return LENGTHS[item]

    def open(self, item: int, start: int = 0) -> Iterator[Step]:
        for t in range(start, LENGTHS[item]):
            yield {
                "x": np.array([item, t, item * 100 + t], np.int32),
                "y": np.full((2, 2), item + t / 16, np.float32),
            }


def _batches(codec: str) -> tuple[list[Batch], dict[str, Any]]:
    """The loader's batches in memory, and the header of their export (a shard per batch: each read on its own)."""
    with StreamLoader(Counting(), 2, 4, seed=3) as loader:
        batches = [b.clone() for b in loader]
        header = make_header(
            fields=loader.fields, batch_size=2, time_steps=4, layout="TB", source={}, loader={},
            shard_bytes=1, compress=codec,
            streams=[loader.stream_name(i) for i in range(loader.num_streams)],
            stream_lengths=[loader.stream_length(i) for i in range(loader.num_streams)],
        )  # fmt: skip
    return batches, header


def _target(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if kind == "folder":
        return str(tmp_path / "run")
    if kind == "file":
        return (tmp_path / "run").as_uri()
    if kind == "memory":
        return f"memory://streamcli-{uuid.uuid4().hex[:12]}/run"
    assert kind == "s3"
    bucket: str = request.getfixturevalue("bucket")
    return f"{bucket}/run"


@pytest.mark.parametrize("kind", ["folder", "file", "s3", "memory"])
@pytest.mark.parametrize("codec", [c or "none" for c in CODECS])
def test_every_codec_on_every_storage_kind_exports_verifies_and_reads_back(
    codec: str, kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if codec == "zstd":
        pytest.importorskip("zstandard")
    batches, header = _batches(codec)
    assert header["batches_per_shard"] == 1
    out = _target(kind, tmp_path, request)
    m = export(iter(batches), out, header)
    assert m["batches"] == len(batches) and m["compression"] == (None if codec == "none" else codec)
    assert verify(out) == []
    got = list(ShardReader(out, check=True))
    assert len(got) == len(batches)
    for b, want in zip(got, batches, strict=True):
        assert (b.epoch, b.index) == (want.epoch, want.index)
        for k in want:
            assert torch.equal(b[k], want[k]), k
        for k, v in want.flags().items():
            assert torch.equal(b.flags()[k], v), k
    # The shards source rebuilds each stream from the exported flags: what the in-memory batches hold.
    src = ShardSource(out)
    assert src.items() == list(range(len(LENGTHS)))
    for item in src.items():
        steps = [s for block in src.open(item) for s in np.asarray(block["x"]).reshape(-1, 3)]
        assert [tuple(int(v) for v in s) for s in steps] == [(item, t, item * 100 + t) for t in range(LENGTHS[item])]
        assert int(np.asarray(next(iter(src.open(item, 2)))["x"]).reshape(-1, 3)[0, 1]) == 2  # a resume's start


def _export(out: str, codec: str = "none") -> None:
    batches, header = _batches(codec)
    export(iter(batches), out, header)


@pytest.mark.parametrize("command", ["verify", "replay"])
def test_without_zstandard_verify_and_replay_name_the_extra_to_install(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("zstandard")
    _export(str(tmp_path / "run"), "zstd")
    monkeypatch.setitem(sys.modules, "zstandard", None)  # ``import zstandard`` now fails, as where it is missing
    result = runner.invoke(app, [command, str(tmp_path / "run")])
    assert result.exit_code == 1, result.output
    assert "pip install 'streamcli[zstd]'" in " ".join(result.output.split()), result.output


@pytest.mark.parametrize("kind", ["folder", "s3"])
def test_replay_during_a_running_export_says_it_is_running_and_names_the_holder(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    out = _target(kind, tmp_path, request)
    _, header = _batches("none")
    with ShardWriter(out, header) as writer:  # holds the export's lock; its partial record is there
        result = runner.invoke(app, ["replay", out])
        writer.close()
    said = " ".join(result.output.split())
    assert result.exit_code == 1, result.output
    assert "still running" in said and f"pid {os.getpid()}" in said and "interrupted" not in said, said
    assert runner.invoke(app, ["replay", out]).exit_code == 0  # once it finished


@pytest.mark.parametrize(("url", "module"), [("hdfs://h/run", "pyarrow"), ("sftp://h/run", "paramiko")])
def test_a_url_whose_backend_is_missing_is_a_usage_error_naming_the_pip_line(url: str, module: str) -> None:
    pytest.importorskip("fsspec")
    if importlib.util.find_spec(module) is not None:
        pytest.skip(f"{module} is installed here: {url} has its backend")
    result = runner.invoke(app, ["export", "camera", url, "-w", "0"])
    said = " ".join(result.output.split())
    assert result.exit_code == 2, said
    assert f"cannot use {url!r}" in said and f"pip install fsspec {module}" in said, said
    assert "ModuleNotFoundError" not in said and "Traceback" not in said


CLIPS = ("Shepard_Calais_1906_FrenchGP.ogv", "homer.avi", "retroMars2018.avi")  # 868 kB in all, none over 410 kB


def _clips_in(bucket: str) -> str:
    from streamcli.storage.remote import Remote

    root = shared_data("video")
    assert root is not None
    r = Remote(f"{bucket}/clips")
    for name in CLIPS:
        r.write(name, (root / name).read_bytes())
    return f"{bucket}/clips"


def _steps(out: Path) -> tuple[list[str], int, int]:
    """The streams an export names, its batches and its valid steps."""
    reader = ShardReader(out)
    valid = sum(int(b.valid.sum()) for b in reader)
    return list(reader.manifest["streams"]), len(reader), valid


@pytest.mark.slow
@needs_shared("video")
@pytest.mark.parametrize(("workers", "scan"), [(0, False), (2, False), (0, True)])
def test_a_cache_smaller_than_the_clips_exports_every_clip(
    workers: int, scan: bool, bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = shared_data("video")
    assert root is not None
    local = tmp_path / "local"
    local.mkdir()
    for name in CLIPS:
        (local / name).write_bytes((root / name).read_bytes())
    url = _clips_in(bucket)
    args = ["--epochs", "1", "-s", "size=16x16", "-b", "2", "-t", "16", "-w", str(workers)]
    args += ["-s", "scan=true"] if scan else []
    result = runner.invoke(app, ["export", "video", str(local), str(tmp_path / "want"), *args])
    assert result.exit_code == 0, result.output
    monkeypatch.setenv("STREAMCLI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("STREAMCLI_CACHE_BYTES", "450000")  # each clip fits; all three do not
    result = runner.invoke(app, ["export", "video", url, str(tmp_path / "got"), *args])
    assert result.exit_code == 0, result.output
    want = _steps(tmp_path / "want")
    assert want[0] == list(CLIPS) and want[2] > 0
    assert _steps(tmp_path / "got") == want  # every clip, every step
    left = [p for p in (tmp_path / "cache" / "objects").iterdir() if not p.name.startswith(".")]
    assert 0 < sum(p.stat().st_size for p in left) <= 450000  # nothing pinned once done: back within the limit


@needs_shared("video")
def test_a_clip_larger_than_the_cache_is_refused_up_front_naming_the_limit(
    bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = _clips_in(bucket)
    monkeypatch.setenv("STREAMCLI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("STREAMCLI_CACHE_BYTES", "300000")  # the .ogv is 406 kB
    result = runner.invoke(app, ["export", "video", url, str(tmp_path / "out"), "-w", "0"])
    said = " ".join(result.output.split())
    assert result.exit_code == 2, said
    assert f"{url}/{CLIPS[0]}" in said and "300000 bytes" in said and "STREAMCLI_CACHE_BYTES" in said, said
    assert not (tmp_path / "cache").exists()  # refused before anything was fetched


def _uploads(tmp: Path) -> list[Path]:
    return sorted(tmp.glob("streamcli-upload-*/shard-*.npz"))


@pytest.mark.slow
def test_a_killed_s3_export_leaves_a_temporary_shard_that_the_next_run_removes(bucket: str, tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp)}
    args = [
        "camera", "-s", "size=64x64", "-s", "steps=96", "-s", "count=8", "-b", "4", "-t", "8", "-w", "0",
        "--shard-size", "2MB", "--epochs", "3", f"{bucket}/run",
    ]  # fmt: skip
    proc = subprocess.Popen([str(BIN), "export", *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not _uploads(tmp) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.002)  # a shard waits in $TMPDIR while it uploads: kill it there
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL, "the export finished before it could be killed"
    left = _uploads(tmp)
    assert left, "no shard was waiting in $TMPDIR when the export was killed"
    done = subprocess.run([str(BIN), "export", *args, "--resume"], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert not list(tmp.glob("streamcli-*")), list(tmp.iterdir())  # the killed run's, and the resumed run's own
    assert runner.invoke(app, ["verify", f"{bucket}/run"]).exit_code == 0


def test_an_outage_mid_export_fails_within_the_deadline_naming_the_upload_and_the_fix(
    bucket: str, moto_s3: MotoS3, monkeypatch: pytest.MonkeyPatch
) -> None:
    from _shard_fakes import make_batch
    from test_storage_shards import header

    monkeypatch.setenv("STREAMCLI_STORAGE_RETRIES", "100")  # the deadline, not the count, ends it
    monkeypatch.setenv("STREAMCLI_STORAGE_DEADLINE_S", "3")

    def stop_at_2(n: int, nbytes: int) -> None:
        if n == 2:
            moto_s3.stop()  # for good: the next shard's requests find no server

    t0 = time.monotonic()
    try:
        with pytest.raises(StorageError) as caught:
            export((make_batch(i) for i in range(6)), f"{bucket}/run", header(per_shard=1), progress=stop_at_2)
    finally:
        moto_s3.start()
    took = time.monotonic() - t0
    said = str(caught.value)
    assert took < 20, f"an outage took {took:.0f} s to fail"
    assert f"{bucket}/run/shard-0000" in said and "--resume" in said and ".streamcli.lock" not in said, said


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again once returned: a connection there is refused


@pytest.mark.slow
def test_an_export_to_an_unreachable_endpoint_fails_in_seconds_with_the_default_settings(tmp_path: Path) -> None:
    pytest.importorskip("s3fs")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "STREAMCLI_STORAGE_"))}
    env.update(AWS_ACCESS_KEY_ID="x", AWS_SECRET_ACCESS_KEY="x", AWS_DEFAULT_REGION="us-east-1", TMPDIR=str(tmp_path))
    env["AWS_ENDPOINT_URL"] = f"http://127.0.0.1:{_closed_port()}"
    t0 = time.monotonic()
    done = subprocess.run(
        [str(BIN), "export", "camera", "s3://b/run", "-w", "0", "-s", "count=2", "-s", "steps=16"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    took = time.monotonic() - t0
    said = " ".join(done.stderr.split())
    assert done.returncode == 1, said
    assert took < 45, f"an unreachable endpoint took {took:.0f} s to fail"  # not botocore's retries times ours
    assert "'s3://b/run' still failed" in said and "check the connection" in said and "Traceback" not in said, said
