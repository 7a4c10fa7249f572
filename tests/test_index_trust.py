"""An index is checked, not trusted (issue 46 §12): a file changed since the index was written is refused where it is
opened, naming the rebuild command; lengths edited by hand, names that climb out of the folder and a FIFO given as
the index are refused; ``index --on-error skip --json`` names what it left out; an index written before the
fingerprints still loads, with a warning naming the rebuild."""

from __future__ import annotations

import io
import json
import os
import shutil
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import data_root, needs_shared, shared_data
from streamcli_sources.text import TextSource
from typer.testing import CliRunner

from streamcli import StreamLoader, index_format
from streamcli import index as sindex
from streamcli.cli import app
from streamcli.errors import IndexFileError, StaleIndexError
from streamcli.storage.remote import Remote

TEXT = shared_data("text")


def _index(*args: str) -> dict[str, Any]:
    r = CliRunner().invoke(app, ["index", *args, "--json"])
    assert r.exit_code == 0, r.output
    out: dict[str, Any] = json.loads(r.stdout)
    return out


def _texts(tmp_path: Path) -> Path:
    folder = tmp_path / "books"
    folder.mkdir()
    assert TEXT is not None
    for name in ("tom_sawyer_excerpt.txt", "fortunes_literature.txt"):
        shutil.copy2(TEXT / name, folder / name)
    return folder


def _steps(loader: StreamLoader) -> int:
    return sum(int(b.valid.sum()) for b in loader)


def _rewrite(where: Path, **arrays: np.ndarray) -> None:
    """The index at ``where`` with ``arrays`` replaced, its header and seal made to match (as a tool would)."""
    with np.load(where) as z:
        data = {k: z[k] for k in z.files}
    data.update(arrays)
    meta = json.loads(data["meta"].tobytes())
    meta["count"] = len(data["lengths"])
    meta["digest"] = index_format.names_digest(data["names"])
    meta["seal"] = index_format.seal_of(meta, data)
    data["meta"] = np.frombuffer(json.dumps(meta).encode(), np.uint8)
    buf = io.BytesIO()
    np.savez(buf, **data)
    where.write_bytes(buf.getvalue())


@needs_shared("text")
def test_a_file_appended_to_after_indexing_is_refused_where_it_is_opened_naming_the_rebuild(tmp_path: Path) -> None:
    folder = _texts(tmp_path)
    _index("text", str(folder), "-s", "width=64")
    with StreamLoader(TextSource(folder, width=64), 2, 16) as loader:
        whole = _steps(loader)
    assert whole == sum(-(-(folder / n).stat().st_size // 64) for n in os.listdir(folder) if n.endswith(".txt"))
    with open(folder / "tom_sawyer_excerpt.txt", "ab") as f:
        f.write((TEXT / "tom_sawyer_excerpt.txt").read_bytes() * 2)  # the file is 3 times as long
    with StreamLoader(TextSource(folder, width=64), 2, 16) as loader:
        with pytest.raises(StaleIndexError, match=r"tom_sawyer_excerpt.txt.*changed.*streamcli index text "):
            _steps(loader)


def test_an_index_with_lengths_edited_by_hand_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "t"
    folder.mkdir()
    (folder / "a.txt").write_bytes(b"x" * 40)
    (folder / "b.txt").write_bytes(b"y" * 24)
    _index("text", str(folder), "-s", "width=8")
    where = folder / sindex.INDEX_NAME
    assert sindex.read(str(where)).length_list() == [5, 3]
    with np.load(where) as z:
        data = {k: z[k] for k in z.files}
    data["lengths"] = np.array([5, 2], np.int64)  # a length shortened, the header left as it was
    buf = io.BytesIO()
    np.savez(buf, **data)
    where.write_bytes(buf.getvalue())
    with pytest.raises(IndexFileError, match=r"changed after it was written.*streamcli index"):
        sindex.read(str(where))
    with pytest.raises(IndexFileError, match="changed after it was written"):
        TextSource(folder, width=8)


@pytest.mark.parametrize("name", ["../../secret.txt", "sub/../../secret.txt", "/etc/hostname"])
def test_names_that_climb_out_of_the_indexed_folder_are_refused(tmp_path: Path, name: str) -> None:
    folder = tmp_path / "deep" / "t"
    folder.mkdir(parents=True)
    (folder / "a.txt").write_bytes(b"x" * 40)
    (tmp_path / "secret.txt").write_bytes(b"secret")
    _index("text", str(folder), "-s", "width=8")
    where = folder / sindex.INDEX_NAME
    blob = np.frombuffer(f"a.txt\0{name}".encode(), np.uint8)
    _rewrite(where, names=blob, lengths=np.array([5, 1], np.int64), sizes=np.array([40, -1]), marks=np.array([0, -1]))
    with pytest.raises(IndexFileError, match=rf"{name.replace('.', '[.]')!s}.*outside the indexed folder"):
        TextSource(folder, width=8)


def test_an_index_that_is_a_fifo_is_refused_without_hanging(tmp_path: Path) -> None:
    fifo = tmp_path / "index.npz"
    os.mkfifo(fifo)
    folder = tmp_path / "t"
    folder.mkdir()
    (folder / "a.txt").write_bytes(b"x" * 40)
    got: list[BaseException] = []

    def load() -> None:
        try:
            StreamLoader(TextSource(folder, width=8, index="none"), 1, 4, index=str(fifo)).close()
        except BaseException as exc:
            got.append(exc)

    t = threading.Thread(target=load, daemon=True)
    t.start()
    t.join(20)
    assert not t.is_alive(), "a FIFO given as index= hangs the loader"
    assert len(got) == 1 and isinstance(got[0], IndexFileError), got
    assert "not a regular file" in str(got[0])


def test_an_index_from_before_the_fingerprints_loads_with_a_warning_naming_the_rebuild(tmp_path: Path) -> None:
    folder = tmp_path / "t"
    folder.mkdir()
    (folder / "a.txt").write_bytes(b"x" * 40)
    _index("text", str(folder), "-s", "width=8")
    where = folder / sindex.INDEX_NAME
    with np.load(where) as z:
        data = {k: z[k] for k in z.files if k in ("names", "lengths", "meta")}
    meta = json.loads(data["meta"].tobytes())
    del meta["seal"]
    data["meta"] = np.frombuffer(json.dumps(meta).encode(), np.uint8)
    buf = io.BytesIO()
    np.savez(buf, **data)
    where.write_bytes(buf.getvalue())
    with pytest.warns(UserWarning, match=r"no fingerprint.*rebuild it with streamcli index text"):
        source = TextSource(folder, width=8)
    with StreamLoader(source, 1, 4) as loader:
        assert _steps(loader) == 5


@pytest.mark.slow  # decodes real clips, with 2 workers
def test_a_clip_replaced_by_a_longer_one_is_refused_with_workers(tmp_path: Path) -> None:
    folder = tmp_path / "clips"
    folder.mkdir()
    shutil.copy2(data_root("video") / "dummy_video.avi", folder / "a.avi")
    shutil.copy2(data_root("video") / "realshort.mp4", folder / "b.mp4")
    cache = str(tmp_path / "cache")
    _index("video", str(folder), "-s", "scan=true", "-s", f"cache_dir={cache}")
    shutil.copyfile(data_root("video") / "realshort.mp4", folder / "a.avi")  # a longer clip in its place
    from streamcli_sources.video import VideoSource

    source = VideoSource(folder, size=(16, 16), scan=True, cache_dir=cache)
    with StreamLoader(source, 2, 8, num_workers=2) as loader:
        with pytest.raises(StaleIndexError, match=r"a.avi.*changed.*streamcli index video"):
            _steps(loader)


@pytest.mark.slow  # runs the CLI over a damaged clip
def test_index_on_error_skip_json_names_the_clip_it_left_out(tmp_path: Path) -> None:
    folder = tmp_path / "clips"
    folder.mkdir()
    shutil.copy2(data_root("video") / "dummy_video.avi", folder / "a.avi")
    (folder / "broken.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42" + os.urandom(2000))
    r = CliRunner().invoke(app, ["index", "video", str(folder), "-s", "scan=true", "--on-error", "skip", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["items"] == 1
    assert [Path(s["item"]).name for s in out["skipped"]] == ["broken.mp4"] and out["skipped"][0]["error"]


@pytest.mark.slow  # a local S3 server
def test_an_s3_object_rewritten_longer_after_indexing_is_refused(bucket: str) -> None:
    remote = Remote(bucket)
    for k in range(3):
        remote.write(f"t{k}.txt", b"abcd" * 10)
    _index("text", bucket, "-s", "width=4")
    with StreamLoader(TextSource(bucket, width=4), 2, 4) as loader:
        assert _steps(loader) == 30
    remote.write("t1.txt", b"abcd" * 30)  # an append, as object storage does one: the object written again
    with StreamLoader(TextSource(bucket, width=4), 2, 4) as loader:
        with pytest.raises(StaleIndexError, match=r"t1.txt.*changed.*streamcli index text s3://"):
            _steps(loader)
