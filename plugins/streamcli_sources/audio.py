"""``audio``: WAV files read with the standard library's ``wave`` module, in frames of a fixed duration.

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
from streamcli_sources import _indexed
from streamcli_sources._wav import Counts, Header, PaddedFrames, local_file, read_header, to_int16

_BLOCK = 50  # steps per block (one second at 20 ms a step)


class AudioSource(BaseSource):
    """WAV files (a file, or a folder searched recursively and sorted), one stream per file.

    Fields per step: ``pcm`` int16[samples, channels], where samples = round(rate x ``frame_ms`` / 1000)
    (960 at 48 kHz and 20 ms), zero-padded on a stream's last step, and ``nsamples`` int32, how many of
    them are real. 8-, 24- and 32-bit PCM are converted to int16 (their top 16 bits). A file ``wave``
    cannot read (compressed or float WAV, or not a WAV at all) is skipped with a warning and listed in
    ``skipped``; with ``strict=True`` it is an error. An empty folder, one with no usable file, or an
    empty or unreadable file given directly raises ``ValueError`` (bad input, like a bad option).

    Args:
        folder: a ``.wav`` file or a folder of them (or their URL).
        frame_ms: the length of one step in milliseconds.
        glob: select files by this pattern.
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
        glob: str = "*.wav",
        rate: int = 0,
        mismatch: str = "error",
        strict: bool = False,
        index: str = "auto",
    ) -> None:
        if folder is None:
            raise ValueError("the audio source needs a folder or a .wav file, e.g. audio recordings/")
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
            raise ValueError(f"{str(self.root)!r} is neither a folder nor a file of WAV audio; check the path")
        if self.url is None and self.root.is_file() and self.root.stat().st_size == 0:
            raise ValueError(f"{str(self.root)!r} is empty (0 bytes); give a .wav file or a folder of them")
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

            files = find(self.url, self.glob)
            one = files == [self.url.rstrip("/")]
        else:
            one = self.root.is_file()
            files = [str(self.root)] if one else sorted(map(str, self.root.rglob(self.glob)))
        if not files:
            raise ValueError(
                f"no file matches glob={self.glob!r} under {self.url or str(self.root)!r}; point at a folder of "
                "WAV files, or pass glob= for other names"
            )
        headers: dict[str, Header] = {}
        skipped: list[tuple[str, str]] = []
        want: Header | None = None
        for path in files:
            try:
                with local_file(path) as local:
                    head = read_header(local)
            except (wave.Error, EOFError, OSError) as exc:
                if one:  # the one file the user named: their input, not the data
                    raise ValueError(
                        f"{path!r} is not a PCM WAV file that wave can read ({exc}); convert it, "
                        "e.g. ffmpeg -i IN -c:a pcm_s16le OUT.wav"
                    ) from exc
                if self.strict:
                    raise SourceError(f"audio: cannot read {path}: {exc} (strict=True)") from exc
                skipped.append((path, f"not a PCM WAV file that wave can read ({exc})"))
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
                f"no usable WAV file under {self.url or str(self.root)!r}: {len(skipped)} skipped (see the warnings); "
                "point at PCM WAV files of one format"
            )
        self.skipped, self._headers = skipped, headers
        return headers

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
                head = read_header(path)
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

    def length(self, item: str) -> int:
        return -(-self._header(item).frames // self.samples)

    def item_name(self, item: str) -> str:
        return Path(item).name

    @classmethod
    def can_open(cls, arg: str) -> bool:
        if urls.is_remote(arg):
            return False
        p = Path(urls.local_path(arg))
        return (p.is_file() and p.suffix.lower() == ".wav") or (p.is_dir() and any(p.rglob("*.wav")))

    def window(self, item: str) -> dict[str, Any]:
        """Random access (``streamcli.source``): 16-bit PCM mapped in place, other widths converted once."""
        head = self._header(item)
        n, ch = self.samples, head.channels
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
