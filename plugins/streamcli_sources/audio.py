"""``audio``: WAV files read with the standard library's ``wave`` module, and FLAC, MP3 and Ogg/Opus decoded by
PyAV (``_audio_pyav``), in frames of a fixed duration.

One loader batch needs one shape, and a 20 ms frame is 960 samples at 48 kHz but 160 at 8 kHz, so every
file must share the first file's sample rate and channel count. Files that differ are **rejected, not
resampled**: resampling would silently change the data (and its quality depends on a filter choice
streamcli should not make for you). By default a mismatch is an error that names both formats and the
fix; ``mismatch="skip"`` skips such files with a warning instead; ``rate=`` picks the rate to keep.
"""

from __future__ import annotations

import os
import warnings
import wave
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from streamcli.errors import IndexFileError, SourceError
from streamcli.index import Index
from streamcli.source import BaseSource, Field, Step
from streamcli.storage import urls
from streamcli_sources import _audio_pyav, _indexed
from streamcli_sources._wav import Counts, Header, PaddedFrames, local_file, read_header, to_int16

SUFFIXES = (".wav", *_audio_pyav.SUFFIXES)
"""The files the source takes by default (``glob=""``): WAV, and the compressed formats PyAV decodes."""

_BLOCK = 50  # steps per block (one second at 20 ms a step)


class AudioSource(BaseSource):
    """Audio files (a file, or a folder searched recursively and sorted), one stream per file: WAV, and FLAC, MP3
    and Ogg/Opus through PyAV (``pip install 'streamcli[pyav]'``).

    Fields per step: ``pcm`` int16[samples, channels], where samples = round(rate x ``frame_ms`` / 1000)
    (960 at 48 kHz and 20 ms), zero-padded on a stream's last step, and ``nsamples`` int32, how many of
    them are real. 8-, 24- and 32-bit PCM are converted to int16 (their top 16 bits); FLAC gives exactly the
    samples of the WAV it was made from, and MP3 and Opus (decoded to floats) are rounded to int16, the same on
    every run and worker count. A FLAC file's length is known from its header; an MP3's or Opus file's is not
    (its stream's end is found as it is read). A file that cannot be read (a float or compressed WAV, a file
    FFmpeg cannot open) is skipped with a warning and listed in ``skipped``; with ``strict=True`` it is an
    error. An empty folder, one with no usable file, or an empty or unreadable file given directly raises
    ``ValueError`` (bad input, like a bad option).

    Args:
        folder: an audio file or a folder of them (or their URL).
        frame_ms: the length of one step in milliseconds.
        glob: select files by this pattern (default: every ``.wav``, ``.flac``, ``.mp3``, ``.ogg``, ``.oga`` and
            ``.opus`` file), e.g. ``*.flac``.
        rate: keep files of this sample rate in Hz (0: the first file's rate).
        mismatch: a file of another rate or channel count: ``error``, or ``skip`` it (files are not resampled).
        strict: a file ``wave`` cannot read is an error instead of being skipped with a warning.
        index: ``auto`` takes the files, lengths and format from the folder's index (``streamcli index audio
            PATH``): no listing and no header read at start-up; ``none`` lists the folder; or an index's path or URL.
    """

    def __init__(
        self,
        folder: str | os.PathLike[str] | None = None,
        *,
        frame_ms: float = 20.0,
        glob: str = "",
        rate: int = 0,
        mismatch: str = "error",
        strict: bool = False,
        index: str = "auto",
    ) -> None:
        if folder is None:
            raise ValueError("the audio source needs a folder or an audio file, e.g. audio recordings/")
        if not float(frame_ms) > 0:
            raise ValueError(f"frame_ms={frame_ms} must be a positive duration in milliseconds, e.g. 20")
        if mismatch not in ("error", "skip"):
            raise ValueError(f"mismatch={mismatch!r} must be 'error' or 'skip'")
        if int(rate) < 0:
            raise ValueError(f"rate={rate} must be 0 (the first file's rate) or a sample rate in Hz")
        # A URL (s3://...) is listed remotely; each file is read from the local cache (``streamcli.storage.cache``).
        self.url = str(folder) if urls.is_remote(folder) else None
        self.root = Path(urls.local_path(folder) if self.url is None else urls.name(str(folder)))
        if self.url is None and not (self.root.is_dir() or self.root.is_file()):
            raise ValueError(f"{str(self.root)!r} is neither a folder nor an audio file; check the path")
        if self.url is None and self.root.is_file() and self.root.stat().st_size == 0:
            raise ValueError(f"{str(self.root)!r} is empty (0 bytes); give an audio file or a folder of them")
        self.frame_ms = float(frame_ms)
        self.glob = glob
        self.rate = int(rate)
        self.mismatch = mismatch
        self.strict = bool(strict)
        self.skipped: list[tuple[str, str]] = []
        self._headers: dict[str, Header] | None = None
        # With an index: its files and their (rate, channels); each file's header is read where it is opened.
        self._indexed: tuple[Sequence[str], tuple[int, int]] | None = None
        self._opened: dict[str, Header] = {}
        self.streamcli_index = _indexed.find("audio", folder, index, self.index_settings())
        if self.streamcli_index is not None:
            self.use_index(self.streamcli_index)

    block_steps = True

    def _index(self) -> dict[str, Header]:
        if self._headers is not None:
            return self._headers
        if self.url is not None:
            from streamcli.storage.remote import find

            files = find(self.url, self.glob or "*")
            one = files == [self.url.rstrip("/")]
        else:
            one = self.root.is_file()
            files = [str(self.root)] if one else sorted(map(str, self.root.rglob(self.glob or "*")))
        if not self.glob and not one:
            files = [f for f in files if f.lower().endswith(SUFFIXES)]
        if not files:
            what = f"glob={self.glob!r}" if self.glob else f"an audio suffix ({', '.join(SUFFIXES)})"
            raise ValueError(
                f"no file matches {what} under {self.url or str(self.root)!r}; point at a folder of audio files, "
                "or pass glob= for other names"
            )
        headers: dict[str, Header] = {}
        skipped: list[tuple[str, str]] = []
        want: Header | None = None
        for path in files:
            try:
                with local_file(path) as local:
                    head = _read_header(local)
            except (wave.Error, EOFError, OSError, _audio_pyav.Unreadable) as exc:
                wav = not isinstance(exc, _audio_pyav.Unreadable)
                why = f"not a PCM WAV file that wave can read ({exc})" if wav else str(exc)
                if one:  # the one file the user named: their input, not the data
                    what = f"is {why}" if wav else f"cannot be read: {why}"
                    raise ValueError(f"{path!r} {what}; convert it, e.g. ffmpeg -i IN -c:a pcm_s16le OUT.wav") from exc
                if self.strict:
                    raise SourceError(f"audio: cannot read {path}: {exc} (strict=True)") from exc
                skipped.append((path, why))
                continue
            if want is None and (not self.rate or head.rate == self.rate):
                want = head
            if want is None or (head.rate, head.channels) != (want.rate, want.channels):
                first = f"{self.rate} Hz" if want is None else f"{want.describe()} like the first file"
                why = f"it is {head.describe()}, not {first}"
                if self.mismatch == "error":
                    raise ValueError(
                        f"{path}: {why}; files are not resampled, so point the source at files of one "
                        "format (e.g. one folder), or pass mismatch='skip' (and rate=...) to skip the others"
                    )
                skipped.append((path, why))
                continue
            headers[path] = head
        for path, why in skipped:
            warnings.warn(f"audio: skipping {path}: {why}", stacklevel=3)
        if not headers:
            raise ValueError(
                f"no usable audio file under {self.url or str(self.root)!r}: {len(skipped)} skipped (see the "
                "warnings); point at audio files of one format"
            )
        self.skipped, self._headers = skipped, headers
        self._no_window_if_compressed(list(headers))
        return headers

    def _no_window_if_compressed(self, files: Sequence[str]) -> None:
        """Compressed files are decoded, not mapped: the loader then reads every stream with ``open`` (set before
        the loader asks, as it lists the items first; the attribute travels to the workers with the source)."""
        if any(_compressed(f) for f in files):
            self.window = None  # type: ignore[assignment]

    def index_settings(self) -> dict[str, Any]:
        """The options that decide the files and their lengths (an index written with others is stale)."""
        return {key: getattr(self, key) for key in ("glob", "frame_ms", "rate", "mismatch", "strict")}

    def index_info(self) -> dict[str, Any]:
        rate, channels = self._format()
        return {"rate": rate, "channels": channels}

    def use_index(self, index: Index) -> Sequence[str]:
        """The files of ``index``, and the format they share from its ``info``: nothing is listed or read."""
        info = index.info
        if not isinstance(info.get("rate"), int) or not isinstance(info.get("channels"), int):
            raise IndexFileError(f"{index.where} does not record the audio's format; rebuild it with streamcli index")
        self._indexed = (index.items, (info["rate"], info["channels"]))
        self._no_window_if_compressed(index.items)
        return index.items

    def _format(self) -> tuple[int, int]:
        """The streams' common (sample rate, channels)."""
        if self._indexed is not None:
            return self._indexed[1]
        head = next(iter(self._index().values()))
        return head.rate, head.channels

    def _header(self, item: str) -> Header:
        if self._indexed is None:
            return self._index()[item]
        if item not in self._opened:  # read where the file is opened: a worker lists nothing
            with local_file(item) as path:
                head = _read_header(path)
            if (head.rate, head.channels) != self._indexed[1]:
                raise SourceError(
                    f"audio: {item} is {head.describe()}, not the format the index recorded; the file changed "
                    "since, so rebuild the index with streamcli index audio PATH"
                )
            self._opened[item] = head
        return self._opened[item]

    @property
    def samples(self) -> int:
        """Samples per step at the streams' common rate."""
        return max(1, round(self._format()[0] * self.frame_ms / 1000))

    def items(self) -> Sequence[str]:
        return self._indexed[0] if self._indexed is not None else list(self._index())

    def fields(self) -> Sequence[Field]:
        channels = self._format()[1]
        return (
            Field("pcm", (self.samples, channels), "int16", display="audio"),
            Field("nsamples", (), "int32", display="other"),
        )

    def length(self, item: str) -> int | None:
        frames = self._header(item).frames
        return None if frames < 0 else -(-frames // self.samples)

    def item_name(self, item: str) -> str:
        return Path(item).name

    @classmethod
    def can_open(cls, arg: str) -> bool:
        if urls.is_remote(arg):
            return False
        p = Path(urls.local_path(arg))
        if p.is_file():
            return p.suffix.lower() in SUFFIXES
        return p.is_dir() and any(f.suffix.lower() in SUFFIXES for f in p.rglob("*"))

    def window(self, item: str) -> dict[str, Any]:
        """Random access (``streamcli.source``): 16-bit PCM mapped in place, other widths converted once."""
        head = self._header(item)
        n, ch = self.samples, head.channels
        if _compressed(item):  # whole, in memory: the loader reads these by open (_no_window_if_compressed)
            with local_file(item) as local:
                pcm = np.concatenate([np.zeros((0, ch), np.int16), *_audio_pyav.samples(local)])
            steps = -(-len(pcm) // n)
            return {"pcm": PaddedFrames(pcm, steps, n), "nsamples": Counts(len(pcm), steps, n)}
        # An object is mapped while pinned: a mapping outlives the cache entry's removal (the inode stays).
        with local_file(item) as local, open(local, "rb") as f, wave.open(f) as w:
            offset = f.tell()  # wave stops right after the data chunk's header
            if head.width != 2:
                pcm = to_int16(w.readframes(head.frames), head.width).reshape(-1, ch)
            elif head.frames:
                pcm = np.asarray(np.memmap(local, "<i2", mode="r", offset=offset, shape=(head.frames, ch)))
            else:
                pcm = np.zeros((0, ch), np.int16)
        steps = -(-head.frames // n)
        if head.frames % n == 0:
            return {"pcm": pcm.reshape(steps, n, ch), "nsamples": np.broadcast_to(np.int32(n), (steps,))}
        return {"pcm": PaddedFrames(pcm, steps, n), "nsamples": Counts(head.frames, steps, n)}

    def open(self, item: str, start: int = 0) -> Iterator[Step]:
        """Blocks of up to ``_BLOCK`` frames (``block_steps``): one read and one reshape per block."""
        head = self._header(item)
        n, ch = self.samples, head.channels
        if _compressed(item):
            yield from self._decoded(item, start)
            return
        with local_file(item) as local, wave.open(local, "rb") as w:
            pos = start * n
            if pos >= head.frames:
                return
            w.setpos(pos)
            while pos < head.frames:
                raw = w.readframes(min(n * _BLOCK, head.frames - pos))
                pcm = to_int16(raw, head.width).reshape(-1, ch)
                got = len(pcm)
                if got == 0:
                    return  # the file ended before its header said (caught by read_header's cap)
                steps = -(-got // n)
                if got < steps * n:  # the stream's last step is zero-padded
                    pcm = np.concatenate([pcm, np.zeros((steps * n - got, ch), np.int16)])
                nsamples = np.minimum(n, got - np.arange(steps) * n).astype(np.int32)
                yield {"pcm": pcm.reshape(steps, n, ch), "nsamples": nsamples}
                pos += got

    def _decoded(self, item: str, start: int) -> Iterator[Step]:
        """A compressed file's blocks: decoded from its start, the samples before step ``start`` dropped (exact)."""
        n = self.samples
        block = n * _BLOCK
        with local_file(item) as local:
            pending: list[np.ndarray] = []
            held = 0
            for chunk in _audio_pyav.samples(local, start * n):
                pending.append(chunk)
                held += len(chunk)
                while held >= block:
                    pcm = np.concatenate(pending)
                    yield _steps(pcm[:block], n)
                    pending, held = [pcm[block:]], held - block
            if held:
                yield _steps(np.concatenate(pending), n)


def _compressed(path: str) -> bool:
    return not path.lower().endswith(".wav")


def _read_header(path: str) -> Header:
    return read_header(path) if not _compressed(path) else _audio_pyav.read_header(path)


def _steps(pcm: np.ndarray, n: int) -> Step:
    """``pcm`` (frames, channels) as whole steps of ``n`` frames, the last one zero-padded."""
    got, ch = pcm.shape
    steps = -(-got // n)
    if got < steps * n:
        pcm = np.concatenate([pcm, np.zeros((steps * n - got, ch), np.int16)])
    nsamples = np.minimum(n, got - np.arange(steps) * n).astype(np.int32)
    return {"pcm": pcm.reshape(steps, n, ch), "nsamples": nsamples}
