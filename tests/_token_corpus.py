"""Real prose (``../shared/data/text``) cut into documents, tokenized two ways, and written in each format that
language-model pipelines use: nanoGPT's flat ``.bin``, llm.c shards, binidx pairs and ``.npy`` arrays.

The writers follow the formats' own writers (nanoGPT's ``prepare.py``, llm.c's ``write_datafile``, Megatron's
``MMapIndexedDataset.Index.writer``), not the reader under test.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from pathlib import Path

import numpy as np

BOOKS = ("devils_dictionary.txt", "fortunes_literature.txt", "sherlock_holmes_pg1661.txt", "tom_sawyer_excerpt.txt")
TARGETS = (300, 1500, 90, 2600, 700)  # bytes per document, in turn: short and long documents mixed
EOT_TEXT = "<|endoftext|>"


def documents(folder: Path, per_book: int = 16_000) -> list[str]:
    """The first ``per_book`` bytes of each book, cut at paragraph ends into documents of varied length."""
    docs: list[str] = []
    for name in BOOKS:
        text = (folder / name).read_bytes()[:per_book].decode("utf-8", "ignore").replace("\r\n", "\n")
        paragraphs = [p for p in text.split("\n\n") if p.strip()]
        cur: list[str] = []
        for p in paragraphs:
            cur.append(p)
            if sum(map(len, cur)) >= TARGETS[len(docs) % len(TARGETS)]:
                docs.append("\n\n".join(cur))
                cur = []
        if cur:
            docs.append("\n\n".join(cur))
    return docs


def byte_ids(docs: Sequence[str]) -> tuple[list[np.ndarray], int]:
    """Byte-level ids (an id is the byte) and the end-of-text id, 256, outside the bytes."""
    return [np.frombuffer(d.encode("utf-8"), np.uint8).astype(np.int64) for d in docs], 256


def bpe_ids(docs: Sequence[str], folder: Path, vocab: int = 1200) -> tuple[list[np.ndarray], int]:
    """Ids from a byte-level BPE trained here on the books (``tokenizers``), and its end-of-text id."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab, special_tokens=[EOT_TEXT], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator([(folder / n).read_text("utf-8", "ignore") for n in BOOKS], trainer)
    eot = tok.token_to_id(EOT_TEXT)
    assert eot is not None
    ids = [np.asarray(e.ids, np.int64) for e in tok.encode_batch(list(docs), add_special_tokens=False)]
    assert tok.get_vocab_size() < 65536 and all(eot not in d for d in ids)
    return ids, int(eot)


def write_nanogpt(path: Path, docs: Sequence[np.ndarray], eot: int) -> Path:
    """nanoGPT: one flat uint16 file, the end-of-text id after each document (twice after one: an empty run)."""
    parts: list[np.ndarray] = []
    for k, d in enumerate(docs):
        parts += [d, np.array([eot, eot] if k == 1 else [eot])]
    np.concatenate(parts).astype(np.uint16).tofile(path)
    return path


def write_llmc(folder: Path, docs: Sequence[np.ndarray], eot: int, shards: int = 2) -> Path:
    """llm.c: shards of a 256-int32 header (magic 20240520, version 1, count) and uint16 ids, the end-of-text
    id before each document."""
    folder.mkdir(parents=True, exist_ok=True)
    for s, part in enumerate(np.array_split(np.arange(len(docs)), shards)):
        toks = np.concatenate([np.concatenate([[eot], docs[k]]) for k in part]).astype(np.uint16)
        header = np.zeros(256, np.int32)
        header[:3] = 20240520, 1, len(toks)
        with open(folder / f"fineweb_train_{s:06d}.bin", "wb") as f:
            f.write(header.tobytes())
            f.write(toks.tobytes())
    return folder


def write_binidx(prefix: Path, docs: Sequence[np.ndarray], dtype: str = "uint16") -> Path:
    """binidx: a ``.bin`` of ids and an ``.idx`` (MMIDIDX, version, dtype code, sizes, pointers, doc_idx). Every
    third document is written as two sequences, as a sentence-split corpus is."""
    code = {"uint8": 1, "int8": 2, "int16": 3, "int32": 4, "int64": 5, "uint16": 8}[dtype]
    seqs: list[np.ndarray] = []
    doc_idx = [0]
    for k, d in enumerate(docs):
        seqs += [d[: len(d) // 2], d[len(d) // 2 :]] if k % 3 == 2 and len(d) > 1 else [d]
        doc_idx.append(len(seqs))
    sizes = np.asarray([len(s) for s in seqs], np.int32)
    pointers = np.concatenate([[0], np.cumsum(sizes.astype(np.int64) * np.dtype(dtype).itemsize)[:-1]])
    np.concatenate(seqs).astype(dtype).tofile(prefix.with_suffix(".bin"))
    with open(prefix.with_suffix(".idx"), "wb") as f:
        f.write(b"MMIDIDX\x00\x00" + struct.pack("<Q", 1) + struct.pack("<B", code))
        f.write(struct.pack("<Q", len(sizes)) + struct.pack("<Q", len(doc_idx)))
        f.write(sizes.tobytes() + pointers.astype(np.int64).tobytes() + np.asarray(doc_idx, np.int64).tobytes())
    return prefix.with_suffix(".bin")


def write_npy(folder: Path, docs: Sequence[np.ndarray], eot: int, files: int = 3) -> Path:
    """``.npy`` arrays of int32 ids, the end-of-text id after each document."""
    folder.mkdir(parents=True, exist_ok=True)
    for s, part in enumerate(np.array_split(np.arange(len(docs)), files)):
        np.save(folder / f"part{s}.npy", np.concatenate([np.append(docs[k], eot) for k in part]).astype(np.int32))
    return folder
