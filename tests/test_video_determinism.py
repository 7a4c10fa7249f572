"""The video source gives the same bytes on every run: one decoder thread, and never a frame FFmpeg failed to
convert (its pixels are memory the converter never wrote), on a host whose FFmpeg converts the interlaced DV
clip and on one whose FFmpeg does not (tests/_dv.py)."""

from __future__ import annotations

import hashlib
import shutil
import sys
import warnings
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
from _dv import DV, DV_FRAMES, opencv_converts_dv
from _invariants import collect
from conftest import data_root, require_shared
from streamcli_sources import _decode, _read_opencv, _scan
from streamcli_sources.video import VideoSource

from streamcli import StreamLoader

LOCAL = data_root("video")
SMALL = (24, 32)


def _frames_pyav(path: Path) -> list[np.ndarray]:
    from streamcli_sources._decode_pyav import open_video

    video = open_video(str(path))
    assert video is not None
    with video:
        return [f for f in map(video.bgr, video.frames()) if f is not None]


@pytest.mark.slow
def test_the_dv_clip_is_refused_where_ffmpeg_fails_to_convert_it_and_else_read_as_its_real_pixels() -> None:
    """With OpenCV 5.0's FFmpeg the converter logs an error for every frame and ``retrieve`` says no; OpenCV 5.1's
    converts them (tests/_dv.py). Either way what is delivered is real: three distinct frames, each within a few levels
    of PyAV's decode of the same frame (its own FFmpeg), the same bytes on every read."""
    pytest.importorskip("av", reason="the pyav extra is not installed: pip install 'streamcli[pyav]'")
    cap = cv2.VideoCapture(str(DV), cv2.CAP_FFMPEG)
    assert cap.grab() and cap.retrieve()[0]  # OpenCV reports success on every host
    cap.release()
    good = _decode.open_capture(str(LOCAL / "realshort.mp4"), 1)
    assert good.grab() and _decode.retrieve(good) is not None
    good.release()
    if not opencv_converts_dv():
        cap = _decode.open_capture(str(DV), 1)
        assert cap.grab() and _decode.retrieve(cap) is None
        cap.release()
        return
    reads = []
    for _ in range(2):
        cap = _decode.open_capture(str(DV), 1)
        frames = []
        while cap.grab():
            frames.append(_decode.retrieve(cap))
        cap.release()
        reads.append(frames)
    assert len(reads[0]) == DV_FRAMES and all(f is not None for f in reads[0])
    assert all(np.array_equal(x, y) for x, y in zip(reads[0], reads[1], strict=True))
    ours = [np.asarray(f, np.int16) for f in reads[0]]
    theirs = [f.astype(np.int16) for f in _frames_pyav(DV)]
    assert len(theirs) == DV_FRAMES
    for i, frame in enumerate(ours):
        assert not np.array_equal(frame, ours[(i + 1) % DV_FRAMES])  # not one buffer handed out three times
        off = [float(np.abs(frame - t).mean()) for t in theirs]
        assert off[i] < 1.0 and off[i] == min(off), off  # PyAV's frame i, not another


def _copy_dv_and_a_clip(tmp_path: Path) -> Path:
    shutil.copy(DV, tmp_path)
    shutil.copy(LOCAL / "dummy_video.avi", tmp_path)
    return tmp_path


@pytest.mark.parametrize("scan", [False, True])
def test_a_clip_whose_frames_never_convert_is_skipped_with_a_warning_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scan: bool
) -> None:
    # As with OpenCV 5.0, on any OpenCV: the DV clip's frames (720 wide, the only ones here) fail to convert.
    real = _decode.retrieve

    def no_dv(cap: Any) -> Any:
        return None if cap.get(cv2.CAP_PROP_FRAME_WIDTH) == 720 else real(cap)

    monkeypatch.setattr(_read_opencv, "retrieve", no_dv)
    monkeypatch.setattr(_scan, "retrieve", no_dv)
    folder = _copy_dv_and_a_clip(tmp_path)
    src = VideoSource(folder, size=SMALL, scan=scan, cache_dir=str(tmp_path / ".cache"))
    why = r"realshort_ntsc\.dv: FFmpeg decodes its frames but cannot convert them to RGB"
    with pytest.warns(UserWarning, match="skipping .*" + why):
        items = src.items()
    assert [Path(i[0]).name for i in items] == ["dummy_video.avi"]
    with pytest.raises(ValueError, match=r"realshort_ntsc\.dv' is not a video this OpenCV can decode: FFmpeg decodes"):
        VideoSource(DV).items()


def _one_buffer_for_dv(cap: Any) -> Any:
    """``retrieve`` as on a host whose converter fails silently: the DV clip's frames (the only ones 720 wide here)
    are one buffer, the same bytes each time, whatever this host's FFmpeg makes of them; other clips as they are."""
    if cap.get(cv2.CAP_PROP_FRAME_WIDTH) == 720:
        return np.full((480, 720, 3), 205, np.uint8)
    return _decode.retrieve(cap)


@pytest.mark.slow
@pytest.mark.parametrize("scan", [False, True])
def test_the_same_bytes_three_times_where_pyav_decodes_three_frames_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scan: bool
) -> None:
    """What OpenCV 5.0 does with the clip (one buffer three times), were the converter's error not seen in the
    log. PyAV decodes three different frames, so the buffer was never written: the clip is skipped, named."""
    pytest.importorskip("av", reason="the pyav extra is not installed: pip install 'streamcli[pyav]'")
    monkeypatch.setattr(_read_opencv, "retrieve", _one_buffer_for_dv)
    monkeypatch.setattr(_scan, "retrieve", _one_buffer_for_dv)
    folder = _copy_dv_and_a_clip(tmp_path)
    src = VideoSource(folder, size=SMALL, scan=scan, cache_dir=str(tmp_path / ".cache"))
    with pytest.warns(UserWarning, match=r"skipping .*realshort_ntsc\.dv: OpenCV gives the same bytes"):
        items = src.items()
    assert [Path(i[0]).name for i in items] == ["dummy_video.avi"]
    with pytest.raises(ValueError, match=r"realshort_ntsc\.dv' is not a video .*a buffer FFmpeg's converter never"):
        VideoSource(DV).items()


@pytest.mark.slow
def test_a_clip_whose_frames_really_repeat_is_kept_and_without_pyav_identical_frames_are_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """small_movie.mp4 repeats 9 of its 10 frames byte for byte, and PyAV agrees: real frames, delivered. Without
    PyAV nothing says repeated frames are not real, so they are delivered too."""
    pytest.importorskip("av", reason="the pyav extra is not installed: pip install 'streamcli[pyav]'")
    clip = LOCAL / "odd" / "small_movie.mp4"
    frames = [s["frame"] for s in VideoSource(clip, size=SMALL).open((str(clip), 0, -1))]
    assert len(frames) == 11 and np.array_equal(frames[0], frames[1])
    assert [Path(i[0]).name for i in VideoSource(clip, size=SMALL).items()] == ["small_movie.mp4"]
    monkeypatch.setitem(sys.modules, "streamcli_sources._decode_pyav", None)  # import fails: PyAV absent
    monkeypatch.setattr(_read_opencv, "retrieve", _one_buffer_for_dv)
    assert [Path(i[0]).name for i in VideoSource(DV, size=SMALL).items()] == ["realshort_ntsc.dv"]


def test_a_stream_ends_with_a_warning_at_its_first_frame_that_does_not_convert(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The failure signal is real on the DV clip above; here frame 6 of a 10-frame clip is made to fail, to pin
    # what the scan, a full read and a resume do with a clip that converts only up to some frame.
    clip = tmp_path / "clip.avi"
    shutil.copy(LOCAL / "dummy_video.avi", clip)

    def fails_from_frame_6(cap: Any) -> Any:
        return None if cap.get(cv2.CAP_PROP_POS_FRAMES) > 6 else real(cap)

    real = _decode.retrieve
    monkeypatch.setattr(_read_opencv, "retrieve", fails_from_frame_6)
    monkeypatch.setattr(_scan, "retrieve", fails_from_frame_6)
    cut = r"clip\.avi: ends at frame 6, which FFmpeg decodes but cannot convert"
    scanned = VideoSource(clip, size=SMALL, scan=True, cache_dir=str(tmp_path / ".cache"))
    with pytest.warns(UserWarning, match=cut):
        (item,) = scanned.items()
    assert scanned.length(item) == 6
    plain = VideoSource(clip, size=SMALL)
    (plain_item,) = plain.items()
    with pytest.warns(UserWarning, match=cut):
        full = [s["frame"] for s in plain.open(plain_item)]
    assert len(full) == 6
    with pytest.warns(UserWarning, match=cut):
        resumed = [s["frame"] for s in plain.open(plain_item, start=3)]
    np.testing.assert_array_equal(np.stack(resumed), np.stack(full[3:]))
    np.testing.assert_array_equal(np.stack([s["frame"] for s in scanned.open(item)]), np.stack(full))


def test_decoding_uses_one_thread_unless_asked_in_process_too() -> None:
    src = VideoSource(LOCAL)
    assert src.threads == 1  # before any worker's setup: the main process decodes with one thread too
    cap = _decode.open_capture(str(LOCAL / "realshort.mp4"), src.threads)
    assert cap.get(cv2.CAP_PROP_N_THREADS) == 1  # this OpenCV honours the open parameter
    cap.release()
    auto = _decode.open_capture(str(LOCAL / "realshort.mp4"), 0)
    assert auto.get(cv2.CAP_PROP_N_THREADS) >= 1
    auto.release()
    with pytest.raises(ValueError, match=r"threads=-1 must be a number of decoder threads \(1: reproducible\)"):
        VideoSource(LOCAL, threads=-1)


def _digest(folder: Path, workers: int, cache: str, backend: str) -> tuple[list[str], str, list[str]]:
    """Every clip's name, a hash of one epoch of batches (B=4, T=16), and the clips skipped."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the skip and cut warnings are checked above
        src = VideoSource(folder, size=(16, 16), scan=True, cache_dir=cache, backend=backend)
        names = [Path(i[0]).name for i in src.items()]
        h = hashlib.sha256()
        with StreamLoader(src, batch_size=4, time_steps=16, num_workers=workers, seed=3) as loader:
            for batch in collect(loader):
                for key in sorted(batch):
                    h.update(key.encode())
                    h.update(np.ascontiguousarray(batch[key]).tobytes())
    return names, h.hexdigest(), sorted(Path(p).name for p, _ in src.skipped)


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("backend", ["opencv", "pyav"])
@pytest.mark.parametrize("where", ["tests/data", "shared"])
def test_a_run_in_process_and_one_with_two_workers_give_identical_batches(
    where: str, backend: str, video_scans: str
) -> None:
    """The workers' decoders and the main process's agree frame for frame on every clip. Both runs take the
    lengths from the run's scan cache (a scan decodes every frame too; test_video.py checks what it finds, and
    whichever test scans a clip first fills the cache: tests/_scans.py)."""
    if backend == "pyav":
        pytest.importorskip("av", reason="the pyav extra is not installed: pip install 'streamcli[pyav]'")
    folder = LOCAL if where == "tests/data" else require_shared("video")
    runs = [_digest(folder, w, video_scans, backend) for w in (0, 2)]
    assert runs[0][0], "no clip delivered"
    assert runs[1] == runs[0], "the run with 2 workers differs from the in-process one"
    if where == "tests/data":  # PyAV converts the DV clip's frames, the same bytes every run (test_video_pyav.py)
        dv = ["realshort_ntsc.dv"] if backend == "opencv" and not opencv_converts_dv() else []
        assert runs[0][2] == [*dv, "sound_not_video.mp4"]
