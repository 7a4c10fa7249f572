"""What names a source on the command line (``SourceSpec``) and the checks every source form shares: ``-s``
syntax, and "did you mean" for a misspelt name. Below ``_sources`` (one source) and ``_mix`` (several)."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from streamcli.cli._common import UsageFailure
from streamcli.source import StreamSource


@dataclass
class SourceSpec:
    plugin: str
    arg: str | None
    options: dict[str, Any] = field(default_factory=dict)
    source: StreamSource | None = None

    def record(self) -> dict[str, Any]:
        return {"plugin": self.plugin, "arg": self.arg, "options": self.options}

    def label(self) -> str:
        return self.plugin + (f" {self.arg}" if self.arg is not None else "")

    @property
    def skipped(self) -> int:
        """Files the source skipped when it was built (sources list them in ``skipped``)."""
        return len(getattr(self.source, "skipped", None) or ())


def did_you_mean(message: str, name: str, names: Sequence[str]) -> str:
    """``message`` plus "; did you mean 'video'?" when ``name`` is close to one of ``names``."""
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    return f"{message}; did you mean {close[0]!r}?" if close else message


def check_option_syntax(raw: Sequence[str] | None, hint: str = "") -> None:
    """Refuse an ``-s`` that is not ``key=value`` before anything else is looked at (``hint`` ends the message)."""
    for item in raw or []:
        key, sep, _ = item.partition("=")
        if not sep or not key.strip():
            raise UsageFailure(
                f"-s {item!r} must be key=value: -s/--set (formerly -o) sets a source option, e.g. -s width=32{hint}"
            )
