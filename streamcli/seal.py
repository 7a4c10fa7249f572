"""A seal: the sha256 of a JSON document's canonical form, stored in the document itself under ``digest``.

States (``scheduled.state``, ``tbptt.state``) and index files (``index_format``) carry one, so that a value
changed after they were written (by hand, by a tool, by a bad copy) is refused rather than trusted: a row's
position off by one, or a length shortened, is a value a real run could hold, so only the seal can tell. It
guards against accidents and edits, not against someone who recomputes it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

KEY = "digest"
PREFIX = "sha256:"


def digest(document: Mapping[str, Any]) -> str:
    """``sha256:`` and the hex digest of ``document``'s canonical JSON (sorted keys, no spaces), its ``digest``
    left out. A JSON round trip keeps it (tuples become lists either way). Raises ``TypeError``/``ValueError`` if
    the document is not plain JSON data."""
    body = {k: v for k, v in document.items() if k != KEY}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return PREFIX + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def seal(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` with its ``digest`` set (in place, and returned)."""
    document[KEY] = digest(document)
    return document


def broken(document: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(saved, recomputed)`` digests where ``document`` holds a digest its content no longer matches; None where
    it matches or holds none (``KEY in document`` tells the two apart)."""
    saved = document.get(KEY)
    if saved is None:
        return None
    now = digest(document)
    return None if saved == now else (str(saved), now)
