"""The text, shards and audio sources reading from object storage (moto's S3 server), as they read local files,
and a loader that loses its server mid-read and gets it back."""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from _moto import MotoS3
from conftest import data_root
from streamcli_sources.audio import AudioSource
from streamcli_sources.shards import ShardSource
from streamcli_sources.text import TextSource

from streamcli import StreamLoader
from streamcli.batch import Batch
from streamcli.shards import ShardReader, export
from streamcli.shards.exporting import export_loader
from streamcli.source import iter_steps
from streamcli.storage.remote import Remote


def upload(folder: Path, url: str) -> None:
    r = Remote(url)
    for p in sorted(folder.iterdir()):
        r.write(p.name, p.read_bytes())


def digest(batch: Batch) -> str:
    h = hashlib.sha256()
    for k in sorted(batch.data):
        h.update(batch[k].numpy().tobytes())
    for k, v in sorted(batch.flags().items()):
        h.update(k.encode() + v.numpy().tobytes())
    return h.hexdigest()


def digests(source: object, **kw: object) -> list[str]:
    with StreamLoader(source, 3, 8, seed=1, **kw) as loader:  # type: ignore[arg-type]
        return [digest(b) for b in loader]


def steps_bytes(src: object, item: object, start: int = 0) -> bytes:
    return b"".join(
        b"".join(np.ascontiguousarray(v).tobytes() for _, v in sorted(s.items()))
        for s in iter_steps(src, item, start)  # type: ignore[arg-type]
    )


def test_the_text_source_lists_and_reads_a_bucket_as_a_folder(bucket: str) -> None:
    upload(data_root("text"), f"{bucket}/books")
    local, remote = TextSource(data_root("text"), width=64), TextSource(f"{bucket}/books", width=64)
    assert [Path(i).name for i in remote.items()] == [Path(i).name for i in local.items()]
    assert all(i.startswith(f"{bucket}/books/") for i in remote.items())
    for a, b in zip(local.items(), remote.items(), strict=True):
        assert remote.length(b) == local.length(a)
        assert steps_bytes(remote, b) == steps_bytes(local, a)
        assert steps_bytes(remote, b, 300) == steps_bytes(local, a, 300)  # a resume reads from there
    one = TextSource(f"{bucket}/books/tom_sawyer_excerpt.txt", width=64, newlines="lf")
    assert one.items() == [f"{bucket}/books/tom_sawyer_excerpt.txt"]
    lf = TextSource(str(data_root("text") / "tom_sawyer_excerpt.txt"), width=64, newlines="lf")
    assert steps_bytes(one, one.items()[0]) == steps_bytes(lf, lf.items()[0])
    assert digests(remote) == digests(local)


def test_the_text_source_names_a_url_with_nothing_under_it(bucket: str) -> None:
    with pytest.raises(FileNotFoundError, match=rf"nothing matches glob='\*.txt' at '{bucket}/none'"):
        TextSource(f"{bucket}/none")


def test_the_shards_source_reads_an_export_in_a_bucket_as_a_local_one(tmp_path: Path, bucket: str) -> None:
    src = TextSource(data_root("text"), width=16)
    for out in (tmp_path / "run", f"{bucket}/run"):
        with StreamLoader(src, 3, 8, seed=1) as loader:
            from streamcli.shards import make_header

            header = make_header(
                fields=loader.fields, batch_size=3, time_steps=8, layout="TB", source={}, loader={},
                shard_bytes=20_000, compress=False,
                streams=[loader.stream_name(i) for i in range(loader.num_streams)],
                stream_lengths=[loader.stream_length(i) for i in range(loader.num_streams)],
            )  # fmt: skip
            export_loader(loader, out, header)
    local, remote = ShardSource(tmp_path / "run"), ShardSource(f"{bucket}/run")
    assert len(remote._manifest["shards"]) > 2
    assert remote.items() == local.items()
    for item in local.items():
        assert steps_bytes(remote, item) == steps_bytes(local, item)
        assert steps_bytes(remote, item, 7) == steps_bytes(local, item, 7)
    assert digests(remote) == digests(local)


@pytest.mark.slow
def test_spawned_workers_read_a_bucket_as_in_process_reading_does(bucket: str) -> None:
    upload(data_root("text"), f"{bucket}/books")
    src = TextSource(f"{bucket}/books", width=32)
    assert digests(src, num_workers=2) == digests(TextSource(data_root("text"), width=32))


def test_the_audio_source_reads_a_bucket_through_the_cache(
    bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STREAMCLI_CACHE_DIR", str(tmp_path / "cache"))
    wav = data_root("audio") / "test-8000Hz-le-2ch-1byteu.wav"
    Remote(f"{bucket}/audio").write(wav.name, wav.read_bytes())
    local, remote = AudioSource(wav), AudioSource(f"{bucket}/audio")
    assert remote.items() == [f"{bucket}/audio/{wav.name}"]
    assert [f.shape for f in remote.fields()] == [f.shape for f in local.fields()]
    assert steps_bytes(remote, remote.items()[0]) == steps_bytes(local, local.items()[0])
    cached = list((tmp_path / "cache" / "objects").glob("*.wav"))
    assert len(cached) == 1 and cached[0].read_bytes() == wav.read_bytes()


class _Retried(logging.Handler):
    """Sets ``event`` when streamcli logs that it retries a request."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.event = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if "retry" in record.getMessage():
            self.event.set()


@pytest.fixture
def server_back_on_retry(moto_s3: MotoS3) -> Iterator[_Retried]:
    """Once streamcli logs a retry, start the (stopped) server again on its port."""
    handler = _Retried()
    log = logging.getLogger("streamcli")
    log.addHandler(handler)
    waiter = threading.Thread(target=lambda: handler.event.wait(60) and moto_s3.start(), daemon=True)
    waiter.start()
    try:
        yield handler
    finally:
        handler.event.set()
        waiter.join(60)
        log.removeHandler(handler)
        if moto_s3.server is None:
            moto_s3.start()


def test_replay_survives_the_server_stopping_mid_read(
    tmp_path: Path, bucket: str, moto_s3: MotoS3, server_back_on_retry: _Retried
) -> None:
    from _shard_fakes import make_batch
    from test_storage_shards import header

    export((make_batch(i) for i in range(6)), tmp_path, header(per_shard=2))
    export((make_batch(i) for i in range(6)), f"{bucket}/run", header(per_shard=2))
    want = [digest(b) for b in ShardReader(tmp_path)]
    got = []
    for b in ShardReader(f"{bucket}/run"):
        got.append(digest(b))
        if len(got) == 1:
            moto_s3.stop()  # the next shard's read finds no server until streamcli retries
    assert server_back_on_retry.event.is_set()
    assert got == want  # nothing lost, nothing twice


def test_the_loader_survives_the_server_stopping_mid_read(
    bucket: str, moto_s3: MotoS3, server_back_on_retry: _Retried
) -> None:
    upload(data_root("text"), f"{bucket}/books")
    want = digests(TextSource(data_root("text"), width=16))
    got = []
    with StreamLoader(TextSource(f"{bucket}/books", width=16), 3, 8, seed=1) as loader:
        for b in loader:
            got.append(digest(b))
            if len(got) == 2:
                moto_s3.stop()
    assert server_back_on_retry.event.is_set()
    assert got == want


def test_a_read_that_outlasts_the_retries_fails_naming_the_url(
    bucket: str, moto_s3: MotoS3, monkeypatch: pytest.MonkeyPatch
) -> None:
    from streamcli.errors import StorageError

    upload(data_root("text"), f"{bucket}/books")
    src = TextSource(f"{bucket}/books", width=16)
    monkeypatch.setenv("STREAMCLI_STORAGE_RETRIES", "2")
    moto_s3.stop()
    try:
        with pytest.raises(StorageError, match=rf"'{bucket}/books/fortunes_literature.txt' still failed after 2 tries"):
            list(iter_steps(src, src.items()[0]))
    finally:
        moto_s3.start()


def test_an_export_survives_the_server_stopping_between_shards(
    tmp_path: Path, bucket: str, moto_s3: MotoS3, server_back_on_retry: _Retried
) -> None:
    from _shard_fakes import make_batch
    from test_storage_shards import header, objects

    export((make_batch(i) for i in range(6)), tmp_path, header(per_shard=1))

    def stop_at_3(n: int, nbytes: int) -> None:
        if n == 3:
            moto_s3.stop()  # the next upload (or record) finds no server until streamcli retries

    export((make_batch(i) for i in range(6)), f"{bucket}/run", header(per_shard=1), progress=stop_at_3)
    assert server_back_on_retry.event.is_set()
    assert objects(f"{bucket}/run") == {p.name: p.read_bytes() for p in sorted(tmp_path.iterdir())}


def test_a_text_file_served_over_http_reads_as_the_local_file() -> None:
    import functools
    import http.server
    import socketserver

    pytest.importorskip("aiohttp")

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    handler = functools.partial(Quiet, directory=str(data_root("text")))
    with socketserver.ThreadingTCPServer(("127.0.0.1", 0), handler) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            url = f"http://127.0.0.1:{server.server_address[1]}/tom_sawyer_excerpt.txt"
            remote = TextSource(url, width=64)
            local = TextSource(str(data_root("text") / "tom_sawyer_excerpt.txt"), width=64)
            assert remote.items() == [url] and remote.length(url) == local.length(local.items()[0])
            assert steps_bytes(remote, url) == steps_bytes(local, local.items()[0])
        finally:
            server.shutdown()


@pytest.mark.slow
def test_the_video_source_decodes_a_bucket_through_the_local_cache(
    bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from streamcli_sources.video import VideoSource

    monkeypatch.setenv("STREAMCLI_CACHE_DIR", str(tmp_path / "cache"))
    clips = tmp_path / "clips"
    clips.mkdir()
    for name in ("realshort.mp4", "dummy_video.avi"):
        (clips / name).write_bytes((data_root("video") / name).read_bytes())
    upload(clips, f"{bucket}/clips")
    local, remote = VideoSource(clips, size=(16, 16)), VideoSource(f"{bucket}/clips", size=(16, 16))
    assert [remote.item_name(i) for i in remote.items()] == [local.item_name(i) for i in local.items()]
    assert [i[0] for i in remote.items()] == [f"{bucket}/clips/{n}" for n in ("dummy_video.avi", "realshort.mp4")]
    assert digests(remote) == digests(local) == digests(remote, num_workers=2)
    cached = [p for p in (tmp_path / "cache" / "objects").iterdir() if not p.name.startswith(".")]
    assert len(cached) == 2  # decoded from the cache
