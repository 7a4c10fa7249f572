"""The local cache of remote objects (size limit, least recently used evicted, safe across processes) and the
retry policy's split of transient from permanent errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from streamcli.errors import StorageError
from streamcli.storage import retries as retries_mod
from streamcli.storage.cache import Cache
from streamcli.storage.remote import Remote, retry, transient


def test_a_hit_reads_nothing_remote_and_a_changed_object_is_fetched_anew(
    bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    Remote(bucket).write("a.wav", b"one")
    cache = Cache(tmp_path, limit=1000, fresh_s=0)  # every hit asks whether the object changed
    calls: list[str] = []
    real = Remote.call

    def counting(self: Remote, what: str, name: str, fn: Any) -> Any:
        calls.append(what)
        return real(self, what, name, fn)

    monkeypatch.setattr(Remote, "call", counting)
    first = cache.get(f"{bucket}/a.wav")
    assert first.read_bytes() == b"one" and calls.count("downloading") == 1
    assert cache.get(f"{bucket}/a.wav") == first and calls.count("downloading") == 1
    Remote(bucket).write("a.wav", b"two!")
    again = cache.get(f"{bucket}/a.wav")
    assert again != first and again.read_bytes() == b"two!" and calls.count("downloading") == 2
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp-")]


def test_a_hit_checked_lately_asks_the_server_nothing(
    bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    Remote(bucket).write("a.wav", b"one")
    cache = Cache(tmp_path)
    first = cache.get(f"{bucket}/a.wav")
    calls: list[str] = []
    monkeypatch.setattr(Remote, "call", lambda self, what, name, fn: calls.append(what))
    assert cache.get(f"{bucket}/a.wav") == first and calls == []


def test_the_least_recently_used_entry_goes_first_when_the_cache_is_full(bucket: str, tmp_path: Path) -> None:
    r = Remote(bucket)
    for name in "abc":
        r.write(f"{name}.bin", name.encode() * 100)
    cache = Cache(tmp_path, limit=250)
    a = cache.get(f"{bucket}/a.bin")
    b = cache.get(f"{bucket}/b.bin")
    import os

    os.utime(b, ns=(1, 1))  # b is the oldest use (mtimes are coarse on some file systems)
    assert cache.get(f"{bucket}/a.bin") == a  # a hit: a is used again, now the newest
    c = cache.get(f"{bucket}/c.bin")
    assert a.exists() and c.exists() and not b.exists()
    assert cache.nbytes() == 200


def test_a_failed_download_leaves_no_temporary_file(
    bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    Remote(bucket).write("a.bin", b"x" * 10)
    real = Remote.call

    def failing(self: Remote, what: str, name: str, fn: Any) -> Any:
        if what == "downloading":
            raise StorageError("downloading failed for good")
        return real(self, what, name, fn)

    monkeypatch.setattr(Remote, "call", failing)
    with pytest.raises(StorageError):
        Cache(tmp_path).get(f"{bucket}/a.bin")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_processes_that_fetch_one_object_at_once_share_one_complete_file(bucket: str, tmp_path: Path) -> None:
    data = bytes(range(256)) * 4096
    Remote(bucket).write("big.bin", data)
    code = f"from streamcli.storage.cache import Cache; print(Cache({str(tmp_path)!r}).get({bucket + '/big.bin'!r}))"
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True) for _ in range(3)]
    paths = {p.communicate(timeout=60)[0].strip() for p in procs}
    assert all(p.returncode == 0 for p in procs)
    assert len(paths) == 1
    path = Path(paths.pop())
    assert path.read_bytes() == data
    assert [p.name for p in tmp_path.iterdir() if p.name != ".lock"] == [path.name]  # no temporary file left


class _Boto(Exception):
    """Stands for a botocore error: retried or not by its class name and its response, as botocore's are."""

    def __init__(self, msg: str, status: int = 0) -> None:
        super().__init__(msg)
        self.response = {"ResponseMetadata": {"HTTPStatusCode": status}}


class EndpointConnectionError(Exception):
    pass


@pytest.mark.parametrize(
    "exc",
    [ConnectionResetError("reset"), TimeoutError(), EndpointConnectionError("refused"), _Boto("x", 503),
     _Boto("x", 500), _Boto("x", 429), OSError("An error occurred (SlowDown): Please reduce your request rate")],
)  # fmt: skip
def test_network_trouble_5xx_and_throttling_are_transient(exc: Exception) -> None:
    assert transient(exc)


@pytest.mark.parametrize("exc", [PermissionError("denied"), FileNotFoundError("x"), _Boto("x", 403), ValueError()])
def test_refusals_and_bad_requests_are_permanent(exc: Exception) -> None:
    assert not transient(exc)


def test_retry_backs_off_then_succeeds_and_names_the_url_when_it_gives_up(monkeypatch: pytest.MonkeyPatch) -> None:
    waits: list[float] = []
    monkeypatch.setattr(retries_mod.time, "sleep", waits.append)
    tries = iter([ConnectionResetError("reset"), ConnectionResetError("reset"), None])

    def flaky() -> str:
        exc = next(tries)
        if exc is not None:
            raise exc
        return "ok"

    assert retry(flaky, "reading", "s3://b/x") == "ok"
    assert waits == [0.25, 0.5]
    monkeypatch.setenv("STREAMCLI_STORAGE_RETRIES", "3")
    with pytest.raises(StorageError, match=r"reading 's3://b/x' still failed after 3 tries: ConnectionResetError"):
        retry(lambda: (_ for _ in ()).throw(ConnectionResetError("reset")), "reading", "s3://b/x")
    with pytest.raises(StorageError, match=r"reading 's3://b/x' failed: PermissionError: denied"):
        retry(lambda: (_ for _ in ()).throw(PermissionError("denied")), "reading", "s3://b/x")
