"""The audio source over FLAC, MP3 and Opus, made here with PyAV from the shared WAV recordings (issue 48 section 4).

FLAC is lossless: a FLAC file must give exactly the steps of the WAV it was made from (8-, 16- and 24-bit, mono and
stereo). MP3 and Opus are lossy: they must give the same samples on every read and worker count, and resume exactly.
"""

from __future__ import annotations

import shutil
import sys
import wave
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _invariants import collect
from _resume import check_resume
from conftest import data_root, require_shared
from streamcli_sources.audio import AudioSource

from streamcli import StreamLoader

av = pytest.importorskip("av", reason="the pyav extra is not installed: pip install 'streamcli[pyav]'")

EIGHT_BIT_STEREO = data_root("audio") / "test-8000Hz-le-2ch-1byteu.wav"


def _wav_samples(path: Path) -> tuple[np.ndarray, int, int]:
    """The WAV's samples as integers at their own width (u8 made signed), (frames, channels); rate; width."""
    with wave.open(str(path)) as w:
        width, ch, rate, raw = w.getsampwidth(), w.getnchannels(), w.getframerate(), w.readframes(w.getnframes())
    if width == 1:
        return np.frombuffer(raw, np.uint8).astype(np.int32).reshape(-1, ch) - 128, rate, width
    if width == 2:
        return np.frombuffer(raw, "<i2").astype(np.int32).reshape(-1, ch), rate, width
    b = np.frombuffer(raw, np.uint8).reshape(-1, 3).astype(np.int32)  # 24-bit little-endian, sign-extended
    return ((b[:, 0] | (b[:, 1] << 8) | (b[:, 2] << 16)) << 8 >> 8).reshape(-1, ch), rate, width


def to_flac(wav: Path, out: Path) -> Path:
    """``wav`` encoded losslessly: 8- and 16-bit as 16-bit FLAC (8-bit shifted up, as the source reads it), 24-bit
    as 24-bit FLAC (FFmpeg's encoder takes the top 24 bits of s32)."""
    pcm, rate, width = _wav_samples(wav)
    ch = pcm.shape[1]
    if width == 3:
        data, fmt = (pcm << 8).astype(np.int32), "s32"
    else:
        data, fmt = (pcm << (8 if width == 1 else 0)).astype(np.int16), "s16"
    _encode(out, "flac", fmt, data, rate, ch)
    return out


def _encode(out: Path, codec: str, fmt: str, data: np.ndarray, rate: int, ch: int) -> None:
    layout = "mono" if ch == 1 else "stereo"
    with av.open(str(out), "w") as container:
        stream: Any = container.add_stream(codec, rate=rate, layout=layout)
        stream.format = fmt
        planar = fmt.endswith("p")
        for i in range(0, len(data), 4096):
            chunk = data[i : i + 4096]
            arr = np.ascontiguousarray(chunk.T if planar else chunk.reshape(1, -1))
            frame = av.AudioFrame.from_ndarray(arr, format=fmt, layout=layout)
            frame.sample_rate = rate
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)


def _write_24bit(src: Path, out: Path) -> Path:
    """A 24-bit stereo WAV from a real 16-bit recording: the left channel its samples with a low byte of noise, the
    right the same reversed, so both channels and all 24 bits carry distinct data."""
    pcm, rate, _ = _wav_samples(src)
    low = np.random.default_rng(0).integers(0, 256, len(pcm))
    left = (pcm[:, 0] << 8) | low
    stereo = np.stack([left, left[::-1]], axis=1).astype("<i4")
    raw = stereo.view(np.uint8).reshape(-1, 4)[:, :3].tobytes()
    with wave.open(str(out), "wb") as w:
        w.setnchannels(2)
        w.setsampwidth(3)
        w.setframerate(rate)
        w.writeframes(raw)
    return out


def _steps(src: AudioSource) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    out = {}
    for item in src.items():
        got = list(src.open(item))
        out[Path(item).stem] = (np.concatenate([b["pcm"] for b in got]), np.concatenate([b["nsamples"] for b in got]))
    return out


@pytest.mark.slow
def test_flac_gives_exactly_the_samples_of_the_wav_it_was_made_from(tmp_path: Path) -> None:
    speech = require_shared("audio") / "speech_8k"
    wavs, flacs = tmp_path / "wav", tmp_path / "flac"
    wavs.mkdir()
    flacs.mkdir()
    for p in sorted(speech.glob("*.wav"))[:4]:
        shutil.copy(p, wavs)
    for wav in sorted(wavs.glob("*.wav")):
        to_flac(wav, flacs / f"{wav.stem}.flac")
    want, got = AudioSource(wavs, frame_ms=20), AudioSource(flacs, frame_ms=20)
    assert [Path(i).stem for i in got.items()] == [Path(i).stem for i in want.items()]
    assert [got.length(i) for i in got.items()] == [want.length(i) for i in want.items()]  # from STREAMINFO
    a, b = _steps(want), _steps(got)
    for name in a:
        np.testing.assert_array_equal(b[name][0], a[name][0], err_msg=name)
        np.testing.assert_array_equal(b[name][1], a[name][1], err_msg=name)
    assert sum(int(np.abs(x).sum()) for x, _ in a.values()) > 0  # real sound, not silence


@pytest.mark.slow
@pytest.mark.parametrize("width", [1, 3])
def test_flac_of_8_and_24_bit_stereo_gives_the_wavs_steps_on_both_channels(tmp_path: Path, width: int) -> None:
    if width == 1:
        wav = tmp_path / EIGHT_BIT_STEREO.name
        shutil.copy(EIGHT_BIT_STEREO, wav)
    else:
        wav = _write_24bit(require_shared("audio") / "speech_8k" / "beep.wav", tmp_path / "beep24.wav")
    flac = to_flac(wav, tmp_path / "made.flac")
    want, got = _steps(AudioSource(wav, frame_ms=10)), _steps(AudioSource(flac, frame_ms=10))
    (pcm_w, n_w), (pcm_f, n_f) = next(iter(want.values())), next(iter(got.values()))
    assert pcm_w.shape[-1] == 2 and not np.array_equal(pcm_w[..., 0], pcm_w[..., 1])
    np.testing.assert_array_equal(pcm_f, pcm_w)
    np.testing.assert_array_equal(n_f, n_w)


def _lossy(tmp_path: Path) -> Path:
    """An MP3 (LAME) and an Opus file made from two real recordings; the folder holding them."""
    folder = tmp_path / "lossy"
    folder.mkdir()
    speech = require_shared("audio") / "speech_8k"
    pcm, rate, _ = _wav_samples(speech / "added.wav")
    _encode(folder / "added.mp3", "libmp3lame", "s16p", pcm.astype(np.int16), rate, 1)
    pcm, rate, _ = _wav_samples(speech / "beep.wav")
    _encode(folder / "beep.opus", "libopus", "s16", pcm.astype(np.int16), rate, 1)
    return folder


@pytest.mark.slow
def test_mp3_and_opus_decode_the_same_on_every_read_and_resume_exactly_from_any_step(tmp_path: Path) -> None:
    folder = _lossy(tmp_path)
    with pytest.warns(UserWarning, match=r"beep\.opus: it is 48000 Hz"):  # Opus decodes at 48 kHz
        mp3 = AudioSource(folder, frame_ms=20, mismatch="skip")
        items = mp3.items()
    assert [Path(i).name for i in items] == ["added.mp3"] and mp3.length(items[0]) is None
    opus = AudioSource(folder / "beep.opus", frame_ms=20)
    for src in (mp3, opus):
        (item,) = src.items()
        first, second = list(src.open(item)), list(AudioSource(item, frame_ms=20).open(item))
        full = np.concatenate([b["pcm"] for b in first])
        np.testing.assert_array_equal(np.concatenate([b["pcm"] for b in second]), full)
        assert np.abs(full.astype(np.int32)).max() > 1000  # the recording, not silence
        for k in (1, len(full) // 2, len(full) - 1):
            resumed = np.concatenate([b["pcm"] for b in src.open(item, start=k)])
            np.testing.assert_array_equal(resumed, full[k:])


@pytest.mark.slow
def test_compressed_streams_give_identical_batches_on_0_and_2_workers_and_resume_exactly(tmp_path: Path) -> None:
    folder = tmp_path / "mixed"
    folder.mkdir()
    speech = require_shared("audio") / "speech_8k"
    for wav in ("activated", "beep", "vm-goodbye"):
        to_flac(speech / f"{wav}.wav", folder / f"{wav}.flac")
    shutil.copy(speech / "added.wav", folder)
    shutil.copy(_lossy(tmp_path) / "added.mp3", folder / "added_lossy.mp3")

    def make() -> AudioSource:
        return AudioSource(folder, frame_ms=40)

    listed = make()
    assert len(listed.items()) == 5 and listed.window is None  # decoded, not mapped: every stream is read by open
    runs = []
    for workers in (0, 2):
        with StreamLoader(make(), batch_size=3, time_steps=8, num_workers=workers, seed=1) as loader:
            runs.append(collect(loader))
    assert len(runs[0]) == len(runs[1]) > 3
    for a, b in zip(runs[0], runs[1], strict=True):
        assert a.keys() == b.keys()
        for key in a:
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    check_resume(make, 3, 8, cuts=[2, 9], workers_before=0, workers_after=2, seed=1)


def test_glob_picks_the_format_and_the_default_takes_every_audio_suffix(tmp_path: Path) -> None:
    for name in ("a.wav", "b.flac", "c.mp3", "d.opus", "e.ogg", "notes.txt"):
        (tmp_path / name).write_bytes(b"x")
    src = AudioSource(tmp_path, glob="*.flac")
    assert src.glob == "*.flac"
    assert AudioSource.can_open(str(tmp_path)) and AudioSource.can_open(str(tmp_path / "b.flac"))
    assert not AudioSource.can_open(str(tmp_path / "notes.txt"))
    flac_only = tmp_path / "only"
    flac_only.mkdir()
    (flac_only / "x.FLAC").write_bytes(b"x")
    assert AudioSource.can_open(str(flac_only))


@pytest.mark.slow
def test_a_glob_selects_flac_among_wavs_and_a_file_ffmpeg_cannot_read_is_skipped_naming_it(tmp_path: Path) -> None:
    speech = require_shared("audio") / "speech_8k"
    shutil.copy(speech / "beep.wav", tmp_path)
    to_flac(speech / "added.wav", tmp_path / "added.flac")
    (tmp_path / "broken.flac").write_bytes(b"fLaC not really")
    with pytest.warns(UserWarning, match=r"skipping .*broken\.flac: FFmpeg cannot read it"):
        every = AudioSource(tmp_path).items()
    assert sorted(Path(i).name for i in every) == ["added.flac", "beep.wav"]
    with pytest.warns(UserWarning, match=r"broken\.flac"):
        flac = AudioSource(tmp_path, glob="*.flac").items()
    assert [Path(i).name for i in flac] == ["added.flac"]
    with pytest.raises(ValueError, match=r"broken\.flac' cannot be read: FFmpeg cannot read it"):
        AudioSource(tmp_path / "broken.flac").items()


def test_without_pyav_a_compressed_file_names_the_extra_and_wavs_still_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "av", None)  # import av fails, as where the extra is not installed
    (tmp_path / "a.flac").write_bytes(b"fLaC")
    with pytest.raises(
        ImportError, match=r"a\.flac is compressed audio, which needs PyAV.*pip install 'streamcli\[pyav\]'"
    ):
        AudioSource(tmp_path).items()
    wavs = tmp_path / "wavs"
    wavs.mkdir()
    shutil.copy(EIGHT_BIT_STEREO, wavs)
    src = AudioSource(wavs)
    assert len(src.items()) == 1 and callable(src.window)  # WAV only: mapped windows, as before
