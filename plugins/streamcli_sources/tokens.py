"""``tokens``: language-model corpora as tokenizers wrote them, each document one stream of token ids.

Reads nanoGPT's flat ``.bin``, llm.c shards, binidx pairs (Megatron, GPT-NeoX, RWKV) and ``.npy`` arrays, memory-
mapped (``_token_formats`` recognises them by content). The documents are the runs between end-of-text ids
(``eot=``), a binidx pair's own documents, or else each whole file. A flat file's runs come from one vectorised
scan in the main process (``prepare``), which ``streamcli index tokens PATH -s eot=ID`` writes down once, so that no
start-up scans the corpus again. Every item's steps are slices of the map (``window``): a batch costs one slice
copy per row, which also casts the file's ids to the int64 that ``nn.Embedding`` and ``cross_entropy`` take.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from streamcli.errors import StaleIndexError
from streamcli.index import Index
from streamcli.source import BaseSource, Field, Step
from streamcli.storage import urls
from streamcli_sources import _indexed
from streamcli_sources._text_window import ByteCounts, PaddedSteps
from streamcli_sources._token_documents import eot_positions, split_documents
from streamcli_sources._token_formats import TokenFile, binidx_documents, id_dtype, read_format

_BLOCK = 4096  # steps per block that ``open`` yields
_PATTERNS = ("*.bin", "*.npy")


class TokensSource(BaseSource):
    """Token files: nanoGPT's flat ``.bin``, llm.c shards, binidx ``.bin``/``.idx`` pairs or ``.npy`` arrays.

    Each document is one stream. Fields per step: ``tokens`` int64[width], the next ``width`` ids. With
    ``width`` > 1 a document's last step is zero-padded and a second field, ``ntokens`` int32, says how many of
    its ids are real (``width`` on every other step); with ``width=1`` nothing is padded and there is no
    ``ntokens``.

    Args:
        arg: a token file or a folder of them (its ``*.bin`` and ``*.npy``, not searched further down; every
            file's documents in one epoch). The format is read from the content: an llm.c header, an ``.idx``
            beside a ``.bin``, an ``.npy`` header, else bare ids of ``dtype``.
        eot: the end-of-text id between documents (50256 for GPT-2's tokenizer): documents are the runs of ids
            between two of them, which are not delivered (``is_first`` marks the boundary), and empty runs are
            skipped, so nanoGPT's trailing and llm.c's leading end-of-text read alike. Default: none (each file,
            or each binidx document, is one stream).
        dtype: the ids' type in files without a header (nanoGPT's ``.bin``); files with one say their own.
            Default: uint16.
        width: ids per step: ``tokens`` is int64 of shape ``(width,)``.
        index: ``auto`` takes the documents from the index beside the data (``streamcli index tokens PATH -s
            eot=ID``, written next to a file as ``FILE.streamcli-index.npz``) when it is there, ``none`` scans the
            files, or the path of an index.
    """

    block_steps = True

    def __init__(
        self,
        arg: str | os.PathLike[str] | None = None,
        *,
        eot: int | None = None,
        dtype: str | None = None,
        width: int = 1,
        index: str = "auto",
    ) -> None:
        if arg is None:
            raise ValueError("the tokens source needs a token file or a folder of them, e.g. tokens data/train.bin")
        if urls.is_remote(arg):
            raise ValueError(
                f"tokens source: {arg!r} is a URL, but token files are memory-mapped and must be local; copy them "
                "first (e.g. aws s3 sync URL data/) and give the local path"
            )
        if int(width) < 1:
            raise ValueError(f"tokens source: width={width} must be at least 1 id per step")
        self.root = str(urls.local_path(arg))
        self.eot = None if eot is None else int(eot)
        self.dtype = None if dtype is None else id_dtype(str(dtype), self.root).name  # "u2" is "uint16"
        self.width = int(width)
        self.files = [read_format(p, self.dtype) for p in _find_files(Path(self.root))]
        for tf in self.files:
            _check_eot(tf, self.eot)
        self._doc_file = self._doc_start = self._doc_len = np.zeros(0, np.int64)
        self._items: Sequence[int] | None = None
        self._adopted: Index | None = None
        self._maps: dict[int, np.ndarray] = {}
        self.streamcli_index = _indexed.find("tokens", self.root, index, self.index_settings())
        if self.streamcli_index is not None:
            self.use_index(self.streamcli_index)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_maps"] = {}  # each worker maps the files itself
        return state

    # -- the documents ----------------------------------------------------------------------------------

    def prepare(self, progress: Callable[[int, int], None] | None = None) -> None:
        """Find every document: binidx documents from the ``.idx``, runs between ``eot`` ids by one vectorised
        scan of each file (``progress(ids done, ids in all)``). Called by ``items()`` when not yet done."""
        if self._items is not None:
            return
        total = sum(tf.count for tf in self.files) if self.eot is not None else 0
        done = 0

        def tick(n: int) -> None:
            nonlocal done
            done += n
            if progress is not None:
                progress(done, total)

        files, starts, lens = [], [], []
        for f, tf in enumerate(self.files):
            if tf.kind == "binidx":
                s, n = binidx_documents(tf)
            else:
                s, n = np.zeros(1 if tf.count else 0, np.int64), np.full(1 if tf.count else 0, tf.count, np.int64)
            if self.eot is not None:
                s, n = split_documents(s, n, eot_positions(tf.ids(), self.eot, tick), tf.path)
            files.append(np.full(len(s), f, np.int64))
            starts.append(s)
            lens.append(n)
        self._set_documents(np.concatenate(files), np.concatenate(starts), np.concatenate(lens))

    def _set_documents(self, files: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> None:
        self._doc_file, self._doc_start, self._doc_len = files, starts, lens
        self._items = range(len(lens))

    def items(self) -> Sequence[int]:
        self.prepare()
        assert self._items is not None
        return self._items

    def index_settings(self) -> dict[str, Any]:
        """The options that decide the documents and their lengths (an index written with others is stale)."""
        return {"eot": self.eot, "dtype": self.dtype, "width": self.width}

    def index_info(self) -> dict[str, Any]:
        """Each file's name and size when indexed: an index of files that changed since is refused."""
        return {"files": [[os.path.basename(tf.path), _size(tf.path)] for tf in self.files]}

    def index_key(self, item: int) -> str:
        """A document as the index writes it: ``FILE@FIRST+COUNT`` (its first id and number of ids)."""
        return f"{self.files[int(self._doc_file[item])].path}@{int(self._doc_start[item])}+{int(self._doc_len[item])}"

    def use_index(self, index: Index) -> Sequence[int]:
        """Take the documents from ``index`` (no scan), after checking that the files are those it was written
        from (same names and sizes)."""
        if index is self._adopted and self._items is not None:
            return self._items
        rebuild = f"streamcli index tokens {self.root}" + (f" -s eot={self.eot}" if self.eot is not None else "")
        mine = {os.path.basename(tf.path): f for f, tf in enumerate(self.files)}
        recorded = {str(name): int(size) for name, size in index.info.get("files", [])}
        for name, f in mine.items():
            if recorded.get(name) != _size(self.files[f].path):
                raise StaleIndexError(
                    f"index {index.where} is stale: {self.files[f].path} is not the file it was written from "
                    f"({_size(self.files[f].path)} bytes now, {recorded.get(name)} then); rebuild it with {rebuild}"
                )
        n = len(index.items)
        files, starts, lens = np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int64)
        for k, name in enumerate(index.items):
            path, _, span = name.rpartition("@")
            first, _, count = span.partition("+")
            at = mine.get(os.path.basename(path))
            if at is None:
                raise StaleIndexError(f"index {index.where} lists {path}, which is not in {self.root}; rebuild it")
            files[k], starts[k], lens[k] = at, int(first), int(count)
        self._set_documents(files, starts, lens)
        self._adopted = index
        assert self._items is not None
        return self._items

    # -- the steps ------------------------------------------------------------------------------------------

    def fields(self) -> Sequence[Field]:
        tokens = Field("tokens", (self.width,), "int64")
        return (tokens,) if self.width == 1 else (tokens, Field("ntokens", (), "int32"))

    def length(self, item: int) -> int:
        if self._items is None:
            self.prepare()
        return -(-int(self._doc_len[item]) // self.width)

    def item_name(self, item: int) -> str:
        return f"{Path(self.files[int(self._doc_file[item])].path).name}@{int(self._doc_start[item])}"

    def _ids(self, item: int) -> np.ndarray:
        if self._items is None:
            self.prepare()
        f = int(self._doc_file[item])
        ids = self._maps.get(f)
        if ids is None:
            ids = self._maps[f] = self.files[f].ids()
        a = int(self._doc_start[item])
        return ids[a : a + int(self._doc_len[item])]

    def window(self, item: int) -> dict[str, Any]:
        """Random access (``streamcli.source``): the document's ids as ``(steps, width)`` views of the map, in
        the file's dtype; the loader's copy into the batch casts them to int64."""
        ids, w = self._ids(item), self.width
        n = -(-len(ids) // w)
        if len(ids) % w == 0:
            out: dict[str, Any] = {"tokens": ids.reshape(n, w)}
            if w > 1:
                out["ntokens"] = np.broadcast_to(np.int32(w), (n,))
            return out
        return {"tokens": PaddedSteps(ids, n, w), "ntokens": ByteCounts(len(ids), n, w)}

    def open(self, item: int, start: int = 0) -> Iterator[Step]:
        """Blocks of up to ``_BLOCK`` steps, int64, read from the window."""
        win = self.window(item)
        n = len(win["tokens"])
        for a in range(start, n, _BLOCK):
            b = min(n, a + _BLOCK)
            block = {"tokens": np.asarray(win["tokens"][a:b], np.int64)}
            if self.width > 1:
                block["ntokens"] = np.asarray(win["ntokens"][a:b], np.int32)
            yield block

    @classmethod
    def can_open(cls, arg: str) -> bool:
        if urls.is_remote(arg):
            return False
        p = Path(urls.local_path(arg))
        return (p.is_file() and p.suffix == ".bin") or (p.is_dir() and any(p.glob("*.bin")))


def _size(path: str) -> int:
    return os.path.getsize(path)


def _check_eot(tf: TokenFile, eot: int | None) -> None:
    if eot is None:
        return
    info = np.iinfo(np.dtype(tf.dtype))
    if not info.min <= eot <= info.max:
        raise ValueError(
            f"{tf.path}: eot={eot} is outside the range of its {np.dtype(tf.dtype).name} ids "
            f"({info.min}..{info.max}); give the end-of-text id of the tokenizer that wrote it"
        )


def _find_files(root: Path) -> list[str]:
    """The file, or a folder's ``*.bin`` and ``*.npy`` files (sorted: the epoch's item order is fixed)."""
    if root.is_file():
        return [str(root)]
    if not root.is_dir():
        raise FileNotFoundError(f"tokens source: {str(root)!r} is neither a file nor a folder")
    found = sorted({str(p) for pattern in _PATTERNS for p in root.glob(pattern) if p.is_file()})
    if not found:
        raise FileNotFoundError(f"tokens source: {str(root)!r} holds no *.bin or *.npy token file")
    return found
