"""The audio source over real recordings: tests/data/audio, and ../shared/data/audio where present (48 kHz and 8 kHz
on purpose)."""

from __future__ import annotations

import wave
from pathlib import Path

import numpy as np
import pytest
from conftest import data_root, needs_shared, shared_data
from streamcli_sources.audio import AudioSource

from streamcli import load_source
from streamcli.errors import SourceError
from streamcli.source import iter_steps

AUDIO = shared_data("audio") or Path("no-shared-data")  # the tests that read it are marked `shared`
shared = needs_shared("audio")
# Sample frames per file, from the data chunks (wave's getnframes, checked against each file's size).
FRAMES_48K = {
    "Front_Center.wav": 68545,
    "Front_Left.wav": 71042,
    "Front_Right.wav": 73473,
    "Noise.wav": 67579,
    "Rear_Center.wav": 65026,
    "Rear_Left.wav": 63010,
    "Rear_Right.wav": 73218,
    "Side_Left.wav": 67412,
    "Side_Right.wav": 64961,
}
FRAMES_8K = {
    "activated.wav": 8512,
    "added.wav": 5785,
    "all-circuits-busy-now.wav": 14411,
    "auth-thankyou.wav": 7679,
    "beep.wav": 3404,
    "conf-onlyperson.wav": 25276,
    "vm-goodbye.wav": 6920,
    "vm-password.wav": 8675,
}


@shared
def test_every_8k_file_streams_in_20ms_frames_with_exact_lengths() -> None:
    src = AudioSource(AUDIO / "speech_8k")
    assert [Path(i).name for i in src.items()] == sorted(FRAMES_8K)
    assert [(f.name, f.shape, f.np_dtype.name) for f in src.fields()] == [
        ("pcm", (160, 1), "int16"),
        ("nsamples", (), "int32"),
    ]
    for item in src.items():
        name = Path(item).name
        steps = list(iter_steps(src, item))
        assert len(steps) == src.length(item) == -(-FRAMES_8K[name] // 160)
        assert sum(int(s["nsamples"]) for s in steps) == FRAMES_8K[name]
        with wave.open(item) as w:
            raw = np.frombuffer(w.readframes(w.getnframes()), "<i2")
        got = np.concatenate([s["pcm"][: int(s["nsamples"]), 0] for s in steps])
        np.testing.assert_array_equal(got, raw)
        assert steps[-1]["pcm"][int(steps[-1]["nsamples"]) :].max(initial=0) == 0


@shared
def test_48k_files_and_resume_is_exact() -> None:
    src = AudioSource(AUDIO, glob="*.wav", mismatch="skip", frame_ms=10)
    with pytest.warns(UserWarning, match="8000 Hz, 1 channel, not 48000 Hz, 1 channel like the first file"):
        items = src.items()
    assert {Path(i).name: src.length(i) for i in items} == {k: -(-v // 480) for k, v in FRAMES_48K.items()}
    assert len(src.skipped) == len(FRAMES_8K)
    item = items[0]
    full = list(iter_steps(src, item))
    for k in (1, 70, len(full) - 1, len(full)):
        resumed = list(iter_steps(src, item, start=k))
        assert len(resumed) == len(full) - k
        for a, b in zip(resumed, full[k:], strict=True):
            np.testing.assert_array_equal(a["pcm"], b["pcm"])


@shared
def test_mixed_rates_are_rejected_with_the_fix_in_the_message() -> None:
    with pytest.raises(ValueError, match=r"speech_8k/activated\.wav: it is 8000 Hz.*not resampled.*mismatch='skip'"):
        AudioSource(AUDIO).items()
    # rate= picks which files to keep.
    src = AudioSource(AUDIO, rate=8000, mismatch="skip")
    with pytest.warns(UserWarning, match="not 8000 Hz"):
        assert sorted(Path(i).name for i in src.items()) == sorted(FRAMES_8K)
    assert src.fields()[0].shape == (160, 1)


def test_other_widths_stereo_truncation_and_unreadable_files(tmp_path: Path) -> None:
    tone = (np.arange(1000) * 37 % 2000 - 1000).astype(np.int16)
    for width, data in (
        (1, ((tone >> 8) + 128).astype(np.uint8).tobytes()),
        (3, np.stack([np.zeros_like(tone, np.uint8), *tone.view(np.uint8).reshape(-1, 2).T], 1).tobytes()),
    ):
        with wave.open(str(tmp_path / f"w{width}.wav"), "wb") as w:
            w.setnchannels(2)
            w.setsampwidth(width)
            w.setframerate(1000)
            w.writeframes(data)
    (tmp_path / "junk.wav").write_bytes(b"RIFF....not a wave file")
    full = (tmp_path / "w3.wav").read_bytes()
    (tmp_path / "x_truncated.wav").write_bytes(full[: len(full) - 600])  # header still says 500 frames
    src = AudioSource(tmp_path, frame_ms=100)
    with pytest.warns(UserWarning, match=r"junk\.wav: not a PCM WAV"):
        items = src.items()
    assert [Path(i).name for i in items] == ["w1.wav", "w3.wav", "x_truncated.wav"]
    assert src.fields()[0].shape == (100, 2)
    pcm3 = np.concatenate([s["pcm"] for s in iter_steps(src, items[1])]).reshape(-1)
    np.testing.assert_array_equal(pcm3, tone)
    pcm1 = np.concatenate([s["pcm"] for s in iter_steps(src, items[0])]).reshape(-1)
    np.testing.assert_array_equal(pcm1, (tone >> 8) << 8)
    assert src.length(items[2]) == 4 and sum(int(s["nsamples"]) for s in iter_steps(src, items[2])) == 400
    with pytest.raises(SourceError, match=r"junk\.wav.*strict=True"):
        AudioSource(tmp_path, strict=True).items()


def test_the_shipped_wavs_stream_the_one_pcm_file_and_skip_the_rest() -> None:
    # scipy's test files: 8-bit unsigned stereo PCM is read; float, RIFX and WAVE_FORMAT_EXTENSIBLE are not.
    src = AudioSource(data_root("audio"), frame_ms=20)
    with pytest.warns(UserWarning, match="skipping") as record:
        (item,) = src.items()
    assert len(record) == 3 and len(src.skipped) == 3
    assert Path(item).name == "test-8000Hz-le-2ch-1byteu.wav" and src.fields()[0].shape == (160, 2)
    with wave.open(item) as w:
        raw = np.frombuffer(w.readframes(w.getnframes()), np.uint8).reshape(-1, 2)
    steps = list(iter_steps(src, item))
    assert len(steps) == src.length(item) == 5 and sum(int(s["nsamples"]) for s in steps) == 800
    got = np.concatenate([s["pcm"] for s in steps])
    np.testing.assert_array_equal(got, (raw.astype(np.int16) - 128) << 8)


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"frame_ms": 0}, "frame_ms=0 must be a positive duration"),
        ({"mismatch": "resample"}, "mismatch='resample' must be 'error' or 'skip'"),
        ({"rate": -1}, "rate=-1"),
    ],
)
def test_bad_options(options: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        AudioSource(data_root("audio"), **options)  # type: ignore[arg-type]


@shared
def test_listed_and_loaded_through_discovery() -> None:
    src = load_source("audio", str(AUDIO / "speech_8k"))
    assert len(src.items()) == 8 and AudioSource.can_open(str(AUDIO))


def test_bad_input_is_a_value_error_naming_the_path_and_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"no file matches an audio suffix \(\.wav, \.flac, .*\) under '.*'"):
        AudioSource(tmp_path).items()
    with pytest.raises(ValueError, match=r"no file matches glob='\*\.wav' under '.*'; point at a folder"):
        AudioSource(tmp_path, glob="*.wav").items()
    (tmp_path / "zero.wav").write_bytes(b"")
    with pytest.raises(ValueError, match=r"'.*zero\.wav' is empty \(0 bytes\); give an audio file"):
        AudioSource(tmp_path / "zero.wav")
    (tmp_path / "junk.wav").write_bytes(b"RIFF....not a wave file")
    for strict in (False, True):
        with pytest.raises(ValueError, match=r"'.*junk\.wav' is not a PCM WAV file.*pcm_s16le"):
            AudioSource(tmp_path / "junk.wav", strict=strict).items()
    with pytest.warns(UserWarning, match="skipping"), pytest.raises(ValueError, match=r"no usable audio file under"):
        AudioSource(tmp_path).items()
