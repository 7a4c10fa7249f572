"""A clip cut short (a download that stopped, a copy that ran out of disk) decodes up to the damage and then ends.

Both decoders then warn, naming the file and the frame where the decode stopped, when that is well before the
frame count the container declares; whole files, including the odd ones whose headers are off by a frame or
say nothing usable, give no such warning. The clips are real files from the shared set, cut with ``head -c``.
"""

from __future__ import annotations

import importlib.util
import warnings
from pathlib import Path

import pytest
from conftest import require_shared
from streamcli_sources.video import VideoSource

pytestmark = pytest.mark.slow  # decodes real files

NO_PYAV = importlib.util.find_spec("av") is None
BACKENDS = ["opencv", pytest.param("pyav", marks=pytest.mark.skipif(NO_PYAV, reason="needs PyAV (streamcli[pyav])"))]


def _cut(src: Path, dst: Path, fraction: float = 0.5) -> Path:
    """``head -c`` of ``src``: its first ``fraction`` of the bytes."""
    data = src.read_bytes()
    dst.write_bytes(data[: int(len(data) * fraction)])
    return dst


def _read_all(path: Path, backend: str, cache: Path, *, scan: bool) -> tuple[int, list[str]]:
    """Every step of every item, in-process; the number of steps and the warnings' messages."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        source = VideoSource(str(path), size=(16, 16), scan=scan, backend=backend, cache_dir=str(cache))
        steps = sum(1 for item in source.items() for _ in source.open(item))
    return steps, [str(w.message) for w in caught]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("scan", [False, True])
def test_a_truncated_clip_ends_at_the_damage_with_a_warning_naming_the_file_and_frame(
    tmp_path: Path, backend: str, scan: bool
) -> None:
    # An AVI's header declares its frame count (25); the first half of the bytes holds 13 whole frames.
    clip = _cut(require_shared("video") / "retroMars2018.avi", tmp_path / "retro-half.avi")
    steps, messages = _read_all(clip, backend, tmp_path / "cache", scan=scan)
    assert steps == 13
    short = [m for m in messages if "retro-half.avi" in m and "stopped at frame 13 of the 25" in m]
    assert short, messages


@pytest.mark.parametrize("backend", BACKENDS)
def test_whole_clips_with_odd_headers_give_no_truncation_warning(tmp_path: Path, backend: str) -> None:
    video = require_shared("video")
    # small_movie declares 12 frames and decodes 11; blue.mpg declares a negative count; alea.mpg declares 0.
    for clip in (video / "retroMars2018.avi", video / "odd" / "small_movie.mp4", video / "odd" / "blue.mpg",
                 video / "odd" / "alea.mpg", video / "odd" / "sage_example.webm"):  # fmt: skip
        steps, messages = _read_all(clip, backend, tmp_path / "cache", scan=False)
        assert steps > 0
        assert not [m for m in messages if "stopped at frame" in m], (clip.name, messages)
