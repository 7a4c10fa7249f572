"""The index (``streamcli index``) of the file sources that list storage or measure lengths at start-up: video
(``scan=True``), audio and events. For each: the index's lengths are the scan's, a loader gives the same bytes with
and without it, nothing is listed or scanned where it is used, and a stale one is refused naming the rebuild."""

from __future__ import annotations

import io
import json
import logging
import wave
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _events_fakes import H, W, recording, write_folder
from _moto import MotoS3
from conftest import data_root, needs_shared, shared_data
from streamcli_sources import _video_backends
from streamcli_sources import video as video_module
from streamcli_sources.audio import AudioSource
from streamcli_sources.events import EventsSource
from streamcli_sources.video import VideoSource
from typer.testing import CliRunner

from streamcli import StreamLoader
from streamcli import index as sindex
from streamcli.cli import app
from streamcli.errors import IndexFileError, StaleIndexError
from streamcli.source import StreamSource
from streamcli.storage.remote import Remote


def indexed(plugin: str, path: Path | str, *options: str, out: Path | None = None) -> dict[str, Any]:
    """``streamcli index PLUGIN PATH -s OPTION ... --json``'s result."""
    args = ["index", plugin, str(path), *(a for o in options for a in ("-s", o)), "--json"]
    r = CliRunner().invoke(app, args + ([] if out is None else ["--out", str(out)]))
    assert r.exit_code == 0, r.output
    result: dict[str, Any] = json.loads(r.stdout)
    return result


def epoch(source: StreamSource, **kw: Any) -> list[dict[str, np.ndarray]]:
    """Every batch of one epoch, each field and flag as numpy."""
    out = []
    with StreamLoader(source, batch_size=2, time_steps=8, seed=3, **kw) as loader:
        for b in loader:
            got = {k: b[k].numpy().copy() for k in b}
            out.append(got | {"reset": b.reset.numpy().copy(), "valid": b.valid.numpy().copy()})
    return out


def same(a: list[dict[str, np.ndarray]], b: list[dict[str, np.ndarray]]) -> bool:
    return len(a) == len(b) and all(
        x.keys() == y.keys() and all(np.array_equal(x[k], y[k]) for k in x) for x, y in zip(a, b, strict=True)
    )


def refuse(*names: str) -> Any:
    def listing(*args: object, **kw: object) -> None:
        raise AssertionError(f"listed or scanned storage ({names}) although an index was given")

    return listing


@pytest.mark.slow  # decodes real clips
def test_video_with_an_index_lists_probes_and_scans_nothing_and_gives_the_same_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "clips"
    folder.mkdir()
    for name in ("realshort.mp4", "dummy_video.avi"):
        (folder / name).symlink_to(data_root("video") / name)
    (folder / "notes.mp4").write_bytes(b"not a video")  # skipped when the index is written, so never in it
    cache = str(tmp_path / "cache")
    out = indexed("video", folder, "scan=true", f"cache_dir={cache}")  # the CLI says which file it skipped
    assert out["items"] == 2 and out["unknown_lengths"] == 0
    kw: dict[str, Any] = {"size": (16, 16), "scan": True, "cache_dir": cache}
    with pytest.warns(UserWarning, match="notes.mp4"):
        scanned = VideoSource(folder, index="none", **kw)
        want = epoch(scanned)
    assert [n for _, _, n in scanned.items()] == [10, 36]  # dummy_video.avi, realshort.mp4

    for fn in ("list_files", "scan_files"):
        monkeypatch.setattr(video_module, fn, refuse(fn))
    monkeypatch.setattr(_video_backends, "probe_files", refuse("probe_files"))
    source = VideoSource(folder, **kw)
    assert source.streamcli_index is not None and source.items() == scanned.items()
    assert same(epoch(source), want)
    # The loader's index= (the source found none of its own): the same.
    where = folder / sindex.INDEX_NAME
    assert same(epoch(VideoSource(folder, index="none", **kw), index=str(where)), want)
    stale = r"stride: 1 there, 2 here\); rebuild it with streamcli index video .*clips -s stride=2$"
    with pytest.raises(StaleIndexError, match=stale):
        VideoSource(folder, stride=2, **kw)
    with pytest.raises(StaleIndexError, match="scan: True there, False here"):
        VideoSource(folder, cache_dir=cache)


SPEECH = shared_data("audio/speech_8k")


@needs_shared("audio/speech_8k")
@pytest.mark.slow  # reads the shared recordings
def test_audio_with_an_index_reads_no_header_at_start_up_and_gives_the_same_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert SPEECH is not None
    where = tmp_path / "speech.npz"
    out = indexed("audio", SPEECH, "frame_ms=40", out=where)
    assert out["items"] == 8
    listed = AudioSource(SPEECH, frame_ms=40, index="none")
    want = epoch(listed)
    items, fields = listed.items(), listed.fields()
    lengths = [listed.length(i) for i in items]

    monkeypatch.setattr(AudioSource, "_index", refuse("audio._index"))  # the listing and every header
    source = AudioSource(SPEECH, frame_ms=40, index=str(where))
    assert list(source.items()) == items and source.fields() == fields
    assert sindex.read(str(where)).lengths.tolist() == lengths
    assert same(epoch(source), want)
    assert same(epoch(AudioSource(SPEECH, frame_ms=40, index="none"), index=str(where)), want)
    with pytest.raises(StaleIndexError, match=r"frame_ms: 40.0 there, 20.0 here.*streamcli index audio .* --out"):
        AudioSource(SPEECH, index=str(where))


def test_an_index_without_the_format_the_audio_source_needs_is_refused(tmp_path: Path) -> None:
    where = tmp_path / "old.npz"
    settings = AudioSource(data_root("audio"), index="none").index_settings()
    sindex.write(str(where), sindex.encode("audio", settings, ["a.wav"], np.array([3])))  # no info: an old index
    with pytest.raises(IndexFileError, match=r"old\.npz does not record the audio's format; rebuild it"):
        AudioSource(data_root("audio"), index=str(where))


def events_folder(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    folder = tmp_path / "recs"
    write_folder(folder)
    return folder, {"window_us": 20_000, "cache_dir": str(tmp_path / "cache")}


def test_events_with_an_index_list_and_scan_nothing_and_give_the_same_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder, kw = events_folder(tmp_path)
    out = indexed("events", folder, "window_us=20000", f"cache_dir={kw['cache_dir']}")
    assert out["items"] == 3
    scanned = EventsSource(folder, index="none", **kw)
    want = epoch(scanned)
    index = sindex.read(str(folder / sindex.INDEX_NAME))
    assert index.lengths.tolist() == [scanned.length(i) for i in scanned.items()]

    monkeypatch.setattr(EventsSource, "files", refuse("events.files"))
    monkeypatch.setattr(EventsSource, "prepare", refuse("events.prepare"))
    source = EventsSource(folder, **kw)
    assert source.fields() == scanned.fields()
    assert same(epoch(source), want)
    assert same(epoch(EventsSource(folder, index="none", **kw), index=str(folder / sindex.INDEX_NAME)), want)
    with pytest.raises(StaleIndexError, match=r"window_us: 20000 there, 50000 here.*-s window_us=50000$"):
        EventsSource(folder, cache_dir=kw["cache_dir"])


def test_a_damaged_recording_stops_the_index_or_is_left_out_of_it_with_on_error_skip(tmp_path: Path) -> None:
    """A truncated recording among whole ones: without ``--on-error`` the command names it and writes no index;
    with ``--on-error skip`` the index holds the others, names it, and a loader over the index reads what a loader
    over the folder without it reads."""
    folder, kw = events_folder(tmp_path)
    whole = EventsSource(folder, index="none", **kw)
    want = epoch(whole)
    good = sorted(folder.iterdir())[0]
    damaged = folder / f"zz_damaged{good.suffix}"
    damaged.write_bytes(good.read_bytes()[:100])
    args = ["index", "events", str(folder), "-s", "window_us=20000", "-s", f"cache_dir={kw['cache_dir']}"]

    r = CliRunner().invoke(app, args)
    assert r.exit_code == 1
    assert damaged.name in r.output and "--on-error skip" in r.output
    assert not (folder / sindex.INDEX_NAME).exists()

    r = CliRunner().invoke(app, [*args, "--on-error", "skip", "--quiet"])
    assert r.exit_code == 0, r.output
    assert r.stdout == "" and f"skipped {str(damaged)!r}, left out of the index" in r.stderr  # said even then

    r = CliRunner().invoke(app, [*args, "--on-error", "skip", "--json"])
    assert r.exit_code == 0, r.output
    result = json.loads(r.stdout)
    assert result["items"] == 3
    assert [Path(s["item"]).name for s in result["skipped"]] == [damaged.name]
    assert "not a whole" in result["skipped"][0]["error"]
    index = sindex.read(str(folder / sindex.INDEX_NAME))
    assert damaged.name not in [Path(i).name for i in index.items]
    assert same(epoch(EventsSource(folder, **kw)), want)


@pytest.mark.slow  # a worker process
def test_a_worker_lists_nothing_with_an_index(tmp_path: Path) -> None:
    """A recording added after the index, with an event off the sensor: a process that listed the folder would
    take it in and refuse it; the loader's worker opens only the items of the main process's plan."""
    folder, kw = events_folder(tmp_path)
    kw["sensor_size"] = (H, W)
    indexed("events", folder, "window_us=20000", f"sensor_size={H}x{W}", f"cache_dir={kw['cache_dir']}")
    want = epoch(EventsSource(folder, index="none", **kw))
    late = recording(9)
    late["x"][0] = W
    np.save(folder / "rec9.npy", late)
    with pytest.raises(ValueError, match="outside sensor_size"):
        EventsSource(folder, index="none", **kw).items()
    assert same(epoch(EventsSource(folder, **kw), num_workers=1), want)


@pytest.mark.slow  # a moto S3 server
def test_audio_on_s3_with_the_index_lists_nothing_at_start_up(
    bucket: str, moto_s3: MotoS3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STREAMCLI_CACHE_DIR", str(tmp_path / "cache"))
    url = f"{bucket}/speech"
    for k in range(3):
        buf = io.BytesIO()
        with wave.open(buf, "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(8000)
            w.writeframes(np.arange(800 * (k + 1), dtype="<i2").tobytes())
        Remote(url).write(f"a{k}.wav", buf.getvalue())
    want = epoch(AudioSource(url, index="none"))
    indexed("audio", url)
    lines: list[str] = []
    handler = logging.Handler(logging.INFO)
    handler.emit = lambda record: lines.append(record.getMessage())  # type: ignore[method-assign]
    log, level = logging.getLogger("werkzeug"), logging.getLogger("werkzeug").level
    log.addHandler(handler)
    log.setLevel(logging.INFO)  # a line per request
    try:
        AudioSource(url, index="none").items()
        assert any("list-type=" in x for x in lines), lines  # what a listing looks like here
        lines.clear()
        source = AudioSource(url)
        assert source.streamcli_index is not None and len(source.items()) == 3 and source.samples == 160
        assert not any("list-type=" in x or ("HEAD" in x and ".wav" in x) for x in lines), lines
        assert same(epoch(source), want)  # each file fetched where it is opened, none listed
        assert not any("list-type=" in x for x in lines), lines
    finally:
        log.removeHandler(handler)
        log.setLevel(level)


def test_the_command_line_stats_no_item_of_an_indexed_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from streamcli.cli import _sources

    checked: list[str] = []
    monkeypatch.setattr(_sources, "check_readable", lambda path: checked.append(str(path)))
    folder, kw = events_folder(tmp_path)
    options = ["window_us=20000", f"cache_dir={kw['cache_dir']}"]
    _sources.resolve_source(["events", str(folder)], options)
    assert len(checked) == 4  # the folder given, then each recording before it is read
    indexed("events", folder, *options)
    checked.clear()
    spec = _sources.resolve_source(["events", str(folder)], options)
    assert spec.source is not None and len(spec.source.items()) == 3 and checked == [str(folder)]
