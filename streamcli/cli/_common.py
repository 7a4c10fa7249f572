"""What every command shares: error translation into exit codes, and help without noise.

Exit codes: 0 ok; 2 usage error, what was typed is wrong and nothing was read (one red line: unknown plugin or
option, a bad value, a path that does not exist or is not the kind the argument takes, a URL without its fsspec
backend); 1 failure at run time, the data or the run is wrong (one red line: a folder that holds no export, a
damaged shard, a stale index, a source that fails, a plugin's own error); 130 interrupted. ``--debug`` shows
tracebacks instead. With ``--json``, a failing command also prints one JSON object on stdout,
``{"error", "kind", "exit"}`` (``kind``: the error's class, or ``usage``), unless it already printed its own
report there.
"""

from __future__ import annotations

import inspect
import json
import os
import shlex
import sys
import traceback
from collections.abc import Sequence
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.text import Text
from typer.core import TyperArgument, TyperCommand, TyperGroup

from streamcli.errors import SourceError, StreamcliError, UnsupportedURLError


class _State:
    debug = False
    argv: list[str] | None = None  # this run's arguments, after the program's name (``command_with``)
    reported = False  # a command printed its own JSON report on stdout before failing (verify's problems)


STATE = _State()


class UsageFailure(Exception):
    """A usage problem found after parsing (a missing folder, no streams, a bad ``-s``): exit code 2."""


def count(n: int, noun: str) -> str:
    """``1 shard``, ``3 shards``: summaries read as sentences."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def command_with(flag: str, drop: Sequence[str] = ()) -> str | None:
    """This run's whole command, quoted for a shell, with ``flag`` added (once) and ``drop`` left out: what a
    message tells the user to run next, ready to paste. None outside a run of the command line."""
    if STATE.argv is None:
        return None
    return shlex.join(["streamcli", *(a for a in STATE.argv if a != flag and a not in drop), flag])


def echo_report(data: Any) -> None:
    """Print a command's JSON report on stdout; an error raised after it then adds no JSON error object."""
    typer.echo(json.dumps(data, indent=1))
    STATE.reported = True


def _json_requested() -> bool:
    argv = STATE.argv or []
    return "--json" in argv[: argv.index("--")] if "--" in argv else "--json" in argv


def err_line(message: str) -> None:
    """Print one red line to stderr (newlines folded so it stays one line)."""
    msg = " ".join(str(message).split())
    Console(stderr=True, soft_wrap=True, highlight=False).print(Text("error: ", "bold red") + Text(msg, "red"))


def source_failure(message: str) -> str:
    """A source's failure in the CLI's words: the library's ``on_error='skip'`` as the flag, and where the
    traceback is."""
    return message.replace("on_error='skip'", "--on-error skip") + "; rerun with --debug for the traceback"


def unreadable(exc: PermissionError) -> str:
    """A usage message for a file or folder this user may not read."""
    return (
        f"cannot read {_filename(exc)}: permission denied; make it readable (e.g. chmod a+r, or a+rx for a folder) "
        "or run as a user who may read it"
    )


def _filename(exc: OSError) -> str:
    return repr(str(exc.filename)) if exc.filename is not None else "a file"


def _permission_error(exc: BaseException) -> PermissionError | None:
    """The ``PermissionError`` behind ``exc`` (itself, or a cause a library error wraps), if any."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, PermissionError):
            return cur
        seen.add(id(cur))
        cur = cur.__cause__
    return None


def _tidy(params: list[Any]) -> list[Any]:
    """Help without noise: flags show no ``<bool>``, arguments show their metavar, never ``{name}``."""
    for p in params:
        if isinstance(p, TyperArgument) and p.metavar is None and p.name:
            name = p.name.upper() if p.required else f"[{p.name.upper()}]"
            p.metavar = name + ("..." if p.nargs != 1 else "")
        if getattr(p, "is_flag", False) or isinstance(p, TyperArgument):
            setattr(p, "display_type_rich", _no_type)  # noqa: B010  (per instance: Typer builds them)
    return params


def _no_type(ctx: Any) -> None:
    return None


def reflow(text: str | None) -> str | None:
    """A docstring with each paragraph on one line, so help wraps it at the terminal's width."""
    if not text:
        return text
    paras = inspect.cleandoc(text).split("\n\n")
    return "\n\n".join(" ".join(p.split()) for p in paras)


def as_written(command: Any) -> None:
    """Escape Rich markup in a command's help, epilog and parameters' help, once, when it is built.

    Typer renders help as Rich markup, which would swallow ``[ray]`` in ``pip install 'streamcli[ray]'``.
    No help string here uses markup on purpose.
    """
    command.help = escape(command.help) if command.help else command.help
    command.epilog = escape(command.epilog) if command.epilog else command.epilog
    for p in command.params:
        if getattr(p, "help", None):
            p.help = escape(p.help)


class StreamcliCommand(TyperCommand):
    """A command whose help shows no ``<bool>`` after flags and no ``{name}`` in its usage line."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.help = reflow(self.help)
        as_written(self)

    def get_params(self, ctx: Any) -> list[Any]:
        return _tidy(super().get_params(ctx))

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for p in self.get_params(ctx):
            pieces += [p.metavar] if isinstance(p, TyperArgument) and p.metavar else p.get_usage_pieces(ctx)
        return pieces


class StreamcliGroup(TyperGroup):
    """Translates every error into an exit code and one red line, for the script and for CliRunner alike."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        as_written(self)

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        STATE.debug = os.environ.get("STREAMCLI_DEBUG", "") not in ("", "0")
        STATE.argv = list(sys.argv[1:] if args is None else args)
        STATE.reported = False
        message, kind = "", "usage"
        try:
            rv = super().main(args=args, prog_name=prog_name, complete_var=complete_var, standalone_mode=False, **extra)
            code = rv if isinstance(rv, int) else 0
        except UsageFailure as exc:
            if STATE.debug and exc.__cause__ is not None:  # what the source raised, where
                traceback.print_exception(exc.__cause__)
            message, code = str(exc), 2
        except typer.TyperException as exc:  # Typer's parsing errors (its click exceptions derive from it)
            code = int(getattr(exc, "exit_code", 2))
            fmt = getattr(exc, "format_message", None)
            message = fmt() if callable(fmt) else str(exc)
        except typer.Abort:
            message, kind, code = "interrupted", "interrupted", 130
        except KeyboardInterrupt:
            message, kind, code = "interrupted", "interrupted", 130
        except Exception as exc:  # StreamcliError and anything unexpected: a failure at run time
            if STATE.debug:
                raise
            denied = _permission_error(exc)
            kind = type(exc).__name__
            if denied is not None:  # a file or folder the user may not read or write: theirs to fix
                message = f"{_filename(denied)}: permission denied; change its permissions or run as a user who may"
                message += " use it"
                code, kind = 2, "permission"
            elif isinstance(exc, UnsupportedURLError):  # a URL the user gave that cannot be served: theirs to fix
                message, code = str(exc), 2
            elif isinstance(exc, SourceError):  # a source failed reading an item: the library names the item
                message, code = source_failure(str(exc)), 1
            elif isinstance(exc, StreamcliError):
                message, code = str(exc), 1
            else:
                message, code = f"{type(exc).__name__}: {exc} (rerun with --debug for the traceback)", 1
        if message and code != 130:
            err_line(message)
        if message and _json_requested() and not STATE.reported:  # one place for every command's --json
            typer.echo(json.dumps({"error": " ".join(message.split()), "kind": kind, "exit": code}))
        if standalone_mode:
            sys.exit(code)
        return code

    def get_params(self, ctx: Any) -> list[Any]:
        return _tidy(super().get_params(ctx))
