"""The loader's mode vocabulary, declared once: the library validates against it and the CLI builds its choices
from it, so a mode is never spelt in two places."""

from __future__ import annotations

MODES: dict[str, tuple[str, ...]] = {
    "boundary": ("pad", "pack"),
    "epoch_end": ("pad", "restream", "drop"),
    "layout": ("TB", "BT"),
    "on_error": ("raise", "skip"),
}
"""Option name -> allowed values; the first value is the default."""
