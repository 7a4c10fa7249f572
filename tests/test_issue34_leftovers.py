"""Issue 34's leftovers: a refused mix is bad input (exit 2, one line); bench's padding hint tells uneven lengths
from too few streams; the audio source pins an object in the cache while it reads it; a failing ``length()`` under
``on_error="skip"`` warns once."""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from _sources import CountingSource
from conftest import data_root
from streamcli_sources.audio import AudioSource
from typer.testing import CliRunner

from streamcli import ConfigError, SourceError, StreamLoader, mix
from streamcli.cli import app
from streamcli.storage.cache import Cache, cache_root
from streamcli.storage.remote import Remote

runner = CliRunner()


def texts(folder: Path, **files: str) -> Path:
    folder.mkdir()
    for name, text in files.items():
        (folder / f"{name}.txt").write_text(text)
    return folder


# ------------------------------------------------------------------------------------------------ a refused mix
def test_a_mix_of_empty_streams_is_bad_input_exit_2_in_one_line(tmp_path: Path, no_leaks: None) -> None:
    a, b = texts(tmp_path / "a", x=""), texts(tmp_path / "b", y="")
    args = ["export", "mix", f"a=0.5:text:{a}", f"b=0.5:text:{b}", str(tmp_path / "out"), "--batches", "1"]
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "every stream of every source is empty (a, b: 0 steps)" in lines[0], result.output
    assert "failed listing its items" not in result.output and "Traceback" not in result.output
    assert not (tmp_path / "out").exists()


def test_an_until_first_mix_with_an_empty_source_names_the_cli_fix(tmp_path: Path, no_leaks: None) -> None:
    books = texts(tmp_path / "books", tom=(data_root("text") / "tom_sawyer_excerpt.txt").read_text())
    blank = texts(tmp_path / "blank", y="")
    result = runner.invoke(app, ["preview", "mix", f"books=0.7:text:{books}", f"blank=0.3:text:{blank}"])
    assert result.exit_code == 2, result.output
    assert "source 'blank' has no steps (its one stream is empty)" in result.output
    assert re.search(r"use -[os] until=restream", result.output) and len(result.output.strip().splitlines()) == 1


def test_the_loader_raises_a_refused_mix_as_a_config_error_not_the_plugins_failure(no_leaks: None) -> None:
    m = mix({"a": CountingSource([0]), "b": CountingSource([0, 0])})
    with pytest.raises(ConfigError) as info:
        StreamLoader(m, 2, 8)
    assert isinstance(info.value, SourceError)  # still caught as before
    assert str(info.value).startswith("mix: every stream of every source is empty")


# ------------------------------------------------------------------------------------------ bench's padding hint
def test_bench_blames_uneven_lengths_not_the_batch_size(tmp_path: Path, no_leaks: None) -> None:
    folder = texts(tmp_path / "uneven", long="x" * 295, **{f"s{i}": "ab" for i in range(5)})
    args = ["bench", "text", str(folder), "-b", "4", "-t", "16", "-w", "0", "--quick"]
    result = runner.invoke(app, args, env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    hint = " ".join(line for line in result.output.splitlines() if "real data" in line)
    assert "uneven stream lengths: the longest has" in hint, result.output
    assert "smaller batch size" not in hint


# ------------------------------------------------------------------------------------------ audio over a URL
def digest(loader: StreamLoader) -> str:
    h = hashlib.sha256()
    for b in loader:
        for k in sorted(b.data):
            h.update(b[k].numpy().tobytes())
        h.update(b.valid.numpy().tobytes())
    return h.hexdigest()


@pytest.fixture
def wavs(bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, str]]:
    """Two WAV files of one format, in a local folder and in a bucket; the cache in tmp_path."""
    monkeypatch.setenv("STREAMCLI_CACHE_DIR", str(tmp_path / "cache"))
    local = tmp_path / "wav"
    local.mkdir()
    wav = data_root("audio") / "test-8000Hz-le-2ch-1byteu.wav"
    for name in ("a.wav", "b.wav"):
        (local / name).write_bytes(wav.read_bytes())
        Remote(f"{bucket}/wav").write(name, wav.read_bytes())
    yield local, f"{bucket}/wav"


def test_audio_from_a_bucket_through_a_cache_smaller_than_the_data_is_exact(
    wavs: tuple[Path, str], monkeypatch: pytest.MonkeyPatch, no_leaks: None
) -> None:
    local, url = wavs
    one = (local / "a.wav").stat().st_size
    monkeypatch.setenv("STREAMCLI_CACHE_BYTES", str(one + one // 2))  # one object fits, not both
    with StreamLoader(AudioSource(local), 2, 8, seed=3) as a, StreamLoader(AudioSource(url), 2, 8, seed=3) as b:
        assert digest(b) == digest(a)


def test_audio_pins_an_object_while_a_stream_reads_it(wavs: tuple[Path, str], no_leaks: None) -> None:
    _, url = wavs
    src = AudioSource(url)
    item = src.items()[0]
    steps = src.open(item)
    first = next(steps)
    other = Cache(cache_root() / "objects", limit=0)  # another process's eviction, with no room at all
    other.evict()
    cached = [p for p in (cache_root() / "objects").iterdir() if not p.name.startswith(".")]
    assert len(cached) == 1  # the open stream's object stays
    rest = list(steps)
    assert sum(len(s["pcm"]) for s in [first, *rest]) == src.length(item)
    other.evict()  # the stream is closed: its entry may go now
    assert not [p for p in (cache_root() / "objects").iterdir() if not p.name.startswith(".")]
    window = src.window(src.items()[1])  # mapped while pinned: the mapping outlives the entry
    other.evict()
    assert np.asarray(window["pcm"][0:2]).shape == (2, src.samples, 2)


# ------------------------------------------------------------------------------------- a failing length() warns once
class FailingLength(CountingSource):
    def length(self, item: int) -> int | None:
        if item == 1:
            raise RuntimeError("no length")
        return super().length(item)


def test_a_failing_length_under_skip_warns_once(caplog: pytest.LogCaptureFixture, no_leaks: None) -> None:
    caplog.set_level(logging.WARNING, logger="streamcli")
    with StreamLoader(FailingLength([5, 6, 7]), 2, 4, on_error="skip") as loader:
        assert [loader.stream_length(i) for i in range(loader.num_streams)] == [5, None, 7]  # as export's header
        for _ in loader:
            pass
    said = [r for r in caplog.records if "length() of item" in r.getMessage()]
    assert len(said) == 1, [r.getMessage() for r in said]


# ------------------------------------------------------------------------------- a tuple fix the -o parser takes
def test_a_tuple_in_a_sources_message_is_spelled_as_o_takes_it() -> None:
    from streamcli.cli._options import source_flag_names

    msg = "x=69 is outside sensor_size=(48, 64); pass sensor_size=(48, 70) or larger"
    want = r"x=69 is outside -([os]) sensor_size=48,64; pass -\1 sensor_size=48,70 or larger"  # -o, or -s after it
    assert re.fullmatch(want, source_flag_names(msg, ["sensor_size"]))


def test_the_sensor_size_an_off_sensor_message_suggests_works_when_pasted(tmp_path: Path, no_leaks: None) -> None:
    from _events_fakes import recording

    ev = recording(3, 2000)
    ev["x"][700] = 69  # the fakes' sensor is 48 x 64
    np.save(tmp_path / "rec.npy", ev)
    args = ["export", "events", str(tmp_path / "rec.npy"), "-o", "window_us=40000", "--epochs", "1", "-w", "0"]
    result = runner.invoke(app, [*args, str(tmp_path / "a"), "-o", "sensor_size=48,64"])
    assert result.exit_code == 2, result.output
    assert re.search(r"pass -[os] sensor_size=48,70 or larger", result.output), result.output
    result = runner.invoke(app, [*args, str(tmp_path / "b"), "-o", "sensor_size=48,70"])
    assert result.exit_code == 0, result.output


# ------------------------------------------------------------------------------- Ctrl-C while workers start
@pytest.mark.slow
def test_a_ctrl_c_taken_by_another_thread_waits_until_every_worker_has_started(
    monkeypatch: pytest.MonkeyPatch, no_leaks: None
) -> None:
    """The signal mask is per thread: a Ctrl-C the kernel gives another thread (a progress bar's) was raised in
    the main thread mid-start, and a child read a half-sent start-up (a traceback on the terminal)."""
    import multiprocessing.context
    import os
    import signal
    import threading

    go, sent = threading.Event(), threading.Event()

    def other_thread() -> None:  # started before the workers, so SIGINT is not blocked here
        go.wait(30)
        os.kill(os.getpid(), signal.SIGINT)
        sent.set()

    helper = threading.Thread(target=other_thread, daemon=True)
    helper.start()
    started: list[int] = []
    real_start = multiprocessing.context.SpawnProcess.start

    def start(self: multiprocessing.process.BaseProcess) -> None:
        if not started:
            go.set()
            assert sent.wait(30)
            for _ in range(1000):  # bytecode boundaries: where Python runs a pending handler
                pass
        real_start(self)
        started.append(1)

    monkeypatch.setattr(multiprocessing.context.SpawnProcess, "start", start)
    # Python's own Ctrl-C handler, as a script has it, whatever an earlier test in this process left (Ray's driver
    # installs its own).
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            with StreamLoader(CountingSource([50, 50, 50]), 2, 4, num_workers=2, mp_context="spawn") as loader:
                for _ in loader:
                    pass
    finally:
        signal.signal(signal.SIGINT, old)
    helper.join(5)
    assert len(started) == 2  # the interrupt came once both workers were started whole
