"""The text source over Parquet and JSON-lines rows of real prose (../shared/data/text, split into documents), as
bytes and as token ids from a BPE trained here: each row one whole stream, shuffled, resumable, refused when wrong."""

from __future__ import annotations

import json
import pickle
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from _resume import check_resume, run_epochs
from conftest import require_shared

from streamcli import StreamLoader, index, load_source
from streamcli.plugins import load_factory
from streamcli.source import iter_steps

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
tokenizers = pytest.importorskip("tokenizers")

B, T, WIDTH = 4, 16, 4


def tom_sawyer_paragraphs() -> list[str]:
    text = (require_shared("text") / "tom_sawyer_excerpt.txt").read_text("utf-8")
    return [p.strip() for p in text.split("\n\n") if p.strip()]


def fortunes() -> list[str]:
    text = (require_shared("text") / "fortunes_literature.txt").read_text("utf-8")
    return [f.strip("\n") for f in text.split("\n%\n") if f.strip()]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Tom Sawyer's paragraphs in a Parquet file of row groups of 16 rows (with a number column), the fortunes as
    JSON lines (with a blank line and a numeric field), and a byte-level BPE trained on both, saved to JSON."""
    root = tmp_path_factory.mktemp("columns")
    paras = tom_sawyer_paragraphs()
    table = pa.table({"id": np.arange(len(paras)), "body": paras, "text": paras})
    pq.write_table(table, root / "tom.parquet", row_group_size=16)
    lines = [json.dumps({"text": f, "n": k}) for k, f in enumerate(fortunes())]
    lines.insert(3, "")
    (root / "fortunes.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(paras + fortunes(), trainers.BpeTrainer(vocab_size=400, show_progress=False))
    tok.save(str(root / "bpe.json"))
    return {"parquet": root / "tom.parquet", "jsonl": root / "fortunes.jsonl", "tokenizer": root / "bpe.json"}


def documents(kind: str) -> list[str]:
    return tom_sawyer_paragraphs() if kind == "parquet" else fortunes()


def encoded(corpus: dict[str, Path], text: str) -> list[int]:
    from tokenizers import Tokenizer

    return list(Tokenizer.from_file(str(corpus["tokenizer"])).encode(text, add_special_tokens=False).ids)


def streams_of(batches: list[dict[str, np.ndarray]], field: str, count: str) -> dict[int, list[int]]:
    """Each stream's values in step order, checked to arrive whole: positions 0, 1, 2... with is_first at 0 only."""
    steps: dict[int, list[tuple[int, list[int]]]] = {}
    for bt in batches:
        for t, b in zip(*np.nonzero(bt["valid"]), strict=True):
            s, p = int(bt["stream"][t, b]), int(bt["position"][t, b])
            assert bool(bt["is_first"][t, b]) == (p == 0)
            steps.setdefault(s, []).append((p, bt[field][t, b][: int(bt[count][t, b])].tolist()))
    out = {}
    for s, got in steps.items():
        assert [p for p, _ in got] == list(range(len(got))), f"stream {s} is not delivered once, in order"
        out[s] = [v for _, vals in got for v in vals]
    return out


@pytest.mark.parametrize("kind", ["parquet", "jsonl"])
def test_every_row_is_delivered_once_as_one_whole_stream_of_its_token_ids(corpus: dict[str, Path], kind: str) -> None:
    src = load_source("text", str(corpus[kind]), tokenizer=str(corpus["tokenizer"]), width=WIDTH)
    docs = documents(kind)
    assert len(src.items()) == len(docs) and src.length(src.items()[0]) is None  # unindexed: unknown lengths
    with StreamLoader(src, B, T, seed=3) as loader:
        batches = run_epochs(loader, 1)
        assert {b["tokens"].dtype for b in batches} == {np.dtype(np.int64)}
    got = streams_of(batches, "tokens", "ntokens")
    assert sorted(got) == list(range(len(docs)))  # every document, none twice (streams_of checks positions)
    for s, ids in got.items():
        assert ids == encoded(corpus, docs[s]), f"document {s} ({src.item_name(src.items()[s])})"
    starts = [int(b["stream"][0, r]) for b in batches for r in range(B) if b["is_first"][0, r]]
    assert starts != sorted(starts)  # shuffled


@pytest.mark.parametrize("kind", ["parquet", "jsonl"])
def test_without_a_tokenizer_each_row_streams_its_utf8_bytes(corpus: dict[str, Path], kind: str) -> None:
    src = load_source("text", str(corpus[kind]), width=8)
    docs = documents(kind)
    assert [f.name for f in src.fields()] == ["text", "nbytes"]
    for k in (0, 17, len(docs) - 1):
        data = b"".join(s["text"][: int(s["nbytes"])].tobytes() for s in iter_steps(src, src.items()[k]))
        assert data == docs[k].encode("utf-8")
    mid = list(iter_steps(src, src.items()[17], start=3))  # a reopen at a position: the same steps from there
    np.testing.assert_array_equal(mid[0]["text"], list(iter_steps(src, src.items()[17]))[3]["text"])


def test_items_are_small_tuples_and_parquet_rows_follow_row_groups(corpus: dict[str, Path]) -> None:
    src = load_source("text", str(corpus["parquet"]), tokenizer=str(corpus["tokenizer"]))
    items = src.items()
    assert items[0] == (str(corpus["parquet"]), 0, 0) and items[16] == (str(corpus["parquet"]), 1, 0)
    assert src.item_name(items[17]) == "tom.parquet[group 1, row 1]"
    list(iter_steps(src, items[20]))  # the worker-side cache fills...
    assert len(pickle.dumps(src)) < 2_000 + 60 * len(items)  # ...but is never pickled to workers
    jsrc = load_source("text", str(corpus["jsonl"]))
    first, second = jsrc.items()[:2]
    line = corpus["jsonl"].read_bytes()[second[1] :].split(b"\n", 1)[0]
    assert first == (str(corpus["jsonl"]), 0) and json.loads(line)["n"] == 1  # the byte offset of the next line


def test_the_text_source_says_it_opens_parquet_and_jsonl_paths(corpus: dict[str, Path], tmp_path: Path) -> None:
    text = load_factory("text")
    assert text.can_open(str(corpus["parquet"])) and text.can_open(str(corpus["jsonl"]))
    assert text.can_open(str(corpus["parquet"].parent))
    (tmp_path / "table.csv").write_text("a,b\n")
    assert not text.can_open(str(tmp_path / "table.csv")) and not text.can_open(str(tmp_path))


def test_an_index_records_the_token_count_of_every_row(corpus: dict[str, Path], tmp_path: Path) -> None:
    kw = {"tokenizer": str(corpus["tokenizer"]), "width": WIDTH}
    src = load_source("text", str(corpus["parquet"]), **kw)
    items, lengths = index.build(src)
    where = str(tmp_path / "tom.index.npz")
    index.write(where, index.encode("text", index.settings_of(src), items, lengths, root=str(corpus["parquet"])))
    want = [-(-len(encoded(corpus, d)) // WIDTH) for d in documents("parquet")]
    assert lengths.tolist() == want
    indexed = load_source("text", str(corpus["parquet"]), index=where, **kw)
    assert indexed.items() == src.items() and [indexed.length(i) for i in indexed.items()] == want
    with StreamLoader(indexed, B, T) as loader:
        assert len(loader) == len(run_epochs(loader, 1)) > 0
    with pytest.raises(ValueError, match="stale"):  # another tokenizer's counts are not these
        load_source("text", str(corpus["parquet"]), index=where, width=WIDTH)
    other = tmp_path / "other.json"
    other.write_text(corpus["tokenizer"].read_text() + "\n")
    with pytest.raises(ValueError, match="stale") as stale:  # the rebuild command names the file, not its digest
        load_source("text", str(corpus["parquet"]), index=where, width=WIDTH, tokenizer=str(other))
    assert str(stale.value).endswith(f" -s tokenizer={other}")


def test_a_text_file_takes_a_tokenizer_too(corpus: dict[str, Path]) -> None:
    path = str(require_shared("text") / "tom_sawyer_excerpt.txt")
    src = load_source("text", path, tokenizer=str(corpus["tokenizer"]), width=1)
    assert [(f.name, f.shape, f.dtype) for f in src.fields()] == [("tokens", (1,), "<i8")]  # one id a step: no count
    ids = [int(s["tokens"][0]) for s in iter_steps(src, path)]
    assert ids == encoded(corpus, Path(path).read_text("utf-8"))


def test_a_missing_column_is_refused_with_the_columns_listed(corpus: dict[str, Path]) -> None:
    with pytest.raises(ValueError, match=r"tom\.parquet has no column 'title'; its columns are 'id', 'body', 'text'"):
        load_source("text", str(corpus["parquet"]), column="title")
    with pytest.raises(ValueError, match=r"fortunes\.jsonl has no column 'title'; its columns are 'text', 'n'"):
        load_source("text", str(corpus["jsonl"]), column="title")
    src = load_source("text", str(corpus["parquet"]), column="body", width=8)  # another column is read as named
    assert b"".join(s["text"][: int(s["nbytes"])].tobytes() for s in iter_steps(src, src.items()[5])) == (
        tom_sawyer_paragraphs()[5].encode()
    )


def test_a_column_that_is_not_text_is_refused(corpus: dict[str, Path]) -> None:
    with pytest.raises(ValueError, match=r"tom\.parquet: column 'id' holds int64, not text"):
        load_source("text", str(corpus["parquet"]), column="id")
    with pytest.raises(ValueError, match=r"fortunes\.jsonl: column 'n' holds int, not text"):
        load_source("text", str(corpus["jsonl"]), column="n")


def test_a_bad_tokenizer_file_is_refused_with_the_file_named(corpus: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"tokenizer='.*fortunes\.jsonl' is not a tokenizers JSON file"):
        load_source("text", str(corpus["parquet"]), tokenizer=str(corpus["jsonl"]))
    with pytest.raises(ValueError, match="no such file"):
        load_source("text", str(corpus["parquet"]), tokenizer=str(tmp_path / "missing.json"))


def test_a_missing_package_is_named_with_its_install_command(
    corpus: dict[str, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)  # as if pyarrow were not installed
    with pytest.raises(ImportError, match=r"pip install 'streamcli\[tables\]'"):
        load_source("text", str(corpus["parquet"]))
    monkeypatch.setitem(sys.modules, "tokenizers", None)
    fresh = tmp_path / "bpe.json"  # a tokenizer this process has not loaded yet
    fresh.write_bytes(corpus["tokenizer"].read_bytes())
    with pytest.raises(ImportError, match=r"pip install 'streamcli\[tokenize\]'"):
        load_source("text", str(corpus["jsonl"]), tokenizer=str(fresh))


def test_a_row_group_is_read_once_for_the_rows_opened_from_it(
    corpus: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    src = load_source("text", str(corpus["parquet"]), width=8)
    reads: list[int] = []
    real = pq.ParquetFile.read_row_group
    monkeypatch.setattr(pq.ParquetFile, "read_row_group", lambda self, i, **kw: reads.append(i) or real(self, i, **kw))
    for k in (0, 1, 2, 15, 16, 17, 3):  # group 0's rows, group 1's, then group 0 again (still kept)
        list(iter_steps(src, src.items()[k]))
    assert reads == [0, 1]


def make(corpus: dict[str, Path], kind: str) -> Callable[[], object]:
    return lambda: load_source("text", str(corpus[kind]), tokenizer=str(corpus["tokenizer"]), width=WIDTH)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["parquet", "jsonl"])
def test_zero_and_two_workers_give_identical_batches(corpus: dict[str, Path], kind: str) -> None:
    runs = []
    for workers in (0, 2):
        with StreamLoader(make(corpus, kind)(), B, T, num_workers=workers, seed=5) as loader:  # type: ignore[arg-type]
            runs.append(run_epochs(loader, 1))
    assert len(runs[0]) == len(runs[1]) > 10
    for a, b in zip(*runs, strict=True):
        assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "before", "after"), [("parquet", 0, 2), ("jsonl", 2, 0)])
def test_resume_is_exact_mid_epoch_onto_another_worker_count(
    corpus: dict[str, Path], kind: str, before: int, after: int
) -> None:
    reference = check_resume(make(corpus, kind), B, T, cuts=[7], workers_before=before, workers_after=after, seed=2)  # type: ignore[arg-type]
    assert len(reference) > 14
