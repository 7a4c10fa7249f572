"""Text to token ids through a ``tokenizers`` JSON file, loaded once per process and used a document at a time.

The source holds only the file's path (it is pickled to every worker); each process loads the ``Tokenizer`` the
first time it encodes, so start-up tokenizes nothing and a worker never receives a pickled tokenizer.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np

INSTALL = "pip install 'streamcli[tokenize]'"

_LOADED: dict[str, Any] = {}  # path -> Tokenizer, in this process


def _tokenizer_class() -> Any:
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise ImportError(f"tokenizer= needs the tokenizers package: {INSTALL}") from None
    return Tokenizer


def load(path: str) -> Any:
    """The ``Tokenizer`` of the JSON file at ``path``, loaded once in this process; ValueError naming the file
    if it is missing or not a tokenizer."""
    found = _LOADED.get(path)
    if found is not None:
        return found
    cls = _tokenizer_class()
    if not Path(path).is_file():
        raise ValueError(f"tokenizer={path!r}: no such file; give a tokenizers JSON file (tokenizer.json)")
    try:
        found = cls.from_file(path)
    except Exception as exc:  # tokenizers raises its own Exception subclass for a malformed file
        raise ValueError(
            f"tokenizer={path!r} is not a tokenizers JSON file ({type(exc).__name__}: {exc}); "
            "save one with Tokenizer.save('tokenizer.json')"
        ) from None
    _LOADED[path] = found
    return found


def encode(path: str, text: str) -> np.ndarray:
    """The ids of ``text`` (no special tokens added) as int64, what ``nn.Embedding`` takes."""
    ids = load(path).encode(text, add_special_tokens=False).ids
    return np.asarray(ids, dtype=np.int64)


def digest(path: str) -> str:
    """A short digest of the tokenizer file's bytes: an index's lengths hold for this tokenizer only."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


def decode(path: str, ids: np.ndarray) -> str:
    """The text of ``ids`` (for previews)."""
    return str(load(path).decode([int(i) for i in ids]))
