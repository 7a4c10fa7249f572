"""The tokens source over real prose (``../shared/data/text``) tokenized here two ways (a BPE trained by
``tokenizers``, and bytes as ids), in every format it reads: each document is delivered once, whole, shuffled,
the same with workers, resumes exactly, and bad files are refused by name."""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from _resume import check_resume, run_epochs
from _token_corpus import bpe_ids, byte_ids, documents, write_binidx, write_llmc, write_nanogpt, write_npy
from conftest import require_shared
from streamcli_sources.tokens import TokensSource
from typer.testing import CliRunner

from streamcli import StreamLoader, load_source
from streamcli.cli import app
from streamcli.errors import StaleIndexError
from streamcli.source import iter_steps

Docs = list[np.ndarray]
FORMATS = ("nanogpt", "llmc", "binidx", "npy")
B, T = 5, 61  # odd sizes: documents end anywhere in a batch


@pytest.fixture(scope="module")
def corpus() -> dict[str, tuple[Docs, int]]:
    folder = require_shared("text")
    docs = documents(folder)
    return {"bytes": byte_ids(docs), "bpe": bpe_ids(docs, folder)}


def write(fmt: str, where: Path, docs: Docs, eot: int) -> tuple[Path, int | None]:
    """The corpus in format ``fmt`` under ``where``, and the ``eot`` option that reads it (binidx: none)."""
    if fmt == "nanogpt":
        return write_nanogpt(where / "train.bin", docs, eot), eot
    if fmt == "llmc":
        return write_llmc(where / "shards", docs, eot), eot
    if fmt == "binidx":
        return write_binidx(where / "corpus", docs), None
    return write_npy(where / "arrays", docs, eot), eot


def streams_of(batches: list[dict[str, np.ndarray]]) -> dict[int, np.ndarray]:
    """Each stream's ids, put back in position order from the batches' flags (every position exactly once)."""
    got: dict[int, dict[int, int]] = {}
    for bt in batches:
        t, b = np.nonzero(bt["valid"])
        cols = bt["stream"][t, b].tolist(), bt["position"][t, b].tolist(), bt["tokens"][t, b, 0].tolist()
        for s, p, v in zip(*cols, strict=True):
            assert p not in got.setdefault(s, {}), f"stream {s} position {p} delivered twice"
            got[s][p] = v
    out = {}
    for s, ps in got.items():
        assert sorted(ps) == list(range(len(ps))), f"stream {s} has holes"
        out[s] = np.asarray([ps[p] for p in range(len(ps))], np.int64)
    return out


@pytest.mark.parametrize("ids", ["bytes", "bpe"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_every_document_is_delivered_once_whole_and_shuffled(
    corpus: dict[str, tuple[Docs, int]], tmp_path: Path, fmt: str, ids: str
) -> None:
    docs, eot = corpus[ids]
    path, eot_opt = write(fmt, tmp_path, docs, eot)
    src = load_source("tokens", str(path), eot=eot_opt)
    assert len(src.items()) == len(docs)
    assert [src.length(i) for i in src.items()] == [len(d) for d in docs]
    with StreamLoader(src, B, T, seed=3) as loader:
        batches = run_epochs(loader, 1)
        assert loader.fields[0].name == "tokens" and batches[0]["tokens"].dtype == np.int64
    got = streams_of(batches)
    assert sorted(got) == list(range(len(docs)))
    for s, d in enumerate(docs):
        assert np.array_equal(got[s], d), f"document {s} differs"
    first = batches[0]["stream"][0].tolist()
    assert first != list(range(B)), "the streams were not shuffled"
    assert int(batches[0]["is_first"][0].sum()) == B


def test_open_and_window_give_the_same_steps_from_any_start(
    corpus: dict[str, tuple[Docs, int]], tmp_path: Path
) -> None:
    docs, eot = corpus["bpe"]
    src = TokensSource(write_nanogpt(tmp_path / "train.bin", docs, eot), eot=eot)
    for item in (0, 7, len(docs) - 1):
        steps = np.stack([np.asarray(s["tokens"]) for s in iter_steps(src, item, 5)])
        assert steps.dtype == np.int64 and np.array_equal(steps[:, 0], docs[item][5:])
        assert np.array_equal(np.asarray(src.window(item)["tokens"][5:])[:, 0], docs[item][5:])


@pytest.mark.parametrize("width", [4, 7])
def test_a_wider_step_pads_a_documents_last_step_and_counts_its_real_ids(
    corpus: dict[str, tuple[Docs, int]], tmp_path: Path, width: int
) -> None:
    docs, eot = corpus["bytes"]
    src = TokensSource(write_llmc(tmp_path / "s", docs, eot), eot=eot, width=width)
    assert [f.name for f in src.fields()] == ["tokens", "ntokens"]
    with StreamLoader(src, 3, 40, seed=0) as loader:
        batches = run_epochs(loader, 1)
    rows: dict[int, dict[int, np.ndarray]] = {}
    for bt in batches:
        t, b = np.nonzero(bt["valid"])
        cols = bt["stream"][t, b], bt["position"][t, b], bt["tokens"][t, b], bt["ntokens"][t, b]
        for s, p, x, n in zip(*cols, strict=True):
            assert (x[n:] == 0).all()
            rows.setdefault(int(s), {})[int(p)] = x[:n]
    for s, d in enumerate(docs):
        assert np.array_equal(np.concatenate([rows[s][p] for p in sorted(rows[s])]), d)
        assert src.length(s) == -(-len(d) // width)


def test_resume_is_exact_mid_epoch(corpus: dict[str, tuple[Docs, int]], tmp_path: Path) -> None:
    docs, eot = corpus["bpe"]
    path = write_nanogpt(tmp_path / "train.bin", docs, eot)
    check_resume(lambda: TokensSource(path, eot=eot), B, T, cuts=[1, 9, 23], seed=5)


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["nanogpt", "binidx"])
def test_two_workers_give_the_batches_of_none_and_resume_onto_another_count(
    corpus: dict[str, tuple[Docs, int]], tmp_path: Path, fmt: str
) -> None:
    docs, eot = corpus["bpe"]
    path, eot_opt = write(fmt, tmp_path, docs, eot)

    def make() -> TokensSource:
        return TokensSource(path, eot=eot_opt)

    with StreamLoader(make(), B, T, seed=1) as loader:
        alone = run_epochs(loader, 1)
    with StreamLoader(make(), B, T, seed=1, num_workers=2) as loader:
        both = run_epochs(loader, 1)
    assert len(alone) == len(both)
    for a, b in zip(alone, both, strict=True):
        assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    check_resume(make, B, T, cuts=[11], workers_before=0, workers_after=2, seed=1)
    check_resume(make, B, T, cuts=[17], workers_before=2, workers_after=0, seed=1)


def _truncate(path: Path, keep: int) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:keep])


BadFile = Callable[[Path, Docs, int], tuple[Path, dict[str, object], str]]


def _short_shard(d: Path, docs: Docs, eot: int) -> tuple[Path, dict[str, object], str]:
    folder = write_llmc(d / "s", docs, eot)
    shard = sorted(folder.glob("*.bin"))[1]
    _truncate(shard, shard.stat().st_size - 100)
    return folder, {"eot": eot}, shard.name


def _idx_too_big(d: Path, docs: Docs, eot: int) -> tuple[Path, dict[str, object], str]:
    path = write_binidx(d / "corpus", docs)
    _truncate(path, path.stat().st_size - 64)  # the .idx now points past the .bin's end
    return path, {}, "corpus.idx"


def _odd_size(d: Path, docs: Docs, eot: int) -> tuple[Path, dict[str, object], str]:
    path = write_nanogpt(d / "train.bin", docs, eot)
    with open(path, "ab") as f:
        f.write(b"\x01")
    return path, {"eot": eot}, "train.bin"


def _wrong_dtype(d: Path, docs: Docs, eot: int) -> tuple[Path, dict[str, object], str]:
    path = d / "train.bin"
    np.concatenate([np.append(x, eot) for x in docs[:3]]).astype(np.uint16)[:-1].tofile(path)  # an odd count
    return path, {"eot": eot, "dtype": "uint32"}, "train.bin"


def _eot_out_of_range(d: Path, docs: Docs, eot: int) -> tuple[Path, dict[str, object], str]:
    return write_nanogpt(d / "train.bin", docs, eot), {"eot": 70000}, "train.bin"


@pytest.mark.parametrize("bad", [_short_shard, _idx_too_big, _odd_size, _wrong_dtype, _eot_out_of_range])
def test_a_bad_file_is_refused_with_its_name(corpus: dict[str, tuple[Docs, int]], tmp_path: Path, bad: BadFile) -> None:
    docs, eot = corpus["bytes"]
    path, options, name = bad(tmp_path, docs, eot)
    with pytest.raises(ValueError, match=name.replace(".", r"\.")):
        load_source("tokens", str(path), **options).items()


def test_a_binidx_index_of_another_version_is_refused(tmp_path: Path) -> None:
    prefix = tmp_path / "c"
    write_binidx(prefix, [np.arange(10), np.arange(5)])
    raw = bytearray(prefix.with_suffix(".idx").read_bytes())
    raw[9:17] = struct.pack("<Q", 2)
    prefix.with_suffix(".idx").write_bytes(bytes(raw))
    with pytest.raises(ValueError, match=r"c\.idx.*version 2"):
        TokensSource(prefix.with_suffix(".bin"))


def test_the_index_keeps_the_scan_and_is_stale_once_the_file_changes(
    corpus: dict[str, tuple[Docs, int]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs, eot = corpus["bpe"]
    path = write_nanogpt(tmp_path / "train.bin", docs, eot)
    got = CliRunner().invoke(app, ["index", "tokens", str(path), "-s", f"eot={eot}", "--json"])
    assert got.exit_code == 0, got.output
    written = json.loads(got.stdout)
    assert written["items"] == len(docs) and Path(written["index"]) == tmp_path / "train.bin.streamcli-index.npz"
    import streamcli_sources.tokens as module

    def no_scan(*args: object) -> None:
        raise AssertionError("scanned although an index is there")

    monkeypatch.setattr(module, "eot_positions", no_scan)
    src = TokensSource(path, eot=eot)
    assert src.streamcli_index is not None
    assert [src.length(i) for i in src.items()] == [len(d) for d in docs]
    assert np.array_equal(np.asarray(src.window(4)["tokens"])[:, 0], docs[4])
    with pytest.raises(StaleIndexError, match="eot"):
        TokensSource(path, eot=eot + 1)
    with open(path, "ab") as f:
        f.write(np.asarray([eot], np.uint16).tobytes())
    with pytest.raises(StaleIndexError, match=r"train\.bin"):
        TokensSource(path, eot=eot)


def test_a_url_is_refused_with_the_fix() -> None:
    with pytest.raises(ValueError, match="must be local"):
        TokensSource("s3://bucket/train.bin")


def test_plugins_json_describes_every_option() -> None:
    got = CliRunner().invoke(app, ["plugins", "tokens", "--json"])
    assert got.exit_code == 0, got.output
    info = json.loads(got.stdout)
    options = {o["name"]: o for o in info["options"]}
    assert set(options) >= {"eot", "dtype", "width", "index"}
    for name in ("eot", "dtype", "width", "index"):
        assert len(options[name].get("description") or "") > 20, (name, options[name])


def test_the_preview_shows_each_rows_recent_token_ids(corpus: dict[str, tuple[Docs, int]], tmp_path: Path) -> None:
    from streamcli.cli.preview import frame_from_batch

    docs, eot = corpus["bpe"]
    src = TokensSource(write_nanogpt(tmp_path / "train.bin", docs, eot), eot=eot)
    with StreamLoader(src, 3, 20, seed=0) as loader:
        batch = next(iter(loader))
        frame = frame_from_batch(batch, displays={f.name: f.display for f in loader.fields})
        stream, position = batch.stream.numpy(), batch.position.numpy()
    for row in frame.rows:
        assert row.kinds["tokens"] == "text"
        s, p = int(stream[-1, row.row]), int(position[-1, row.row])
        want = " ".join(map(str, docs[s][max(0, p + 1 - 20) : p + 1].tolist()))
        assert row.text["tokens"].decode() == want


def shift_ids(block: dict[str, np.ndarray], ctx: object) -> dict[str, np.ndarray]:
    """A transform (module level: picklable) that sees the declared int64 ids, not the file's uint16."""
    assert block["tokens"].dtype == np.int64
    return {"tokens": block["tokens"] + 1}


def test_a_transform_is_given_the_declared_int64_ids(corpus: dict[str, tuple[Docs, int]], tmp_path: Path) -> None:
    docs, eot = corpus["bytes"]
    src = TokensSource(write_nanogpt(tmp_path / "train.bin", docs, eot), eot=eot)
    with StreamLoader(src, B, T, seed=2, transform=shift_ids) as loader:
        batches = run_epochs(loader, 1)
    got = streams_of(batches)
    assert all(np.array_equal(got[s], d + 1) for s, d in enumerate(docs))


def test_a_binidx_pair_with_an_eot_at_each_documents_end_reads_as_neox_appends_it(
    corpus: dict[str, tuple[Docs, int]], tmp_path: Path
) -> None:
    docs, eot = corpus["bpe"]
    with_eod = [np.append(d, eot) for d in docs]  # GPT-NeoX's --append-eod
    path = write_binidx(tmp_path / "neox", with_eod)
    assert [TokensSource(path).length(i) for i in range(3)] == [len(d) + 1 for d in docs[:3]]
    src = TokensSource(path, eot=eot)
    assert len(src.items()) == len(docs)
    assert all(np.array_equal(np.asarray(src.window(i)["tokens"])[:, 0], d) for i, d in enumerate(docs))


class _FloatWindow(TokensSource):
    def window(self, item: int) -> dict[str, np.ndarray]:
        return {"tokens": np.asarray(super().window(item)["tokens"], np.float32)}


def test_a_window_of_another_kind_than_its_field_is_still_refused(tmp_path: Path) -> None:
    from streamcli.errors import StepSpecError

    path = tmp_path / "t.bin"
    np.arange(1, 400, dtype=np.uint16).tofile(path)
    with StreamLoader(_FloatWindow(path), 1, 8) as loader, pytest.raises(StepSpecError, match="float32"):
        next(iter(loader))


def test_an_export_of_a_token_file_replays_each_documents_ids(
    corpus: dict[str, tuple[Docs, int]], tmp_path: Path
) -> None:
    docs, eot = corpus["bpe"]
    path = write_nanogpt(tmp_path / "train.bin", docs, eot)
    args = ["export", "tokens", str(path), str(tmp_path / "out"), "-s", f"eot={eot}", "-b", "3", "-t", "40"]
    got = CliRunner().invoke(app, [*args, "--batches", "4", "-w", "0"])
    assert got.exit_code == 0, got.output
    shards = load_source("shards", str(tmp_path / "out"))
    assert len(shards.items()) >= 3
    for s in shards.items():
        ids = np.concatenate([np.asarray(step["tokens"]) for step in iter_steps(shards, s)])
        assert ids.dtype == np.int64 and len(ids) > 0 and np.array_equal(ids, docs[int(s)][: len(ids)])


@pytest.mark.slow
def test_the_token_example_trains_with_two_workers_and_stops_after_its_steps(tmp_path: Path) -> None:
    import subprocess
    import sys

    example = Path(__file__).resolve().parents[1] / "examples" / "train_tokens.py"
    run = subprocess.run(
        [sys.executable, str(example), "--steps", "4", "--workers", "2", "--progress", "0"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip().startswith("4 batches, loss over the last 1: ")
    loss = float(run.stdout.split(":")[-1].split()[0])
    assert 1.0 < loss < 6.0  # about ln(257) = 5.55 at the start, lower once it learns
