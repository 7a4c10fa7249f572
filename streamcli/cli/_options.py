"""The loader's options, declared once for every command.

``LOADER_OPTIONS`` is the one table: each row names a ``StreamLoader`` keyword, its CLI flags, type, default
and help. ``loader_command`` adds the rows to a command's signature (Typer reads it) and hands the command
one ``LoaderOptions``; a new loader option is one new row. The mode choices come from
``streamcli.config.MODES``, the library's own table, and ``flag_names`` turns the loader's ``batch_size=0``
messages into the flags the user typed.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Annotated, Any

import typer

from streamcli.cli._common import UsageFailure
from streamcli.config import MODES, WORKERS_PER_CORE, max_workers, usable_cores

LOADER = "Loader options"
_UNSET_NOT_RECORDED = ("transform", "balance")
MAX_DEFAULT_WORKERS = 2


def default_workers(batch_size: int | None = None) -> int:
    """The one default worker count of preview, bench and export: min(2, usable cores, B).

    Workers keep decoding off the consumer's thread; beyond two, a preview or a first export rarely gains
    on a shared machine, and a worker needs at least one batch row.
    """
    n = min(MAX_DEFAULT_WORKERS, usable_cores())
    return n if batch_size is None else max(0, min(n, batch_size))


def _mode_enum(name: str) -> type[Enum]:
    """A str Enum whose members are ``MODES[name]`` (Typer shows them as the choices)."""
    title = "".join(p.title() for p in name.split("_"))
    return Enum(title, [(v, v) for v in MODES[name]], type=str)  # type: ignore[return-value]


MODE_ENUMS: dict[str, type[Enum]] = {name: _mode_enum(name) for name in MODES}


@dataclass(frozen=True)
class LoaderOption:
    """One loader keyword as a CLI option."""

    name: str  # the StreamLoader keyword (and the LoaderOptions attribute)
    flags: tuple[str, ...]  # as Typer declares them: ("--batch-size", "-b"), ("--shuffle/--no-shuffle",)
    type: Any
    default: Any
    help: str

    @property
    def display(self) -> str:
        """How error messages name it: ``-b/--batch-size``."""
        longs = [f.split("/")[0] for f in self.flags if f.startswith("--")]
        shorts = [f for f in self.flags if not f.startswith("--")]
        return "/".join(shorts + longs)


def _workers_help() -> str:
    return (
        f"Worker processes (0 = in-process). Default: min({MAX_DEFAULT_WORKERS}, usable cores, B), "
        f"{default_workers()} here. At most {WORKERS_PER_CORE} per usable core ({max_workers()} here)."
    )


LOADER_OPTIONS: tuple[LoaderOption, ...] = (
    LoaderOption("batch_size", ("--batch-size", "-b"), int, 8, "Rows per batch (B)."),
    LoaderOption("time_steps", ("--time-steps", "-t"), int, 16, "Steps per batch (T)."),
    LoaderOption("num_workers", ("--workers", "-w"), int | None, None, _workers_help()),
    LoaderOption("seed", ("--seed",), int, 0, "Seed of the stream order."),
    LoaderOption("shuffle", ("--shuffle/--no-shuffle",), bool, True, "Shuffle the stream order."),
    LoaderOption(
        "boundary",
        ("--boundary",),
        MODE_ENUMS["boundary"],
        MODES["boundary"][0],
        "A row's next stream: pad to the batch end or pack.",
    ),
    LoaderOption(
        "epoch_end", ("--epoch-end",), MODE_ENUMS["epoch_end"], MODES["epoch_end"][0], "Rows left at the epoch's end."
    ),
    LoaderOption(
        "layout", ("--layout",), MODE_ENUMS["layout"], MODES["layout"][0], "Tensor layout (T, B, ...) or (B, T, ...)."
    ),
    LoaderOption(
        "on_error",
        ("--on-error",),
        MODE_ENUMS["on_error"],
        MODES["on_error"][0],
        "A failing stream: raise, or skip it.",
    ),
    LoaderOption(
        "segment",
        ("--segment",),
        int,
        0,
        "Cut every item into streams of at most N steps, each with its own reset (0: whole items).",
    ),
    LoaderOption(
        "batches_per_epoch",
        ("--batches-per-epoch",),
        int | None,
        None,
        "Make every epoch exactly N batches: cut, or padded (replayed with --epoch-end restream).",
    ),
    LoaderOption(
        "transform",
        ("--transform",),
        str | None,
        None,
        "Augment image fields with the same draw along each stream, in order, e.g. "
        "crop=112,flip,brightness=0.2,contrast=0.2,resize=64.",
    ),
    LoaderOption(
        "balance",
        ("--balance/--no-balance",),
        bool | None,
        None,
        "With workers, give a row's next stream to whichever worker is free (for costly, uneven steps "
        "such as video decoding), or keep a block of rows per worker. Default: the source's choice.",
    ),
)
"""Every loader keyword the CLI exposes, in ``--help`` order."""


@dataclass
class LoaderOptions:
    """The user's loader settings, as ``StreamLoader`` keywords."""

    batch_size: int = 8
    time_steps: int = 16
    num_workers: int = 0
    seed: int = 0
    shuffle: bool = True
    boundary: str = MODES["boundary"][0]
    epoch_end: str = MODES["epoch_end"][0]
    layout: str = MODES["layout"][0]
    on_error: str = MODES["on_error"][0]
    extra: dict[str, Any] = field(default_factory=dict)  # rows added to the table later, by name

    def kwargs(self) -> dict[str, Any]:
        """Every keyword but B and T (``StreamLoader(source, B, T, **kwargs)``)."""
        out = {k: v for k, v in self.__dict__.items() if k not in ("batch_size", "time_steps", "extra")}
        return {**out, **self.extra}

    def record(self) -> dict[str, Any]:
        """What decides the batches' content (not the worker count: batches are identical for any)."""
        out = self.kwargs()
        out.pop("num_workers")
        return out

    @classmethod
    def from_cli(cls, values: dict[str, Any]) -> LoaderOptions:
        plain = {k: (v.value if isinstance(v, Enum) else v) for k, v in values.items()}
        known = {f for f in cls.__dataclass_fields__ if f != "extra"}
        # An option left unset (no transform, balance by the source) is left out of the record, so exports keep
        # the header they always had.
        extra = {k: v for k, v in plain.items() if k not in known and (k not in _UNSET_NOT_RECORDED or v is not None)}
        opts = cls(**{k: v for k, v in plain.items() if k in known}, extra=extra)
        if plain.get("num_workers", 0) is None:  # not given: the shared default, capped by B
            opts.num_workers = default_workers(opts.batch_size)
        return opts


def _parameter(opt: LoaderOption) -> inspect.Parameter:
    info = typer.Option(*opt.flags, help=opt.help, rich_help_panel=LOADER, show_default=opt.default is not None)
    return inspect.Parameter(
        opt.name, inspect.Parameter.KEYWORD_ONLY, default=opt.default, annotation=Annotated[opt.type, info]
    )


def loader_command(*, workers: bool = True) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Give a command the loader options: it declares ``opts: LoaderOptions`` and receives them filled in.

    ``workers=False`` leaves ``--workers`` out (bench declares its own sweep list).
    """
    rows = [o for o in LOADER_OPTIONS if workers or o.name != "num_workers"]

    def wrap(func: Callable[..., Any]) -> Callable[..., Any]:
        sig = inspect.signature(func, eval_str=True)
        own = [p for p in sig.parameters.values() if p.name != "opts"]
        new = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own] + [_parameter(o) for o in rows]

        @functools.wraps(func)
        def command(**kwargs: Any) -> Any:
            values = {o.name: kwargs.pop(o.name) for o in rows}
            return func(**kwargs, opts=LoaderOptions.from_cli(values))

        command.__signature__ = sig.replace(parameters=new)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in new}
        del command.__wrapped__  # Typer must read the new signature, not the wrapped one's
        return command

    return wrap


_FLAG_RE = re.compile(r"\b(" + "|".join(o.name for o in LOADER_OPTIONS) + r")\b(=)?")
_DISPLAY = {o.name: o.display for o in LOADER_OPTIONS}


def flag_names(message: str) -> str:
    """The loader's message with its keyword names as CLI flags: ``batch_size=0`` -> ``-b/--batch-size 0``."""
    return _FLAG_RE.sub(lambda m: _DISPLAY[m.group(1)] + (" " if m.group(2) else ""), message)


def source_flag_names(message: str, options: list[str] | tuple[str, ...]) -> str:
    """A source's message with its option names as ``-s`` flags: ``mismatch='skip'`` -> ``-s mismatch='skip'``."""
    if not options:
        return message
    pattern = re.compile(r"(?<!-s )(?<![-\w.])(" + "|".join(map(re.escape, options)) + r")=")  # not twice
    flagged = pattern.sub(lambda m: f"-s {m.group(1)}=", message)
    # A tuple as -s takes it (``-s sensor_size=48,70``): "(48, 70)" is not one shell word, nor parsed.
    return re.sub(r"(-s [\w.]+=)\(([^()]*)\)", lambda m: m.group(1) + m.group(2).replace(", ", ","), flagged)


def choice_option(flag: str, values: Sequence[str], help: str) -> Any:
    """A flag with fixed values, shown as ``[a|b|c]`` in ``--help``; any other value is a usage error in the
    CLI's own words (``--to 'evt4' must be one of evt3, aedat4, npy``)."""

    def parse(value: str) -> str:
        if value in values:
            return value
        raise UsageFailure(f"{flag} {value!r} must be one of {', '.join(values)}")

    return typer.Option(flag, parser=parse, metavar="[" + "|".join(values) + "]", help=help)
