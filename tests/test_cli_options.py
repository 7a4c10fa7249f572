"""The CLI's loader options (declared once), the shared worker default and the help text's tidiness."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from streamcli.cli import app
from streamcli.cli._common import UsageFailure
from streamcli.cli._options import (
    LOADER_OPTIONS,
    MODE_ENUMS,
    LoaderOptions,
    default_workers,
    flag_names,
    source_flag_names,
    usable_cores,
)
from streamcli.config import MODES

runner = CliRunner()
WIDE = {"COLUMNS": "200"}


def test_mode_choices_come_from_the_library_table() -> None:
    assert {name: tuple(m.value for m in enum) for name, enum in MODE_ENUMS.items()} == MODES  # type: ignore[attr-defined]
    defaults = LoaderOptions()
    for name, values in MODES.items():
        assert getattr(defaults, name) == values[0]


@pytest.mark.parametrize("command", ["preview", "export", "bench"])
def test_every_command_gets_every_loader_option(command: str) -> None:
    out = runner.invoke(app, [command, "--help"], env=WIDE).output
    for opt in LOADER_OPTIONS:
        if command == "bench" and opt.name == "num_workers":
            continue  # bench sweeps a list of counts instead
        assert opt.flags[0].split("/")[0] in out, opt.name


def test_loader_options_object() -> None:
    opts = LoaderOptions.from_cli({"batch_size": 4, "num_workers": None, "boundary": MODE_ENUMS["boundary"]("pack")})
    assert opts.boundary == "pack" and opts.num_workers == default_workers(4)
    assert "batch_size" not in opts.kwargs() and "num_workers" not in opts.record()
    assert LoaderOptions.from_cli({"batch_size": 1, "num_workers": None}).num_workers <= 1  # a worker needs a row
    assert LoaderOptions.from_cli({"segment": 5}).kwargs()["segment"] == 5  # a new row needs no new field


def test_default_workers_is_one_number_shown_in_help() -> None:
    n = default_workers()
    assert n == min(2, usable_cores())
    for command in ("preview", "export"):
        out = " ".join(runner.invoke(app, [command, "--help"], env=WIDE).output.split())
        assert f"Default: min(2, usable cores, B), {n} here." in out
    sweep = " ".join(runner.invoke(app, ["bench", "--help"], env=WIDE).output.split())
    assert f"({', '.join(map(str, range(n + 1)))} here)" in sweep


def test_usage_failure_uses_no_private_typer_class() -> None:
    assert not any(c.__module__.startswith("typer._click") for c in UsageFailure.__mro__)


@pytest.mark.parametrize("command", [[], ["preview"], ["bench"], ["export"], ["verify"], ["plugins"], ["samples"]])
def test_help_has_no_bool_metavars_and_no_braces(command: list[str]) -> None:
    out = runner.invoke(app, [*command, "--help"], env=WIDE).output
    assert "<bool>" not in out and "<list[str]>" not in out
    usage = next(ln for ln in out.splitlines() if "Usage:" in ln)
    assert "{" not in usage, usage


def test_usage_lines_name_the_arguments() -> None:
    out = runner.invoke(app, ["export", "--help"], env=WIDE).output
    assert re.search(r"Usage: streamcli export \[OPTIONS\] \[SOURCE\] \[PATH\] OUT_DIR", out)
    assert "Usage: streamcli verify [OPTIONS] OUT_DIR" in runner.invoke(app, ["verify", "--help"], env=WIDE).output


def test_loader_messages_name_the_flags() -> None:
    msg = "num_workers=3 exceeds batch_size=2; each worker owns whole rows, so use num_workers <= 2"
    assert flag_names(msg) == (
        "-w/--workers 3 exceeds -b/--batch-size 2; each worker owns whole rows, so use -w/--workers <= 2"
    )
    assert flag_names("time_steps=0 must be an integer >= 1") == "-t/--time-steps 0 must be an integer >= 1"
    assert flag_names("on_error='x' is not one of 'raise', 'skip'") == "--on-error 'x' is not one of 'raise', 'skip'"
    assert source_flag_names("or pass mismatch='skip' (and rate=...)", ["mismatch", "rate"]) == (
        "or pass -s mismatch='skip' (and -s rate=...)"
    )


def test_too_many_workers_names_both_flags() -> None:
    result = runner.invoke(app, ["preview", "camera", "-s", "size=8x8", "-b", "2", "-w", "3", "--batches", "1"])
    assert result.exit_code == 2
    assert "-w/--workers 3 exceeds -b/--batch-size 2" in result.output
