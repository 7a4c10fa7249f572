"""A URL streamcli cannot serve is an error naming it and the fix, never a local folder; file:// is local."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from _shard_fakes import FIELDS, make_batch
from typer.testing import CliRunner

from streamcli.cli import app
from streamcli.errors import UnsupportedURLError
from streamcli.shards import ShardReader, batch_nbytes, export, make_header
from streamcli.storage import urls

runner = CliRunner()
TEXT = Path(__file__).resolve().parent / "data" / "text"
TINY = ["-b", "2", "-t", "2", "-w", "0", "--batches", "2"]


def header() -> dict:
    return make_header(
        fields=FIELDS, batch_size=3, time_steps=4, layout="TB", source={"plugin": "fake", "arg": None, "options": {}},
        loader={}, shard_bytes=batch_nbytes(FIELDS, 3, 4) * 2, compress=False,
    )  # fmt: skip


def one_error(output: str) -> str:
    errors = [ln for ln in output.splitlines() if ln.startswith("error: ")]
    assert len(errors) == 1, output
    assert "Traceback" not in output, output
    return errors[0]


@pytest.fixture
def no_s3fs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "s3fs", None)  # find_spec says "not installed"


def test_export_to_s3_without_s3fs_exits_2_and_writes_no_local_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_s3fs: None
) -> None:
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["export", "text", str(TEXT), "s3://bkt/run", *TINY])
    assert result.exit_code == 2, result.output
    line = one_error(result.output)
    assert "'s3://bkt/run'" in line and "pip install 'streamcli[s3]'" in line
    assert list(tmp_path.iterdir()) == []  # no folder called "s3:"


def test_a_url_without_fsspec_names_fsspec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "fsspec", None)
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["export", "text", str(TEXT), "gs://bkt/run", *TINY])
    assert result.exit_code == 2, result.output
    assert "need fsspec" in one_error(result.output) and "gs://bkt/run" in result.output
    assert list(tmp_path.iterdir()) == []


def test_an_unknown_scheme_exits_2_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["export", "text", str(TEXT), "nosuch://bkt/run", *TINY])
    assert result.exit_code == 2, result.output
    assert "fsspec knows no storage called 'nosuch'" in one_error(result.output)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "args",
    [["verify", "s3://bkt/run"], ["replay", "s3://bkt/run"], ["preview", "text", "s3://bkt/books", *TINY],
     ["export", "shards", "s3://bkt/run", "out", *TINY]],
)  # fmt: skip
def test_every_url_argument_without_its_backend_exits_2(args: list[str], no_s3fs: None) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "s3://bkt/" in one_error(result.output) and "streamcli[s3]" in result.output


def test_the_library_raises_a_typed_error_for_an_unservable_url(no_s3fs: None) -> None:
    with pytest.raises(UnsupportedURLError, match=r"'s3://bkt/run'.*pip install 'streamcli\[s3\]'"):
        export((make_batch(i) for i in range(2)), "s3://bkt/run", header())
    with pytest.raises(UnsupportedURLError, match="s3://bkt/run"):
        ShardReader("s3://bkt/run")


def test_file_urls_are_local_paths(tmp_path: Path) -> None:
    assert urls.local_path(f"file://{tmp_path}/a%20b") == f"{tmp_path}/a b"
    assert not urls.is_remote("file:///x") and urls.is_remote("s3://b/x") and not urls.is_remote("/s3:/x")
    with pytest.raises(UnsupportedURLError, match="must be local"):
        urls.local_path("file://otherhost/x")
    out = tmp_path / "out"
    result = runner.invoke(app, ["export", "text", str(TEXT), f"file://{out}", *TINY])
    assert result.exit_code == 0, result.output
    assert (out / "index.json").is_file()
    result = runner.invoke(app, ["replay", f"file://{out}", "--json"])
    assert result.exit_code == 0, result.output
    assert len(list(ShardReader(f"file://{out}"))) == 2


@pytest.mark.slow
def test_a_local_path_never_imports_fsspec(tmp_path: Path) -> None:
    import subprocess

    code = (
        "import sys; from streamcli.shards import ShardReader, export, verify\n"
        "import streamcli_sources.text, streamcli_sources.shards, streamcli_sources.audio\n"
        "assert 'fsspec' not in sys.modules, 'fsspec imported'"
    )
    assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 0


def test_a_shard_writer_built_directly_on_an_unservable_url_raises_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_s3fs: None
) -> None:
    from streamcli.shards import ShardWriter

    monkeypatch.chdir(tmp_path)
    with pytest.raises(UnsupportedURLError, match="s3://bkt/run"):
        ShardWriter("s3://bkt/run", header())
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("url", "backend"), [("gs://b/run", "gcsfs"), ("az://c/run", "adlfs")])
def test_a_scheme_whose_backend_is_missing_names_the_backend(
    url: str, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("fsspec")
    monkeypatch.setitem(sys.modules, backend, None)
    with pytest.raises(UnsupportedURLError, match=rf"'{url}'.*needs {backend}.*pip install fsspec {backend}"):
        urls.check(url)
