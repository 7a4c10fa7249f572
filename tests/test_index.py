"""The index (``streamcli index``): a loader takes items and lengths from it without asking the source, a stale or
damaged index is refused with the command that rebuilds it, and on S3 start-up lists nothing."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest
from _moto import MotoS3
from streamcli_sources.text import TextSource
from typer.testing import CliRunner

from streamcli import StreamLoader
from streamcli import index as sindex
from streamcli.cli import app
from streamcli.errors import IndexFileError, StaleIndexError
from streamcli.source import BaseSource, Field
from streamcli.storage.remote import Remote


class Counted(BaseSource):
    """String items whose steps count up; counts the main process's ``items()`` and ``length()`` calls."""

    def __init__(self, lengths: Sequence[int], width: int = 1) -> None:
        self.lengths = list(lengths)
        self.width = width
        self.calls = {"items": 0, "length": 0}

    def index_settings(self) -> dict[str, object]:
        return {"width": self.width}

    def items(self) -> list[str]:
        self.calls["items"] += 1
        return [f"item-{k}" for k in range(len(self.lengths))]

    def fields(self) -> list[Field]:
        return [Field("x", (self.width,), "int64")]

    def length(self, item: str) -> int:
        self.calls["length"] += 1
        return self.lengths[int(item.split("-")[1])]

    def open(self, item: str, start: int = 0) -> Iterator[dict[str, np.ndarray]]:
        k = int(item.split("-")[1])
        for t in range(start, self.lengths[k]):
            yield {"x": np.full(self.width, 1000 * k + t, np.int64)}


def written(tmp_path: Path, source: Counted, plugin: str = "Counted") -> str:
    items, lengths = sindex.build(source)
    where = str(tmp_path / "idx.npz")
    sindex.write(where, sindex.encode(plugin, sindex.settings_of(source), items, lengths))
    source.calls.update(items=0, length=0)
    return where


def batches(source: Counted, **kw: object) -> list[np.ndarray]:
    with StreamLoader(source, 3, 4, seed=1, **kw) as loader:  # type: ignore[arg-type]
        return [b["x"].numpy().copy() for b in loader]


def test_the_loader_takes_items_and_lengths_from_the_index_and_asks_the_source_nothing(tmp_path: Path) -> None:
    lengths = [5, 9, 0, 3, 12, 7, 1]
    where = written(tmp_path, Counted(lengths))
    indexed = Counted(lengths)
    with StreamLoader(indexed, 3, 4, seed=1, index=where) as loader:
        assert indexed.calls == {"items": 0, "length": 0}
        assert len(loader) > 0 and loader.stream_length(1) == 9
        got = [b["x"].numpy().copy() for b in loader]
    assert indexed.calls == {"items": 0, "length": 0}
    plain = Counted(lengths)
    want = batches(plain)
    assert plain.calls["items"] == 1 and plain.calls["length"] == len(lengths)
    assert len(got) == len(want) and all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))


def test_a_stale_index_is_refused_naming_it_and_the_rebuild_command(tmp_path: Path) -> None:
    where = written(tmp_path, Counted([4, 4], width=1))
    with pytest.raises(StaleIndexError, match=r"index .*idx\.npz is stale: .*width: 1 there, 2 here.*streamcli index"):
        StreamLoader(Counted([4, 4], width=2), 2, 2, index=where)
    other = written(tmp_path, Counted([4, 4]), plugin="text")
    with pytest.raises(StaleIndexError, match="written by the 'text' source"):
        StreamLoader(Counted([4, 4]), 2, 2, index=other)


def test_a_truncated_or_missing_index_is_refused_not_half_used(tmp_path: Path) -> None:
    where = written(tmp_path, Counted([4] * 50))
    data = Path(where).read_bytes()
    Path(where).write_bytes(data[: len(data) // 2])
    with pytest.raises(IndexFileError, match=r"idx\.npz is not a whole streamcli index"):
        StreamLoader(Counted([4] * 50), 2, 2, index=where)
    with pytest.raises(IndexFileError, match="no index at"):
        StreamLoader(Counted([4] * 50), 2, 2, index=str(tmp_path / "none.npz"))


def books(tmp_path: Path, n: int = 4) -> Path:
    folder = tmp_path / "books"
    folder.mkdir()
    for k in range(n):
        (folder / f"b{k}.txt").write_text("streams of text " * (k + 1))
    return folder


def test_cli_writes_the_index_next_to_the_data_and_the_text_source_uses_it(tmp_path: Path) -> None:
    folder = books(tmp_path)
    r = CliRunner().invoke(app, ["index", "text", str(folder), "-s", "width=8", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["items"] == 4 and out["index"] == str(folder / sindex.INDEX_NAME) and out["unknown_lengths"] == 0
    (folder / "b0.txt").unlink()  # the index is a snapshot: the source does not list the folder again
    src = TextSource(folder, width=8)
    assert src.streamcli_index is not None and len(src.items()) == 4
    assert len(TextSource(folder, width=8, index="none").items()) == 3
    stale = r"width: 8 there, 16 here\); rebuild it with streamcli index text .* -s width=16"
    with pytest.raises(StaleIndexError, match=stale):
        TextSource(folder)
    r = CliRunner().invoke(app, ["preview", "text", str(folder)])
    assert r.exit_code == 2 and "is stale" in r.output and "(width: 8 there, 16 here)" in r.output
    assert r.output.rstrip().endswith(f"rebuild it with streamcli index text {folder} -s width=16"), r.output
    r = CliRunner().invoke(app, ["index", "text", str(folder), "--quiet"])  # rebuilding ignores the stale one
    assert r.exit_code == 0 and r.output == ""
    assert len(TextSource(folder).items()) == 3


def test_the_index_moves_with_its_folder_and_serves_any_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The names are written relative to the indexed folder: an index made with a relative PATH still serves a
    loader run from another directory, and after the folder (with its index) moved; a loader given the index but
    not the folder reads the items where they were indexed."""
    folder = books(tmp_path)
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(app, ["index", "text", folder.name + "/", "-s", "width=8", "--quiet"])
    assert r.exit_code == 0, r.output
    listed = TextSource(folder, width=8, index="none")
    with StreamLoader(listed, 2, 4, seed=1) as loader:
        want = [b["text"].numpy().copy() for b in loader]
    there = sindex.read(str(folder / sindex.INDEX_NAME))  # read without the folder: the items where they were
    assert there.relative and list(there.items) == [str(folder / Path(i).name) for i in listed.items()]

    moved = tmp_path / "elsewhere" / "books"
    moved.parent.mkdir()
    folder.rename(moved)
    monkeypatch.chdir(moved.parent)
    source = TextSource("books", width=8)
    assert source.streamcli_index is not None
    assert list(source.items()) == list(TextSource("books", width=8, index="none").items())
    with StreamLoader(source, 2, 4, seed=1) as loader:
        got = [b["text"].numpy().copy() for b in loader]
    assert len(got) == len(want) and all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))


def test_cli_bad_input_exits_2_with_one_line(tmp_path: Path) -> None:
    folder = books(tmp_path)
    for args in (
        ["index", "nosuch", str(folder)],
        ["index", "text", str(tmp_path / "missing")],
        ["index", "text", str(folder), "--out", str(tmp_path / "no" / "dir" / "i.npz")],
        ["index", "text", str(folder), "-s", "widht=3"],
        ["index", "sine", "8"],  # a PATH that is no folder: --out names where
        ["index", "sine", "8", "--out", str(tmp_path / "s.npz")],  # no index_settings(): no staleness check, refused
    ):
        r = CliRunner().invoke(app, args)
        assert r.exit_code == 2, (args, r.output)
        assert len(r.output.strip().splitlines()) == 1, r.output


class _Requests(logging.Handler):
    """The moto server's request lines (werkzeug logs one per request)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())

    def listing(self) -> list[str]:
        return [x for x in self.lines if "list-type=" in x or "delimiter=" in x or "prefix=" in x]

    def lists(self) -> int:
        return len(self.listing())

    def heads_of_items(self) -> int:
        """HEAD requests but those of the index itself (a length asked of an object is one)."""
        return sum(1 for x in self.lines if "HEAD " in x and sindex.INDEX_NAME not in x)


@pytest.fixture
def requests() -> Iterator[_Requests]:
    log = logging.getLogger("werkzeug")
    handler, level = _Requests(), log.level
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        log.removeHandler(handler)
        log.setLevel(level)


@pytest.mark.slow
def test_on_s3_startup_lists_nothing_with_the_index_and_once_without(
    bucket: str, moto_s3: MotoS3, requests: _Requests
) -> None:
    n = 40
    remote = Remote(bucket)
    for k in range(n):
        remote.write(f"t{k:04d}.txt", b"abc" * (k % 7 + 1))
    requests.lines.clear()
    with StreamLoader(TextSource(bucket, width=4), 4, 3) as loader:
        plain = [b["text"].numpy().copy() for b in loader]
    assert requests.lists() == 1 and requests.heads_of_items() >= n, requests.listing()
    r = CliRunner().invoke(app, ["index", "text", bucket, "-s", "width=4", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["index"] == f"{bucket}/{sindex.INDEX_NAME}"
    requests.lines.clear()
    with StreamLoader(TextSource(bucket, width=4), 4, 3) as loader:
        assert requests.lists() == 0 and requests.heads_of_items() == 0, requests.lines
        indexed = [b["text"].numpy().copy() for b in loader]
    assert requests.lists() == 0, requests.listing()
    assert len(indexed) == len(plain) and all(np.array_equal(a, b) for a, b in zip(indexed, plain, strict=True))


def test_the_index_round_trips_names_and_lengths_compactly(tmp_path: Path) -> None:
    names = ["a", "", "ünïcode/päth", "s3://b/k 1.txt", "last"]
    where = str(tmp_path / "i.npz")
    sindex.write(where, sindex.encode("p", {"k": 1}, names, np.array([3, -1, 0, 7, 2])))
    idx = sindex.read(where)
    assert list(idx.items) == names and [idx.items[k] for k in range(-5, 5)] == names + names
    assert idx.items[1:4] == names[1:4] and idx.length_list() == [3, None, 0, 7, 2]
    assert list(tmp_path.iterdir()) == [tmp_path / "i.npz"]  # no temporary file left


class MainOnly(Counted):
    """Refuses ``items()`` and ``length()`` outside the process that made it: workers must not list."""

    def __init__(self, lengths: Sequence[int]) -> None:
        super().__init__(lengths)
        self.pid = os.getpid()

    def items(self) -> list[str]:
        assert os.getpid() == self.pid, "a worker listed the items"
        return super().items()

    def length(self, item: str) -> int:
        assert os.getpid() == self.pid, "a worker asked a length"
        return super().length(item)


@pytest.mark.slow
def test_workers_take_the_items_from_the_main_process_and_list_nothing(tmp_path: Path) -> None:
    lengths = [5, 9, 0, 3, 12, 7, 1, 4]
    where = written(tmp_path, MainOnly(lengths), plugin="MainOnly")
    source = MainOnly(lengths)
    with StreamLoader(source, 4, 4, seed=1, num_workers=2, index=where) as loader:
        got = [b["x"].numpy().copy() for b in loader]
    assert source.calls == {"items": 0, "length": 0}
    with StreamLoader(Counted(lengths), 4, 4, seed=1) as loader:
        want = [b["x"].numpy().copy() for b in loader]
    assert len(got) > 0 and len(got) == len(want) and all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))
