"""Compressed audio for the audio source: FLAC, MP3 and Ogg (Opus, Vorbis) decoded by PyAV, as int16 samples.

FLAC is lossless: its samples are the PCM it was made from, so a FLAC file gives exactly the steps of its WAV
(24-bit samples, which FFmpeg's decoder left-aligns in 32 bits, keep their top 16 bits as the WAV reader does).
Its length is its STREAMINFO sample count, which the encoder writes exactly. MP3 and Opus decode to floats; they
are rounded to int16 (``rint(x * 32768)``, clipped), and decoded with one thread, so a file gives the same
samples on every run and worker count. Their lengths are not promised (``-1``): an MP3's count in its header is
an estimate, and a wrong promise would pad or cut the stream. Streams are read from the start; a read from step k
decodes and drops what comes before, which is exact because the decode is.

PyAV is an optional extra (``pip install 'streamcli[pyav]'``), imported only when a compressed file is read.
"""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from streamcli_sources._wav import Header

SUFFIXES = (".flac", ".mp3", ".ogg", ".oga", ".opus")
"""The compressed formats the audio source reads with PyAV (``.wav`` is read by ``wave``)."""
INSTALL = "pip install 'streamcli[pyav]'"


class Unreadable(ValueError):
    """FFmpeg cannot open the file, or it has no audio stream."""


def _av(path: str) -> Any:
    try:
        import av
    except ImportError as exc:
        raise ImportError(
            f"audio: {path} is compressed audio, which needs PyAV (the av package): {INSTALL}; or pass "
            "glob='*.wav' to read the WAV files only"
        ) from exc
    return av


def read_header(path: str) -> Header:
    """The file's rate and channels, its sample count where FLAC promises it (else ``frames=-1``); ``width`` 0:
    the samples come from PyAV, not from the file's bytes."""
    av = _av(path)
    try:
        with av.open(path) as container:
            if not container.streams.audio:
                raise Unreadable("it has no audio stream")
            stream = container.streams.audio[0]
            ctx = stream.codec_context
            frames = -1
            # STREAMINFO's total, as the stream's duration in samples: exact where it starts at 0 in 1/rate units.
            exact_base = stream.time_base == Fraction(1, ctx.sample_rate) and not stream.start_time
            if ctx.name == "flac" and stream.duration and exact_base:
                frames = int(stream.duration)
            return Header(int(ctx.sample_rate), int(ctx.channels), 0, frames)
    except av.FFmpegError as exc:
        raise Unreadable(f"FFmpeg cannot read it ({exc})") from exc


def to_int16(frame: Any) -> npt.NDArray[np.int16]:
    """A decoded ``av.AudioFrame`` as int16 (samples, channels)."""
    raw: np.ndarray = frame.to_ndarray()
    fmt = frame.format
    channels = len(frame.layout.channels)
    a = raw.T if fmt.is_planar else raw.reshape(-1, channels)
    out: npt.NDArray[np.int16]
    if a.dtype == np.int16:
        out = np.ascontiguousarray(a)
    elif a.dtype == np.int32:
        out = (a >> 16).astype(np.int16)  # the top 16 bits, as the WAV reader keeps of 24- and 32-bit samples
    elif a.dtype == np.uint8:
        out = ((a.astype(np.int16) - 128) << 8).astype(np.int16)
    elif a.dtype.kind == "f":
        out = np.clip(np.rint(a.astype(np.float64) * 32768.0), -32768, 32767).astype(np.int16)
    else:
        raise Unreadable(f"its samples are {fmt.name}, which the audio source does not convert")
    return out


def samples(path: str, skip: int = 0) -> Iterator[npt.NDArray[np.int16]]:
    """The file's samples as int16 (k, channels) chunks, from sample ``skip`` on; one decoder thread."""
    av = _av(path)
    try:
        with av.open(path) as container:
            stream = container.streams.audio[0]
            stream.codec_context.thread_count = 1  # PyAV's default (0) picks a count by the machine
            for frame in container.decode(stream):
                pcm = to_int16(frame)
                if skip >= len(pcm):
                    skip -= len(pcm)
                    continue
                yield pcm[skip:]
                skip = 0
    except av.FFmpegError as exc:
        raise Unreadable(f"FFmpeg cannot decode {path} ({exc})") from exc
