"""The video source's second decoder (``backend="pyav"``): the same frames as OpenCV where both open a clip,
exact resume by seeking, explicit threads, file-like objects, and clear errors for a bad or missing backend."""

from __future__ import annotations

import importlib.util
import io
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _dv import opencv_skips_dv
from _resume import check_resume
from conftest import data_root, require_shared
from typer.testing import CliRunner

pytest.importorskip("av", reason="the pyav extra is not installed: pip install 'streamcli[pyav]'")

from streamcli_sources import _decode_pyav
from streamcli_sources._decode_pyav import PyAVVideo, open_video
from streamcli_sources.video import VideoSource

from streamcli.cli import app

LOCAL = data_root("video")
SMALL = (24, 32)
# OpenCV 5.0's FFmpeg 8.0 refuses to convert interlaced NTSC DV (yuv411p) to BGR and the video
# source skips the clip (tests/data/README.md); PyAV's conversion (the older sws_scale call) converts it, the same
# bytes every time. So there it is the one clip only PyAV opens; where OpenCV converts it too (OpenCV 5.1),
# both read it and are compared like the others (tests/_dv.py).
ONLY_PYAV = {"tests/data": opencv_skips_dv(), "shared": set[str]()}
# With the versions in constraints.txt the two give the same pixels on every clip but the Theora ones (a mean
# difference under 1); another FFmpeg build may convert colours a little differently, so the tests allow that much.
PIXEL_SLACK = 2.0


def _folder(where: str) -> Path:
    return LOCAL if where == "tests/data" else require_shared("video")


def _read_all(src: VideoSource, root: Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    out = {}
    for item in src.items():
        steps = list(src.open(item))
        frames = np.stack([s["frame"] for s in steps])
        out[Path(item[0]).relative_to(root).as_posix()] = (frames, np.array([float(s["time_ms"]) for s in steps]))
    return out


@pytest.fixture(scope="module")
def cache(video_scans: str) -> str:
    """The scans of the real clips: the run's one cache (tests/_scans.py), which other files' scans fill too."""
    return video_scans


@pytest.mark.slow
@pytest.mark.parametrize("where", ["tests/data", "shared"])
def test_pyav_and_opencv_count_the_same_frames_on_every_clip_both_open(where: str, cache: str) -> None:
    root = _folder(where)
    counts, reads = {}, {}
    for backend in ("opencv", "pyav"):
        # One cache folder for both: each backend must still get its own scans.
        src = VideoSource(root, size=SMALL, scan=True, cache_dir=cache, backend=backend)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the skipped files are compared below
            counts[backend] = {Path(i[0]).relative_to(root).as_posix(): src.length(i) for i in src.items()}
        reads[backend] = _read_all(src, root)
    opencv, pyav = counts["opencv"], counts["pyav"]
    assert set(pyav) - set(opencv) == ONLY_PYAV[where] and not set(opencv) - set(pyav)
    both = set(opencv) & set(pyav)
    assert len(both) >= 6
    assert {n: pyav[n] for n in both} == {n: opencv[n] for n in both}
    for name in sorted(both):  # a full read gives as many steps as the scan counted, in OpenCV's layout
        (f_cv, t_cv), (f_av, t_av) = reads["opencv"][name], reads["pyav"][name]
        assert f_av.shape == f_cv.shape == (opencv[name], 3, *SMALL) and f_av.dtype == np.uint8, name
        np.testing.assert_allclose(t_av, t_cv, rtol=0, atol=1e-6, err_msg=name)
        diff = np.abs(f_av.astype(int) - f_cv.astype(int)).mean()
        swapped = np.abs(f_av[:, ::-1].astype(int) - f_cv.astype(int)).mean()
        assert diff < PIXEL_SLACK, f"{name}: PyAV's frames differ from OpenCV's by {diff:.2f} on average"
        assert diff <= swapped, f"{name}: colour order"


def test_the_colour_order_is_rgb_like_opencv_and_gray_is_one_channel() -> None:
    clip = LOCAL / "realshort.mp4"
    read = {
        (backend, gray): np.stack(
            [s["frame"] for s in VideoSource(clip, size=SMALL, gray=gray, backend=backend).open((str(clip), 0, 5))]
        )
        for backend in ("opencv", "pyav")
        for gray in (False, True)
    }
    for gray in (False, True):
        got, want = read["pyav", gray], read["opencv", gray]
        assert got.shape == want.shape == (5, 1 if gray else 3, *SMALL) and got.dtype == np.uint8
        assert np.abs(got.astype(int) - want.astype(int)).mean() < PIXEL_SLACK
    rgb, cv = read["pyav", False].astype(int), read["opencv", False].astype(int)
    assert np.abs(rgb[:, ::-1] - cv).mean() > 5 * PIXEL_SLACK  # R and B differ here: BGR would be far off


def _take(it: Iterator[Any], n: int) -> list[Any]:
    return [s for _, s in zip(range(n), it, strict=False)]


@pytest.mark.slow
@pytest.mark.parametrize("where", ["tests/data", "shared"])
def test_resume_from_any_position_is_exact_with_pyav(where: str, cache: str) -> None:
    root = _folder(where)
    scanned = VideoSource(root, size=SMALL, scan=True, cache_dir=cache, backend="pyav")
    plain = VideoSource(root, size=SMALL, cache_dir=cache, backend="pyav")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reference = _read_all(scanned, root)
        plain_items = {Path(i[0]).relative_to(root).as_posix(): i for i in plain.items()}
    for item in scanned.items():
        name = Path(item[0]).relative_to(root).as_posix()
        frames, times = reference[name]
        n = len(frames)
        for k in sorted({1, 2, n // 3, n // 2, n - 2, n - 1, n}):
            for src, it in ((scanned, item), (plain, plain_items[name]))[: 2 if k <= n // 3 else 1]:
                got = _take(src.open(it, start=k), 6)
                assert len(got) == len(frames[k : k + 6]), f"{name}@{k}"
                if got:
                    np.testing.assert_array_equal(np.stack([s["frame"] for s in got]), frames[k : k + 6], f"{name}@{k}")
                    np.testing.assert_array_equal([float(s["time_ms"]) for s in got], times[k : k + 6], f"{name}@{k}")


# Clips with keyframes after the start (dummy_video.avi has only one, at frame 0). In cockatoo.mp4 (shared), every
# frame after a seek differs from a full decode's unless the decoder has seen the first frame (x264's version).
@pytest.mark.parametrize(
    "clip",
    [
        "realshort.mp4",
        "Shepard_Calais_1906_FrenchGP.ogv",
        "chessboard_mjpeg.avi",
        pytest.param("shared:cockatoo.mp4", marks=pytest.mark.slow),
    ],
)
def test_a_resume_seeks_by_timestamp_instead_of_decoding_from_the_start(
    clip: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = require_shared("video") / clip.removeprefix("shared:") if clip.startswith("shared:") else LOCAL / clip
    src = VideoSource(path, size=SMALL, scan=True, cache_dir=str(tmp_path), backend="pyav")
    (item,) = src.items()
    full = np.stack([s["frame"] for s in src.open(item)])
    decoded: list[int] = []
    real = PyAVVideo.frames

    def counting(self: PyAVVideo) -> Iterator[Any]:
        for frame in real(self):
            decoded.append(1)
            yield frame

    monkeypatch.setattr(PyAVVideo, "frames", counting)
    k = len(full) - 2
    got = np.stack([s["frame"] for s in src.open(item, start=k)])
    np.testing.assert_array_equal(got, full[k:])
    assert len(decoded) < k, f"{len(decoded)} frames decoded to resume at frame {k}: the seek fell back"


def test_a_seek_that_lands_on_other_pixels_falls_back_to_decoding_from_the_start(tmp_path: Path) -> None:
    path = LOCAL / "realshort.mp4"
    scan = _decode_pyav.scan_file(str(path), 5)
    assert scan.seekable and scan.frames == 36
    tampered = type(scan)(scan.pos_ms, scan.adler + np.uint32(1), scan.opened, scan.cut)
    with PyAVVideo(path) as video:
        first, _ = next(iter(video.seek(20, tampered)))
    assert first == 0
    with PyAVVideo(path) as video:
        index, frame = next(iter(video.seek(20, scan)))
        assert index == 20 and video.ms(frame) == scan.pos_ms[20]


def test_a_file_like_object_decodes_the_same_frames_as_its_path() -> None:
    path = LOCAL / "dummy_video.avi"
    with PyAVVideo(path) as video:
        want = [video.ms(f) for f in video.frames()]
    with open(path, "rb") as f, PyAVVideo(f) as video:
        assert [video.ms(fr) for fr in video.frames()] == want
    scan = _decode_pyav.scan_file(str(path), 5)
    with PyAVVideo(io.BytesIO(path.read_bytes())) as video:
        frames = list(video.seek(7, scan))
    assert [i for i, _ in frames] == [7, 8, 9]
    assert open_video(io.BytesIO(b"not a video at all" * 100)) is None


def test_the_decoder_threads_are_set_explicitly_one_by_default() -> None:
    path = LOCAL / "realshort.mp4"
    with PyAVVideo(path) as video:
        assert video.stream.codec_context.thread_count == 1
    with PyAVVideo(path, threads=3) as video:
        assert video.stream.codec_context.thread_count == 3
    assert VideoSource(path, backend="pyav").threads == 1


def test_an_unknown_backend_is_a_value_error_naming_it_and_the_choices() -> None:
    with pytest.raises(ValueError, match=r"backend='gstreamer' must be one of opencv, pyav \(opencv is the default\)"):
        VideoSource(LOCAL, backend="gstreamer")


def test_pyav_without_the_av_package_names_the_extra_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "av" else real(name, *a))
    with pytest.raises(
        ImportError, match=r"backend='pyav' needs PyAV \(the av package\): pip install 'streamcli\[pyav\]'"
    ):
        VideoSource(LOCAL, backend="pyav")
    result = CliRunner().invoke(app, ["preview", "video", str(LOCAL), "-s", "backend=pyav", "-b", "1", "-w", "0"])
    assert result.exit_code == 2, result.output
    assert "-s backend='pyav' needs PyAV (the av package): pip install 'streamcli[pyav]'" in result.output


def test_the_cli_takes_the_backend_as_an_option_and_refuses_an_unknown_one() -> None:
    runner = CliRunner()
    clip = str(LOCAL / "dummy_video.avi")
    tiny = ["-b", "1", "-t", "2", "-w", "0", "--batches", "1"]
    bad = runner.invoke(app, ["preview", "video", clip, "-s", "backend=nope", *tiny])
    assert bad.exit_code == 2, bad.output
    assert "-s backend='nope' must be one of opencv, pyav" in bad.output
    good = runner.invoke(app, ["bench", "video", clip, "-s", "backend=pyav", "-s", "size=16x16", *tiny])
    assert good.exit_code == 0, good.output


@pytest.mark.slow
def test_a_loader_resumes_exactly_with_pyav(tmp_path: Path) -> None:
    cache = str(tmp_path / "cache")

    def make() -> VideoSource:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            src = VideoSource(LOCAL, size=(16, 16), scan=True, segment=12, cache_dir=cache, backend="pyav")
            src.items()
        return src

    check_resume(make, 4, 4, cuts=[1, 5, 13])
    check_resume(make, 4, 4, cuts=[7], workers_before=0, workers_after=2)


@pytest.mark.slow
def test_the_backend_bench_runs_on_a_folder_and_reports_both_backends(capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks import bench_video_backends

    bench_video_backends.main(["--folder", str(LOCAL), "--repeats", "1"])
    out = capsys.readouterr().out
    clips = 7 - len(opencv_skips_dv())  # where the DV clip is PyAV's alone (tests/_dv.py), it is left out
    assert f"# Video backends: {clips} clips" in out
    for row in ("decode to BGR, frames/s", "VideoSource.open 128x128, frames/s", "seek to first frame"):
        assert f"| {row}" in out
    assert "| realshort.mp4 | 36 |" in out
