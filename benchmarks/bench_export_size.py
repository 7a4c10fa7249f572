"""Benchmark: the size of an uncompressed export of a byte or token corpus, against the corpus itself.

    python benchmarks/bench_export_size.py    # about a minute; prints a Markdown table

The corpus is the prose of ``../shared/data/text`` (four books, 1.05 MB). Three exports, one epoch each, in-process:

1. bytes, ``width=16``: the text source over the four files, B=8, T=16, ``segment=256`` (streams of 4 kB);
2. bytes, ``width=1``: B=32, T=128, ``segment=4096`` (its fields: ``text`` uint8[1] and ``nbytes`` int32);
3. token ids, ``width=1``: the books as Parquet rows of documents of about 1,400 ids (paragraphs joined up to 6,000
   characters), tokenized by a byte-level BPE of 8,192 ids trained here on them, B=8, T=64, ``boundary="pack"``.
   The raw size is the ids as a uint16 token file would hold them.

The ratio is the export's bytes (shards and manifest) over the raw size; the manifest, which names every stream, is
shown apart. Sizes depend on the data only, not on the machine's load. ``replay s`` is the median of 5 passes of
``ShardReader`` over the export, reading each batch's ``valid`` flags and first field (from the page cache; a
timing, so compare it only with a run on the same host at the same time).
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import streamcli
from streamcli import ShardReader, StreamLoader, load_source

TEXT = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "text"


def export_bytes(source: Any, out: Path, **loader: Any) -> tuple[int, int, float, float]:
    """The export's bytes, its manifest's, its share of real steps and the median time of a replay."""
    with StreamLoader(source, **loader) as ld:
        summary = streamcli.export(ld, out, epochs=1)
    total = sum(p.stat().st_size for p in out.iterdir())
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        for batch in ShardReader(out):
            int(batch.valid.sum()) + int(next(iter(batch.data.values())).sum())
        times.append(time.perf_counter() - t0)
    return total, (out / "index.json").stat().st_size, float(summary.useful_share or 0.0), statistics.median(times)


def documents(limit: int = 6000) -> list[str]:
    """The books' paragraphs, joined in order into documents of up to ``limit`` characters."""
    docs: list[str] = []
    for f in sorted(TEXT.glob("*.txt")):
        for p in f.read_text("utf-8-sig").split("\n\n"):
            if not p.strip():
                continue
            if docs and len(docs[-1]) + len(p) < limit:
                docs[-1] += "\n\n" + p
            else:
                docs.append(p)
    return docs


def token_corpus(tmp: Path) -> tuple[Path, Path, int]:
    """The books' paragraphs as a Parquet file, a BPE trained on them, and how many ids they make."""
    import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
    import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    docs = documents()
    pq.write_table(pa.table({"text": docs}), tmp / "books.parquet", row_group_size=64)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(docs, trainers.BpeTrainer(vocab_size=8192, show_progress=False))
    tok.save(str(tmp / "bpe.json"))
    ids = sum(len(e.ids) for e in tok.encode_batch(docs, add_special_tokens=False))
    return tmp / "books.parquet", tmp / "bpe.json", ids


def main() -> None:
    raw_text = sum(p.stat().st_size for p in TEXT.glob("*.txt"))
    rows = []
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        w16 = export_bytes(
            load_source("text", str(TEXT), width=16), tmp / "w16", batch_size=8, time_steps=16, segment=256
        )
        rows.append(("bytes, width 16, B=8, T=16, segment 256", raw_text, *w16))
        w1 = export_bytes(
            load_source("text", str(TEXT), width=1), tmp / "w1", batch_size=32, time_steps=128, segment=4096
        )
        rows.append(("bytes, width 1, B=32, T=128, segment 4096", raw_text, *w1))
        parquet, bpe, ids = token_corpus(tmp)
        source = load_source("text", str(parquet), tokenizer=str(bpe), width=1)
        tok = export_bytes(source, tmp / "tok", batch_size=8, time_steps=64, boundary="pack")
        name = f"BPE ids (8192), width 1, B=8, T=64, pack; {len(source.items())} documents, {ids:,} ids as uint16"
        rows.append((name, 2 * ids, *tok))
    print("| corpus | raw bytes | export bytes (manifest) | ratio | real steps | replay s |")
    print("|---|---|---|---|---|---|")
    for name, raw, size, manifest, useful, replay in rows:
        print(f"| {name} | {raw:,} | {size:,} ({manifest:,}) | {size / raw:.2f}x | {useful:.1%} | {replay:.3f} |")
    print(json.dumps({n: round(s / r, 3) for n, r, s, *_ in rows}))


if __name__ == "__main__":
    main()
