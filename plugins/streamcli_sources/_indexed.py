"""The index (``streamcli index``) as the file sources find it: beside their data by default, checked at once.

A source given ``index="auto"`` (the default) takes the index in its folder when there is one, ``"none"`` lists the
data, and any other value is the path or URL of an index. A stale one (written by another plugin or with other
settings) is refused here, with the command that rebuilds it, before anything is listed or decoded.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from streamcli import index as _index


def find(plugin: str, arg: str | os.PathLike[str], index: str, settings: Mapping[str, Any]) -> _index.Index | None:
    """The index the ``plugin`` source at ``arg`` uses, checked against its ``settings``; None: list the data."""
    found = _index.find(str(arg), index)
    if found is not None:
        where = "" if index in ("auto", "none") else f" --out {index}"
        found.check(plugin, settings, f"streamcli index {plugin} {arg}{where}")
    return found
