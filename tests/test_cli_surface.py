"""One consistent CLI (issue 37): -s/--set for source options (old -o kept with a warning), one meaning per flag,
choices shown as choices, --json and --quiet where they belong, option descriptions in ``plugins NAME``, and
errors that are ``StreamcliError``s naming the fix."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated

import pytest
from _sources import CountingSource
from typer.testing import CliRunner

from streamcli import StreamLoader
from streamcli.cli import app
from streamcli.cli.cmd_plugins import options_of
from streamcli.errors import LoaderClosedError, StaleIteratorError, StreamcliError
from streamcli.plugins import list_plugins, option_docs

runner = CliRunner()
WIDE = {"COLUMNS": "200", "TERM": "dumb", "NO_COLOR": "1"}
CAM = ["camera", "-s", "count=2", "-s", "steps=4", "-s", "size=8x8"]
TINY = ["-b", "2", "-t", "2", "-w", "0"]
ROOT = Path(__file__).resolve().parents[1]


def help_of(*command: str) -> str:
    return " ".join(runner.invoke(app, [*command, "--help"], env=WIDE).output.split())


# -- flags ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["preview", "bench", "export", "events-from-video", "samples"])
def test_source_options_are_set_with_s_and_o_is_hidden(command: str) -> None:
    out = help_of(command)
    assert "--set -s" in out or "--set  -s" in out or re.search(r"--set\s+-s", out), out
    assert "--option" not in out and not re.search(r"(?<![\w-])-o(?![\w-])", out), out


def test_the_old_o_still_sets_a_source_option_with_one_warning_line() -> None:
    result = runner.invoke(app, ["preview", "camera", "-o", "count=2", "-o", "steps=4", "-s", "size=8x8", *TINY,
                                 "--batches", "1"])  # fmt: skip
    assert result.exit_code == 0, result.output
    warnings = [ln for ln in result.output.splitlines() if ln.startswith("warning:")]
    assert warnings == [
        "warning: -o/--option is deprecated and will be removed in the next release; use -s/--set key=value "
        "(e.g. -s size=64x64)"
    ]
    assert "2/2 done" in result.output or "/2 done" in result.output


def test_a_flag_means_one_thing_everywhere() -> None:
    preview, events, bench = help_of("preview"), help_of("events-from-video"), help_of("bench")
    assert "--refresh" in preview and "--fps" not in preview  # redraws; --fps is a frame rate elsewhere
    assert "--noise-seed" in events and not re.search(r"--seed\b", events)  # --seed is the stream order
    assert "--fps" in events and "Frame rate" in events
    assert "-w" in bench and "repeat it" in bench and "comma" not in bench


def test_old_spellings_still_work_with_a_warning(tmp_path: Path) -> None:
    old = runner.invoke(app, ["preview", *CAM, *TINY, "--batches", "1", "--fps", "5"])
    assert old.exit_code == 0 and "use --refresh" in old.output, old.output
    out = tmp_path / "ev"
    old = runner.invoke(app, ["events-from-video", *CAM, str(out), "--to", "npy", "--seed", "3", "--noise", "1",
                              "--json"])  # fmt: skip
    assert old.exit_code == 0 and "use --noise-seed" in old.stderr, old.output
    assert json.loads(old.stdout)["simulator"]["seed"] == 3


def test_bench_takes_w_repeated_and_the_old_comma_list_with_a_warning() -> None:
    from streamcli.cli.cmd_bench import parse_workers

    assert parse_workers(["0", "2"]) == [0, 2]
    result = runner.invoke(app, ["bench", *CAM, "-b", "2", "-t", "2", "-w", "0,0", "--batches", "1", "--warmup", "0",
                                 "--repeats", "1", "--json"])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert [r["workers"] for r in json.loads(result.stdout)["results"]] == [0, 0]
    assert "use -w 0 -w 1 -w 2" in result.stderr


@pytest.mark.parametrize(
    ("command", "flag", "choices"),
    [("export", "--compress", "none|deflate|zstd"), ("export", "--engine", "local|ray"),
     ("events-from-video", "--to", "evt3|aedat4|npy")],
)  # fmt: skip
def test_choices_are_shown_as_choices(command: str, flag: str, choices: str) -> None:
    out = help_of(command)
    assert re.search(re.escape(flag) + r"\s+[<\[]" + re.escape(choices), out), out


def test_the_compress_choices_are_the_codecs() -> None:
    from streamcli.cli.cmd_export import COMPRESS
    from streamcli.shards import codec

    assert set(COMPRESS) == set(codec.NAMES)


# -- --json and --quiet ------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["export", "verify", "samples", "replay", "bench", "plugins", "events-from-video"])
def test_every_non_interactive_command_takes_json(command: str) -> None:
    assert "--json" in help_of(command)


@pytest.mark.parametrize("command", ["export", "bench", "replay", "events-from-video", "samples"])
def test_every_long_command_takes_quiet(command: str) -> None:
    assert re.search(r"--quiet\s+-q", help_of(command))


def test_export_verify_and_replay_json_is_one_object_on_stdout(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = runner.invoke(app, ["export", *CAM, str(out), *TINY, "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["batches"] == summary["written"]["batches"] > 0 and summary["out_dir"] == str(out)
    checked = runner.invoke(app, ["verify", str(out), "--json"])
    assert checked.exit_code == 0, checked.output
    assert json.loads(checked.stdout) | {"fields": None} == {
        "out_dir": str(out), "ok": True, "problems": [], "batches": summary["batches"], "shards": summary["shards"],
        "batch_size": 2, "time_steps": 2, "layout": "TB", "fields": None,
    }  # fmt: skip


def test_verify_json_lists_the_problems_and_exits_1(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert runner.invoke(app, ["export", *CAM, str(out), *TINY, "-q"]).exit_code == 0
    shard = next(out.glob("*.npz"))
    shard.write_bytes(shard.read_bytes()[:100])
    result = runner.invoke(app, ["verify", str(out), "--json"])
    assert result.exit_code == 1
    got = json.loads(result.stdout)
    assert got["ok"] is False and got["problems"]


def test_export_quiet_prints_nothing(tmp_path: Path) -> None:
    result = runner.invoke(app, ["export", *CAM, str(tmp_path / "out"), *TINY, "--quiet"])
    assert result.exit_code == 0 and result.output == "", result.output


def test_samples_writes_what_the_examples_need_and_json_says_so(tmp_path: Path) -> None:
    root = tmp_path / "samples"
    result = runner.invoke(app, ["samples", str(root), "--count", "2", "--steps", "8", "-s", "size=16x24", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert result.stderr == ""
    for part, suffix in (("clips", ".mp4"), ("text", ".txt"), ("audio", ".wav"), ("events", ".npy")):
        assert report[part]["files"] > 0 and report[part]["written"] == report[part]["files"]
        assert {p.suffix for p in (root / part).rglob("*") if p.is_file()} == {suffix}, part
    assert {p.name for p in (root / "text").iterdir()} == {"prose", "code"}
    again = json.loads(runner.invoke(app, ["samples", str(root), "--count", "2", "--steps", "8", "--json"]).stdout)
    assert all(again[p]["written"] == 0 for p in ("clips", "text", "audio", "events"))


def test_samples_old_size_flag_still_works(tmp_path: Path) -> None:
    result = runner.invoke(app, ["samples", str(tmp_path / "s"), "--count", "1", "--steps", "2", "--size", "16x16"])
    assert result.exit_code == 0, result.output
    assert "use -s size=HxW" in result.stderr


# -- plugins NAME ------------------------------------------------------------------------------------------


BUILT_IN = sorted(p.name for p in list_plugins() if p.distribution == "streamcli")


@pytest.mark.parametrize("name", BUILT_IN)
def test_every_built_in_sources_options_have_descriptions(name: str) -> None:
    opts = options_of(name)
    assert opts
    missing = [o["name"] for o in opts if not o["description"].strip()]
    assert not missing, f"{name}: no description for {missing}"


def test_plugins_name_shows_the_default_that_applies_and_the_descriptions() -> None:
    window = next(o for o in options_of("events") if o["name"] == "window_us")
    assert window["default"] == 50000
    out = runner.invoke(app, ["plugins", "events"], env=WIDE).output
    assert re.search(r"window_us\s*│\s*int\s*│\s*50000\s*│\s*window length in µs", out), out
    data = json.loads(runner.invoke(app, ["plugins", "camera", "--json"]).stdout)
    assert next(o for o in data["options"] if o["name"] == "steps")["description"] == "frames per stream."


class _GoogleSource:
    """A user's source.

    Args:
        path: where the data is.
        width: bytes per step, over two
            lines.
    """

    def __init__(self, path: str, *, width: int = 4, depth: Annotated[int, "how deep, from an annotation"] = 1):
        pass


class _NumpySource:
    def __init__(self, path: str, *, rate: int = 0) -> None:
        """Open it.

        Parameters
        ----------
        rate : int
            samples per second. Default: 16000.
        """


def test_a_users_plugin_gets_descriptions_from_its_docstring_or_annotations() -> None:
    assert option_docs(_GoogleSource) == {
        "path": "where the data is.",
        "width": "bytes per step, over two lines.",
        "depth": "how deep, from an annotation",
    }
    assert option_docs(_NumpySource) == {"rate": "samples per second. Default: 16000."}


# -- errors ------------------------------------------------------------------------------------------------


def test_an_unknown_option_lists_the_options_without_the_sources_argument() -> None:
    result = runner.invoke(app, ["preview", "text", str(ROOT / "README.md"), "-s", "colour=red"])
    assert result.exit_code == 2
    assert "valid options: width, glob, strings, keep_bom, newlines" in result.output, result.output


def test_a_misspelt_plugin_gets_one_hint() -> None:
    result = runner.invoke(app, ["plugins", "vidoe"])
    assert result.exit_code == 2
    assert result.output.count("did you mean 'video'?") == 1, result.output


def test_verify_a_missing_folder_names_it_and_what_to_pass(tmp_path: Path) -> None:
    missing = tmp_path / "nonexistent"
    result = runner.invoke(app, ["verify", str(missing)])
    assert result.exit_code == 2
    line = result.output.strip()
    assert str(missing) in line and "does not exist" in line and "streamcli export wrote" in line
    assert len(line.splitlines()) == 1


def test_a_superseded_iterator_and_a_closed_loader_raise_streamcli_errors() -> None:
    with StreamLoader(CountingSource([9, 9]), 2, 3) as loader:
        old = iter(loader)
        next(old)
        new = iter(loader)
        next(new)
        with pytest.raises(StaleIteratorError, match="take batches from the newest iterator") as info:
            next(old)
        assert isinstance(info.value, StreamcliError) and isinstance(info.value, RuntimeError)
    with pytest.raises(LoaderClosedError, match="create a new one"):
        iter(loader)


_INTERNAL = ("internal error", "the scan did not settle")  # bugs of streamcli itself, not a user's to meet


def test_no_plain_runtime_error_is_raised_on_a_users_path() -> None:
    found = []
    for folder in ("streamcli", "plugins"):
        for path in (ROOT / folder).rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            for m in re.finditer(r"raise RuntimeError\((.{0,160})", text, re.S):
                if not any(s in m.group(1) for s in _INTERNAL):
                    found.append(f"{path.relative_to(ROOT)}: {m.group(0)[:100]!r}")
    assert not found, "\n".join(found)


def test_the_old_fps_spelling_is_range_checked_as_refresh_is() -> None:
    result = runner.invoke(app, ["preview", "--fps", "0.1"])
    assert result.exit_code == 2
    assert "error: --refresh 0.1 must be at least 0.5 redraws per second" in result.output
