"""``--help`` shows every help string as written: Rich markup never swallows a ``[token]``."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from streamcli.cli import app

runner = CliRunner()
_TOKEN = re.compile(r"\\?\[[^\[\]]*\]")


def _commands() -> Iterator[tuple[list[str], Any]]:
    root = typer.main.get_command(app)
    yield [], root
    for name, cmd in getattr(root, "commands", {}).items():
        yield [name], cmd


def _tokens(cmd: Any) -> set[str]:
    """Every ``[...]`` in the command's help, epilog and parameters' help, as the source wrote it."""
    texts = [cmd.help or "", cmd.epilog or ""] + [getattr(p, "help", None) or "" for p in cmd.params]
    return {m.lstrip("\\") for t in texts for m in _TOKEN.findall(t)}


COMMANDS = list(_commands())


def test_some_help_string_has_a_bracketed_token() -> None:
    """The check below must have something to check (export's ``streamcli[ray]``, at least)."""
    assert "[ray]" in set().union(*(_tokens(c) for _, c in COMMANDS))


@pytest.mark.parametrize(("path", "cmd"), COMMANDS, ids=[" ".join(p) or "streamcli" for p, _ in COMMANDS])
def test_every_bracketed_token_in_help_is_shown(path: list[str], cmd: Any) -> None:
    result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "400", "NO_COLOR": "1"}, terminal_width=400)
    assert result.exit_code == 0, result.output
    flat = " ".join(result.output.split())
    missing = [t for t in sorted(_tokens(cmd)) if t not in flat]
    assert not missing, f"{missing} missing from {' '.join(path)} --help:\n{result.output}"


def test_export_help_names_the_ray_extra() -> None:
    result = runner.invoke(app, ["export", "--help"], env={"COLUMNS": "400"}, terminal_width=400)
    assert "pip install 'streamcli[ray]'" in result.output
