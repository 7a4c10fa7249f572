"""The text source over real books (tests/data/text, and ../shared/data/text where present): bytes in, bytes out,
BOM and CRLF handled."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import data_root, require_shared
from streamcli_sources.text import TextSource

from streamcli import load_source
from streamcli.source import iter_steps

BOOKS = {
    "tests/data": ["fortunes_literature.txt", "tom_sawyer_excerpt.txt"],
    "shared": [
        "devils_dictionary.txt",
        "fortunes_literature.txt",
        "sherlock_holmes_pg1661.txt",
        "tom_sawyer_excerpt.txt",
    ],
}
BOM = b"\xef\xbb\xbf"


def joined(src: TextSource, item: str, start: int = 0) -> bytes:
    return b"".join(s["text"][: int(s["nbytes"])].tobytes() for s in iter_steps(src, item, start))


@pytest.mark.parametrize("where", list(BOOKS))
def test_every_book_streams_back_its_exact_bytes(where: str) -> None:
    src = TextSource(data_root("text") if where == "tests/data" else require_shared("text"), width=64)
    assert [Path(i).name for i in src.items()] == BOOKS[where]
    for item in src.items():
        data = Path(item).read_bytes().removeprefix(BOM)
        assert joined(src, item) == data
        assert src.length(item) == len(list(iter_steps(src, item))) == -(-len(data) // 64)


def test_sherlock_bom_and_crlf() -> None:
    path = str(require_shared("text") / "sherlock_holmes_pg1661.txt")
    raw = Path(path).read_bytes()
    assert raw.startswith(BOM) and b"\r\n" in raw  # the premise, from the data's README
    kept = TextSource(path, width=32)
    assert joined(kept, path) == raw[3:] and b"\r\n" in joined(kept, path)
    lf = TextSource(path, width=32, newlines="lf")
    assert joined(lf, path) == raw[3:].replace(b"\r\n", b"\n")
    assert lf.length(path) == -(-len(raw[3:].replace(b"\r\n", b"\n")) // 32) == len(list(iter_steps(lf, path)))
    bom = TextSource(path, width=32, keep_bom=True)
    assert joined(bom, path) == raw and bom.length(path) == -(-len(raw) // 32)


def test_resume_is_exact() -> None:
    path = str(require_shared("text") / "sherlock_holmes_pg1661.txt")
    src = TextSource(path, width=100, newlines="lf")
    full = list(iter_steps(src, path))
    for k in (1, 2000, len(full) - 1, len(full)):
        resumed = list(iter_steps(src, path, start=k))
        assert len(resumed) == len(full) - k
        for a, b in zip(resumed, full[k:], strict=True):
            np.testing.assert_array_equal(a["text"], b["text"])
            assert a["nbytes"] == b["nbytes"]


def test_any_encoding_passes_through_as_bytes(tmp_path: Path) -> None:
    for name, data in {
        "latin1.txt": "café crème\r\n".encode("latin-1"),
        "utf16.txt": "naïve\n".encode("utf-16"),  # with its own BOM, which is not UTF-8's: kept
        "bad_utf8.txt": b"\xff\xfe\xfd\x80abc",
        "empty.txt": b"",
    }.items():
        (tmp_path / name).write_bytes(data)
    src = TextSource(tmp_path, width=4)
    for item in src.items():
        assert joined(src, item) == Path(item).read_bytes()
        assert src.length(item) == len(list(iter_steps(src, item)))


def test_steps_match_the_declared_fields_and_discovery_finds_it() -> None:
    src = load_source("text", str(data_root("text") / "tom_sawyer_excerpt.txt"), width=8)
    (item,) = src.items()
    fields = {f.name: f for f in src.fields()}
    for step in iter_steps(src, item):
        for name, f in fields.items():
            value = np.asarray(step[name])
            assert value.shape == f.shape and value.dtype == f.np_dtype
    assert TextSource.can_open(str(data_root("text")))
    with pytest.raises(ValueError, match="width=0 must be at least 1"):
        TextSource(data_root("text"), width=0)


@pytest.mark.parametrize("width", [1, 7, 16])
def test_opening_a_file_deep_inside_reads_the_same_steps_as_reading_it_whole(tmp_path: Path, width: int) -> None:
    """Files are read block by block from ``start`` (a segment or a resume reads nothing before it), BOM and a
    short last step included, exactly as the literal path reads the same bytes from memory."""
    body = (data_root("text") / "tom_sawyer_excerpt.txt").read_bytes()[:3001]
    path = tmp_path / "bom.txt"
    path.write_bytes(BOM + body)
    src, mem = TextSource(str(path), width=width), TextSource([body.decode("latin-1")], width=width, strings=True)
    n = src.length(str(path))
    assert n == -(-len(body) // width)
    for start in sorted({s for s in (0, 1, 255, 256, 257, n - 1) if s < n}):
        got = [(s["text"].tobytes(), int(s["nbytes"])) for s in iter_steps(src, str(path), start)]
        want = [(s["text"].tobytes(), int(s["nbytes"])) for s in iter_steps(mem, mem.items()[0], start)]
        assert len(got) == n - start
        assert [g[1] for g in got] == [x[1] for x in want]
        assert joined(src, str(path), start) == body[start * width :]


def test_a_file_that_shrinks_while_it_is_read_is_an_error_not_zero_bytes(tmp_path: Path) -> None:
    path = tmp_path / "a.txt"
    path.write_bytes(b"x" * 100_000)
    blocks = TextSource(str(path), width=1).open(str(path))
    next(blocks)
    path.write_bytes(b"x" * 300)  # truncated in place: the open file sees it
    with pytest.raises(OSError, match="shrank while it was being read"):
        list(blocks)
