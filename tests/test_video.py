"""The video source over real clips: tests/data/video always, every clip of ../shared/data/video where present
(the tests marked `shared`): counts, skips, times, resume, segments."""

from __future__ import annotations

import os
import shutil
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
from _dv import DV_FRAMES, DV_NAME, opencv_skips_dv
from conftest import data_root, needs_shared, require_shared, shared_data
from streamcli_sources import _scan
from streamcli_sources.video import VideoSource

from streamcli.errors import SourceError

LOCAL = data_root("video")
VIDEO = shared_data("video") or Path("no-shared-data")  # the tests that read it are marked `shared`
shared = needs_shared("video")

# Frames that really decode (counted by a full decode here, equal to ffprobe -count_frames). The header
# says otherwise for several: alea.mpg claims 0, blue.mpg -3e15, small_movie.mp4 12.
EXPECTED = {
    "Effet_force_magnetique.ogv": 34,
    "Shepard_Calais_1906_FrenchGP.ogv": 288,
    "anim-1.mov": 91,
    "balle-jbart.mp4": 255,
    "bikes.mp4": 250,
    "carphone_pristine.mp4": 120,
    "cityCC0.mpg": 190,
    "cockatoo.mp4": 280,
    "dummy_video.avi": 10,
    "homer.avi": 86,
    "odd/alea.mpg": 162,
    "odd/blue.mpg": 24,
    "odd/sage_example.webm": 2,
    "odd/small_movie.mp4": 11,
    "realshort.mp4": 36,
    "retroMars2018.avi": 25,
    "soundwave.mp4": 3544,
}
# Not videos to OpenCV: an MPEG-4 Structured Audio file named .mp4, and an Opus-only WebM.
SKIPPED = {"odd/finished-1.webm", "odd/sine.mp4"}
# Container times that are no use (all 0, or a last frame at 0): time_ms is extrapolated there.
BAD_TIMES = {"odd/alea.mpg", "odd/blue.mpg"}

# The same for tests/data/video (its odd/ has one file that is not a video and one that never converts).
# The DV clip converts on some hosts and not on others (tests/_dv.py): it is expected, or skipped, accordingly.
LOCAL_EXPECTED = {
    "Shepard_Calais_1906_FrenchGP.ogv": 288,
    "chessboard_mjpeg.avi": 13,
    "cityCC0_first1MB.mpg": 37,
    "dummy_video.avi": 10,
    "odd/small_movie.mp4": 11,
    "realshort.mp4": 36,
    **({} if opencv_skips_dv() else {DV_NAME: DV_FRAMES}),
}

LOCAL_SKIPPED = {"odd/sound_not_video.mp4", *opencv_skips_dv()}

SMALL = (24, 32)


def rel(path: str, root: Path = VIDEO) -> str:
    return Path(path).relative_to(root).as_posix()


def steps(it: Iterator[Any]) -> tuple[np.ndarray, np.ndarray]:
    got = list(it)
    frames = np.stack([s["frame"] for s in got]) if got else np.zeros((0,), np.uint8)
    return frames, np.array([float(s["time_ms"]) for s in got])


@pytest.fixture(scope="module")
def cache(video_scans: str) -> str:
    """The scans of the real clips: the run's one cache (tests/_scans.py), which other files' scans fill too."""
    return video_scans


@dataclass
class Clips:
    """One folder of real clips, scanned, with what it should hold and a full decode of each clip."""

    root: Path
    expected: dict[str, int]
    skipped: set[str]
    src: VideoSource
    reference: dict[str, tuple[np.ndarray, np.ndarray]]


def _scan_clips(root: Path, expected: dict[str, int], skipped: set[str], cache: str) -> Clips:
    src = VideoSource(root, size=SMALL, scan=True, cache_dir=cache)
    with pytest.warns(UserWarning, match="skipping") as record:
        src.items()
    assert {rel(str(w.message).split("skipping ")[1].split(":")[0], root) for w in record} == skipped
    reference = {rel(item[0], root): steps(src.open(item)) for item in src.items()}  # from frame 0, small
    return Clips(root, expected, skipped, src, reference)


@pytest.fixture(scope="module")
def shared_clips(cache: str) -> Clips:
    require_shared("video")
    return _scan_clips(VIDEO, EXPECTED, SKIPPED, cache)


@pytest.fixture(scope="module")
def local_clips(cache: str) -> Clips:
    return _scan_clips(LOCAL, LOCAL_EXPECTED, LOCAL_SKIPPED, cache)


@pytest.fixture(scope="module", params=["tests/data", "shared"])
def clips(request: pytest.FixtureRequest) -> Clips:
    """Each folder in turn: tests/data always, the shared set where present."""
    clips: Clips = request.getfixturevalue("local_clips" if request.param == "tests/data" else "shared_clips")
    return clips


@pytest.fixture(scope="module")
def scanned(shared_clips: Clips) -> VideoSource:
    return shared_clips.src


@pytest.fixture(scope="module")
def reference(shared_clips: Clips) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    return shared_clips.reference


@pytest.mark.slow
def test_every_file_decodes_its_expected_number_of_frames(clips: Clips) -> None:
    src = clips.src
    assert {rel(i[0], clips.root): src.length(i) for i in src.items()} == clips.expected
    assert {name: len(frames) for name, (frames, _) in clips.reference.items()} == clips.expected
    assert {rel(p, clips.root) for p, _ in src.skipped} == clips.skipped
    for frames, times in clips.reference.values():
        assert frames.dtype == np.uint8 and frames.shape[1:] == (3, *SMALL)
        assert times[0] >= 0 and np.all(np.diff(times) > 0)


@shared
@pytest.mark.slow
def test_header_counts_are_wrong_where_the_readme_says() -> None:
    # Guards the premise of the scan: these headers really lie.
    for name in ("odd/alea.mpg", "odd/blue.mpg", "odd/small_movie.mp4"):
        cap = cv2.VideoCapture(str(VIDEO / name))
        assert cap.get(cv2.CAP_PROP_FRAME_COUNT) != EXPECTED[name]
        cap.release()


@shared
@pytest.mark.slow
def test_time_ms_is_increasing_and_from_the_container(reference: Any) -> None:
    for name, (_, times) in reference.items():
        assert times[0] >= 0 and np.all(np.diff(times) > 0), name
    # Clean clips: exactly the container's times, e.g. 25 fps -> 40 ms apart.
    np.testing.assert_allclose(reference["bikes.mp4"][1][:3], [0.0, 40.0, 80.0])
    # blue.mpg reports 0 for every frame: extrapolated at its header's 30 fps.
    np.testing.assert_allclose(reference["odd/blue.mpg"][1][:3], [0.0, 1000 / 30, 2000 / 30])
    # alea.mpg's last frame reports 0: extrapolated by the previous interval.
    t = reference["odd/alea.mpg"][1]
    assert t[-1] - t[-2] == pytest.approx(t[-2] - t[-3])


@pytest.mark.slow
def test_resume_is_exact_for_every_clip(clips: Clips, cache: str) -> None:
    # The scanned source seeks and verifies; the plain one decodes and discards. Both must match a fresh read.
    scanned, reference = clips.src, clips.reference
    plain = VideoSource(clips.root, size=SMALL, cache_dir=cache)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain_items = {rel(i[0], clips.root): i for i in plain.items()}
    for item in scanned.items():
        name = rel(item[0], clips.root)
        frames, times = reference[name]
        n = len(frames)
        for k in sorted({1, n // 3, n - 1, n}):
            # Decoding and discarding is slow, so the plain source is checked near the start only.
            for src, it in ((scanned, item), (plain, plain_items[name]))[: 2 if k <= n // 3 else 1]:
                got_f, got_t = steps(_take(src.open(it, start=k), 6))
                np.testing.assert_array_equal(got_f, frames[k : k + 6].reshape(got_f.shape), err_msg=f"{name}@{k}")
                np.testing.assert_array_equal(got_t, times[k : k + 6], err_msg=f"{name}@{k}")
        # To the end, once per clip, so the tail after a resume is checked too.
        k = n // 2
        got_f, _ = steps(scanned.open(item, start=k))
        np.testing.assert_array_equal(got_f, frames[k:], err_msg=f"{name}@{k}..end")


def _take(it: Iterator[Any], n: int) -> Iterator[Any]:
    for _, step in zip(range(n), it, strict=False):
        yield step


@shared
@pytest.mark.slow
def test_seeking_is_only_trusted_where_times_tell_frames_apart(scanned: VideoSource) -> None:
    seekable = {rel(p) for p, s in scanned._scans.items() if s.seekable}
    assert seekable == set(EXPECTED) - BAD_TIMES


@shared
@pytest.mark.slow
def test_seek_is_verified_and_falls_back_to_decoding(
    scanned: VideoSource, reference: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from streamcli_sources import _read_opencv

    opened: list[str] = []
    real = _read_opencv.open_capture

    def counting(path: str, threads: int) -> Any:
        opened.append(Path(path).name)
        return real(path, threads)

    monkeypatch.setattr(_read_opencv, "open_capture", counting)
    items = {rel(i[0]): i for i in scanned.items()}
    # soundwave seeks straight to frame 3000 (one open); cityCC0's seek to frame 1 lands on frame 13, so the
    # check fails and the source reopens and decodes from the start (two opens). Both are exact.
    for name, k, opens in (("soundwave.mp4", 3000, 1), ("cityCC0.mpg", 1, 2), ("odd/alea.mpg", 100, 1)):
        opened.clear()
        got_f, _ = steps(_take(scanned.open(items[name], start=k), 3))
        assert len(opened) == opens, (name, opened)
        np.testing.assert_array_equal(got_f, reference[name][0][k : k + 3])


@shared
@pytest.mark.slow
def test_segments_stride_and_gray_cover_the_stream(reference: Any, cache: str) -> None:
    from streamcli import StreamLoader

    # The old spelling segment=500 is the loader's segment option now: whole files, cut by the loader.
    src = VideoSource(VIDEO / "soundwave.mp4", size=SMALL, segment=500, cache_dir=cache)
    (whole,) = src.items()
    assert src.length(whole) == 3544 and src.default_segment() == 500
    frames, times = reference["soundwave.mp4"]
    with StreamLoader(src, 8, 16, shuffle=False) as loader:
        assert loader.segment == 500
        starts, got = [], {}
        for batch in loader:
            valid, first, pos = batch.valid.numpy(), batch.is_first.numpy(), batch.position.numpy()
            starts += [int(p) for p in pos[first]]
            for t, b in zip(*np.nonzero(valid), strict=True):
                got[int(pos[t, b])] = (batch["frame"][t, b].numpy(), float(batch["time_ms"][t, b]))
    assert sorted(starts) == list(range(0, 3544, 500))  # 8 streams, each with its reset
    assert sorted(got) == list(range(3544))
    np.testing.assert_array_equal(np.stack([got[p][0] for p in range(3544)]), frames)
    np.testing.assert_array_equal(np.array([got[p][1] for p in range(3544)]), times)

    gray = VideoSource(VIDEO / "cityCC0.mpg", size=SMALL, gray=True, stride=3, scan=True, cache_dir=cache)
    (item,) = gray.items()
    assert gray.length(item) == 64  # ceil(190 / 3)
    assert gray.fields()[0].shape == (1, *SMALL)
    got_f, got_t = steps(gray.open(item))
    assert got_f.shape == (64, 1, *SMALL)
    np.testing.assert_array_equal(got_t, reference["cityCC0.mpg"][1][::3])
    resumed, _ = steps(gray.open(item, start=10))
    np.testing.assert_array_equal(resumed, got_f[10:])


def test_frames_are_rgb_chw_at_the_native_size_of_an_odd_clip() -> None:
    path = LOCAL / "odd" / "small_movie.mp4"  # 48x144
    src = VideoSource(path, size=(144, 48))
    (item,) = src.items()
    first = next(src.open(item))
    cap = cv2.VideoCapture(str(path))
    ok, bgr = cap.read()
    cap.release()
    assert ok and bgr.shape == (144, 48, 3)
    np.testing.assert_array_equal(first["frame"], bgr[:, :, ::-1].transpose(2, 0, 1))
    assert first["time_ms"].shape == () and first["time_ms"].dtype == np.float64
    assert src.length(item) is None  # unknown without a scan


def test_unopenable_files_are_skipped_or_strict_errors(tmp_path: Path) -> None:
    shutil.copy(LOCAL / "odd" / "sound_not_video.mp4", tmp_path)  # a WAV
    (tmp_path / "notes.mkv").write_text("not a video at all")
    shutil.copy(LOCAL / "odd" / "small_movie.mp4", tmp_path)
    src = VideoSource(tmp_path, size=SMALL)
    with pytest.warns(UserWarning) as record:
        items = src.items()
    assert sorted(str(w.message).split("/")[-1] for w in record) == [
        "notes.mkv: OpenCV cannot open it (not a video, or no video track)",
        "sound_not_video.mp4: OpenCV cannot open it (not a video, or no video track)",
    ]
    assert [Path(i[0]).name for i in items] == ["small_movie.mp4"]
    assert sorted(Path(p).name for p, _ in src.skipped) == ["notes.mkv", "sound_not_video.mp4"]
    with pytest.raises(SourceError, match=r"notes\.mkv.*strict=True"):
        VideoSource(tmp_path, strict=True).items()


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_truncated_files_end_early_and_never_hang(tmp_path: Path) -> None:
    for name in ("cityCC0_first1MB.mpg", "chessboard_mjpeg.avi", "realshort.mp4", "Shepard_Calais_1906_FrenchGP.ogv"):
        data = (LOCAL / name).read_bytes()
        (tmp_path / name).write_bytes(data[: len(data) * 2 // 5])
    src = VideoSource(tmp_path, size=SMALL, scan=True, cache_dir=str(tmp_path / "cache"))
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        items = src.items()
    for item in items:
        n = sum(1 for _ in src.open(item))
        assert n == src.length(item) and 0 < n < LOCAL_EXPECTED[Path(item[0]).name]
    assert len(items) + len(src.skipped) == 4


@pytest.mark.slow
def test_scan_cache_is_keyed_by_size_and_mtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clip = tmp_path / "clip.avi"
    shutil.copy(LOCAL / "dummy_video.avi", clip)
    monkeypatch.setenv("STREAMCLI_CACHE_DIR", str(tmp_path / "cache"))
    assert VideoSource(tmp_path, scan=True).scan() == {str(clip): 10}
    assert len(list((tmp_path / "cache").glob("*.json"))) == 1
    assert not list((tmp_path / "cache").glob(".tmp-*"))

    def no_decode(path: str, max_failed: int) -> Any:
        raise AssertionError("scanned again although the cache is fresh")

    monkeypatch.setattr(_scan, "scan_file", no_decode)
    assert VideoSource(tmp_path, scan=True).scan() == {str(clip): 10}
    os.utime(clip, ns=(0, 0))
    with pytest.raises(AssertionError, match="scanned again"):
        VideoSource(tmp_path, scan=True).scan()


def test_cache_dir_follows_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STREAMCLI_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", "/x")
    assert _scan.cache_dir() == Path("/x/streamcli")
    monkeypatch.setenv("STREAMCLI_CACHE_DIR", "/y")
    assert _scan.cache_dir() == Path("/y")
    assert _scan.cache_dir("/z") == Path("/z")


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"size": (0, 4)}, r"size=\(0, 4\) must be two positive ints"),
        ({"stride": 0}, "stride=0 must be at least 1"),
        ({"segment": -1}, "segment=-1 must be 0"),
        ({"interpolation": "cubic"}, "interpolation='cubic' must be one of linear, area, nearest"),
        ({"max_failed_reads": 0}, "max_failed_reads=0"),
    ],
)
def test_bad_options_name_the_value_and_the_fix(options: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        VideoSource(LOCAL, **options)


def test_missing_folder_and_glob(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="neither a folder nor a file"):
        VideoSource(tmp_path / "nope")
    src = VideoSource(LOCAL, glob="*.avi")
    assert [Path(p).name for p in src.files()] == ["chessboard_mjpeg.avi", "dummy_video.avi"]
    assert VideoSource.can_open(str(LOCAL)) and not VideoSource.can_open(str(tmp_path))


def test_setup_worker_pins_decoding_to_one_thread() -> None:
    src = VideoSource(LOCAL)
    before = cv2.getNumThreads()
    try:
        src.setup_worker()
        assert cv2.getNumThreads() == 1 and src.threads == 1
    finally:
        cv2.setNumThreads(before)
    assert VideoSource(LOCAL, threads=2).threads == 2


@shared
@pytest.mark.slow
def test_loader_with_workers_streams_every_segment_exactly(cache: str) -> None:
    from streamcli import StreamLoader

    src = VideoSource(VIDEO / "odd", size=(16, 16), gray=True, segment=50, cache_dir=cache)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        items = src.items()
    assert [src.length(i) for i in items] == [162, 24, 2, 11]  # alea, blue, sage, small; the loader cuts them
    expected = [steps(src.open(i))[0] for i in items]
    with StreamLoader(src, batch_size=3, time_steps=8, num_workers=2, seed=1) as loader:
        n = len(loader)
        got: dict[int, dict[int, np.ndarray]] = {}
        batches = 0
        for batch in loader:
            batches += 1
            frames, valid = batch["frame"].numpy(), batch.valid.numpy()
            for t, b in zip(*np.nonzero(valid), strict=True):
                got.setdefault(int(batch.stream[t, b]), {})[int(batch.position[t, b])] = frames[t, b]
    assert batches == n and loader.segment == 50
    assert sorted(got) == list(range(len(items)))
    for s, want in enumerate(expected):
        assert sorted(got[s]) == list(range(len(want)))
        np.testing.assert_array_equal(np.stack([got[s][p] for p in range(len(want))]), want)


def _write_clip(path: Path, fourcc: str, frames: int = 10) -> None:
    out = cv2.VideoWriter(str(path), cv2.CAP_FFMPEG, cv2.VideoWriter_fourcc(*fourcc), 25, (64, 48))
    assert out.isOpened(), f"this OpenCV cannot write {path.name} with {fourcc}"
    for i in range(frames):
        out.write(np.full((48, 64, 3), 20 * i, np.uint8))
    out.release()


def test_camcorder_dvd_and_broadcast_extensions_stream(tmp_path: Path) -> None:
    # Written here where this OpenCV can write the container; real clips copied under other names where it
    # cannot (FFmpeg sniffs the content, so a camcorder's .mod is an MPEG program stream like any .mpg).
    written = {"a.mts": "MPG2", "b.m2ts": "MPG2", "c.3gp": "mp4v", "d.vob": "MPG2", "e.mxf": "MPG2"}
    written |= {"f.asf": "WMV2", "g.m2v": "MPG2", "h.y4m": "I420", "i.nut": "FFV1", "j.mjpeg": "MJPG"}
    for name, fourcc in written.items():
        _write_clip(tmp_path / name, fourcc)
    copied = {"k.divx": "chessboard_mjpeg.avi", "l.f4v": "realshort.mp4", "m.ogm": "Shepard_Calais_1906_FrenchGP.ogv"}
    copied |= {"n.mod": "cityCC0_first1MB.mpg", "o.tod": "cityCC0_first1MB.mpg"}
    for name, real in copied.items():
        shutil.copy(LOCAL / real, tmp_path / name)
    (tmp_path / "notes.txt").write_text("not a video, and not a candidate")
    src = VideoSource(tmp_path, size=SMALL, scan=True, cache_dir=str(tmp_path / ".cache"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing may be skipped
        items = src.items()
    lengths = {Path(i[0]).name: src.length(i) for i in items}
    assert lengths == {name: 10 for name in written} | {n: LOCAL_EXPECTED[real] for n, real in copied.items()}
    frames, _ = steps(src.open(items[0]))
    assert frames.shape == (10, 3, *SMALL)
    assert VideoSource.can_open(str(tmp_path / "a.mts")) and not VideoSource.can_open(str(tmp_path / "notes.txt"))


def test_a_file_given_directly_is_used_whatever_its_extension(tmp_path: Path) -> None:
    clip = tmp_path / "take-01.footage"
    shutil.copy(LOCAL / "dummy_video.avi", clip)
    src = VideoSource(clip, size=SMALL, scan=True, cache_dir=str(tmp_path / "cache"))
    assert [src.length(i) for i in src.items()] == [10]
    assert not VideoSource.can_open(str(clip))  # inference stays by name; naming the plugin is the override


_NOISY_RUN = """
import sys, warnings
import cv2
from streamcli import StreamLoader
from streamcli_sources.video import VideoSource

if __name__ == "__main__":
    if sys.argv[2] == "prior-open":  # the user's own capture before ours: OpenCV has read its settings
        cv2.VideoCapture(sys.argv[3], cv2.CAP_FFMPEG).release()
    warnings.simplefilter("ignore")  # the per-file skip warnings are Python's, not native output
    for scan in (False, True):
        src = VideoSource(sys.argv[1], size=(8, 8), scan=scan, cache_dir=sys.argv[1] + "/.cache")
        for item in src.items():
            sum(1 for _ in src.open(item))
    with StreamLoader(src, batch_size=2, time_steps=16, num_workers=1) as loader:
        sum(1 for _ in loader)
    print("streamed", len(src.items()), "skipped", len(src.skipped))
"""


@shared
@pytest.mark.slow
@pytest.mark.parametrize("prior", ["", "prior-open"])
def test_native_messages_never_reach_stderr(tmp_path: Path, prior: str) -> None:
    import subprocess
    import sys

    for p in (VIDEO / "odd").iterdir():
        shutil.copy(p, tmp_path)
    data = (VIDEO / "cockatoo.mp4").read_bytes()
    (tmp_path / "truncated.mp4").write_bytes(data[: len(data) // 3])  # "moov atom not found"
    (tmp_path / "empty.mp4").write_bytes(b"")
    script = tmp_path / "run.py"
    script.write_text(_NOISY_RUN)
    args = [sys.executable, str(script), str(tmp_path), prior or "-", str(VIDEO / "bikes.mp4")]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENCV_", "STREAMCLI_NATIVE"))}
    quiet = subprocess.run(args, capture_output=True, text=True, timeout=100, env=env)
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stdout.strip() == "streamed 4 skipped 4"
    assert quiet.stderr == ""
    # The same run with the native logs asked for shows them: the check above can see them.
    env["STREAMCLI_NATIVE_LOG"] = "1"
    loud = subprocess.run(args, capture_output=True, text=True, timeout=100, env=env)
    assert "moov atom not found" in loud.stderr and "[ WARN:" in loud.stderr


def test_bad_input_is_a_value_error_naming_the_path_and_the_fix(tmp_path: Path) -> None:
    # What the user pointed at is wrong: ValueError (the CLI's usage error), never SourceError.
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("no video here")
    with pytest.raises(ValueError, match=r"no file with a video extension under '.*empty'.*glob="):
        VideoSource(empty).items()
    with pytest.raises(ValueError, match=r"no file matches glob='\*\.xyz' under"):
        VideoSource(LOCAL, glob="*.xyz").items()
    junk = tmp_path / "junk"
    junk.mkdir()
    shutil.copy(LOCAL / "odd" / "sound_not_video.mp4", junk)
    (junk / "notes.mkv").write_text("not a video at all")
    none = r"no usable video under .*: 2 files found, none decodes"
    with pytest.warns(UserWarning, match="skipping"), pytest.raises(ValueError, match=none):
        VideoSource(junk).items()
    (tmp_path / "zero.mp4").write_bytes(b"")
    with pytest.raises(ValueError, match=r"'.*zero\.mp4' is empty \(0 bytes\); give a video file"):
        VideoSource(tmp_path / "zero.mp4")
    (tmp_path / "notes.mp4").write_text("not a video at all")
    for path in (tmp_path / "notes.mp4", LOCAL / "odd" / "sound_not_video.mp4"):
        for strict in (False, True):
            with pytest.raises(ValueError, match=rf"'.*{path.name}' is not a video this OpenCV can decode"):
                VideoSource(path, strict=strict).items()


@pytest.mark.slow
def test_scan_progress_counts_cached_files_at_once(tmp_path: Path) -> None:
    for name in ("a.avi", "b.avi", "c.avi"):
        shutil.copy(LOCAL / "dummy_video.avi", tmp_path / name)
    cache = str(tmp_path / ".cache")
    calls: list[tuple[int, int]] = []
    src = VideoSource(tmp_path, scan=True, cache_dir=cache)
    assert src.scan(progress=lambda done, total: calls.append((done, total))) == {
        str(tmp_path / n): 10 for n in ("a.avi", "b.avi", "c.avi")
    }
    assert calls == [(0, 3), (1, 3), (2, 3), (3, 3)]
    calls.clear()
    os.utime(tmp_path / "b.avi", ns=(0, 0))  # b's cache entry is stale: a and c count at once
    VideoSource(tmp_path, scan=True, cache_dir=cache).scan(progress=lambda d, t: calls.append((d, t)))
    assert calls == [(2, 3), (3, 3)]
    calls.clear()
    again = VideoSource(tmp_path, scan=True, cache_dir=cache)
    again.scan(progress=lambda d, t: calls.append((d, t)))
    assert calls == [(3, 3)]
    # items() reuses that scan rather than reading the cache again.
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_scan, "load_scan", lambda folder, path: pytest.fail("scanned twice"))
        assert [again.length(i) for i in again.items()] == [10, 10, 10]


def test_a_failing_progress_callback_stops_the_scan(tmp_path: Path) -> None:
    for name in ("a.avi", "b.avi"):
        shutil.copy(LOCAL / "dummy_video.avi", tmp_path / name)

    def interrupt(done: int, total: int) -> None:
        if done:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        VideoSource(tmp_path, scan=True, cache_dir=str(tmp_path / ".cache")).scan(progress=interrupt)


_UNREADABLE_RUN = """
import sys, warnings
from streamcli_sources.video import VideoSource

folder, scan, cache = sys.argv[1], sys.argv[2] == "scan", sys.argv[3]
with warnings.catch_warnings(record=True) as record:
    warnings.simplefilter("always")
    items = VideoSource(folder, size=(8, 8), scan=scan, cache_dir=cache).items()
print([i[0].rsplit("/", 1)[-1] for i in items])
print(*(str(w.message).rsplit("/", 1)[-1] for w in record), sep="\\n")
try:
    VideoSource(folder + "/locked.avi").items()
except ValueError as exc:
    print(str(exc).rsplit("/", 1)[-1])
"""


@pytest.mark.slow
@pytest.mark.parametrize("scan", ["", "scan"])
def test_an_unreadable_video_is_called_unreadable_not_not_a_video(tmp_path: Path, scan: str) -> None:
    import subprocess
    import sys

    shutil.copy(LOCAL / "dummy_video.avi", tmp_path / "open.avi")
    shutil.copy(LOCAL / "dummy_video.avi", tmp_path / "locked.avi")
    (tmp_path / "locked.avi").chmod(0)
    # A real "permission denied": root reads any file, so as root the reader runs without the capabilities
    # that let it (util-linux's setpriv); as anyone else the file mode is enough.
    drop = ["setpriv", "--inh-caps=-dac_override,-dac_read_search", "--bounding-set=-dac_override,-dac_read_search"]
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        pytest.skip("runs as root and has no setpriv to drop the capability to read any file")
    prefix = drop if os.geteuid() == 0 else []
    args = [*prefix, sys.executable, "-c", _UNREADABLE_RUN, str(tmp_path), scan, str(tmp_path / ".cache")]
    r = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "['open.avi']",
        "locked.avi: cannot read it: permission denied",
        "locked.avi': cannot read it: permission denied; check its permissions, or give another file",
    ]
    (tmp_path / "locked.avi").chmod(0o644)  # fixed: a chmod keeps the mtime, so no cached verdict may stand
    src = VideoSource(tmp_path, size=(8, 8), scan=bool(scan), cache_dir=str(tmp_path / ".cache"))
    assert [Path(i[0]).name for i in src.items()] == ["locked.avi", "open.avi"]
