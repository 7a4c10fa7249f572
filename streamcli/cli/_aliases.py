"""Old flag spellings kept for one release: hidden from ``--help``, one warning line on stderr when used.

``deprecated(Alias(...), ...)`` adds a hidden option per alias to a command and folds what the user gave into
the new option before the command runs, so the command itself only ever sees the new name.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.text import Text


@dataclass(frozen=True)
class Alias:
    """``flags`` (the old spellings) feed the parameter ``into``; ``use`` is how the warning names the new flag."""

    flags: tuple[str, ...]
    into: str
    use: str
    type: Any = str
    many: bool = False  # a repeatable option: the old values go before the new ones
    wrap: Callable[[Any], Any] | None = None  # the old value as the new option takes it (``64x64`` -> ``size=64x64``)

    @property
    def param(self) -> str:
        return "deprecated_" + self.flags[-1].lstrip("-").replace("-", "_")


def warn(old: str, use: str) -> None:
    """One yellow line on stderr: the old flag, and the new one to type instead."""
    line = f"warning: {old} is deprecated and will be removed in the next release; use {use}"
    Console(stderr=True, soft_wrap=True, highlight=False).print(Text(line, "yellow"))


def deprecated(*aliases: Alias) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Give a command hidden old spellings of its options (see the module docstring)."""

    def wrap(func: Callable[..., Any]) -> Callable[..., Any]:
        sig = inspect.signature(func, eval_str=True)
        params = list(sig.parameters.values())
        extra = []
        for a in aliases:
            elem: Any = a.type
            kind: Any = (list.__class_getitem__(elem) if a.many else elem) | None
            info = typer.Option(*a.flags, hidden=True, show_default=False)
            extra.append(
                inspect.Parameter(
                    a.param, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=Annotated[kind, info]
                )
            )
        new = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in params] + extra

        @functools.wraps(func)
        def command(**kwargs: Any) -> Any:
            for a in aliases:
                old = kwargs.pop(a.param)
                if old is None or (a.many and not old):
                    continue
                warn("/".join(a.flags), a.use)
                if a.many:
                    given = [a.wrap(v) for v in old] if a.wrap else list(old)
                    kwargs[a.into] = given + list(kwargs.get(a.into) or [])
                else:
                    kwargs[a.into] = a.wrap(old) if a.wrap else old
            return func(**kwargs)

        command.__signature__ = sig.replace(parameters=new)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in new}
        del command.__wrapped__  # Typer must read the new signature
        return command

    return wrap


SOURCE_OPTION = Alias(("-o", "--option"), "option", "-s/--set key=value (e.g. -s size=64x64)", many=True)
"""``-o key=value``, which reads as "output" to most users, is ``-s/--set`` now."""
