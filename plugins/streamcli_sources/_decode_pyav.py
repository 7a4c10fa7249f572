"""The video source's second decoder, PyAV (``backend="pyav"``), whose wheels bundle their own FFmpeg.

It keeps ``_decode``'s notion of a frame, so both backends count the same frames: a frame is what the decoder
outputs; a run of ``max_failed`` packets that fail to decode ends the stream (one bad packet does not); a
frame that cannot be converted to BGR ends it too. Times are what OpenCV reports as ``CAP_PROP_POS_MSEC``:
the frame's timestamp less the stream's start, in ms (NaN where a frame has none), so ``_decode.Clock``
treats both alike.

What OpenCV cannot do, this does:
- open a binary file-like object as well as a path (remote video read as a stream, with no local copy);
- seek exactly: by timestamp to the keyframe at or before frame k, then decode forward to the frame whose
  time is frame k's in the scan, and check its pixels against the scan. A container that seeks inexactly
  (landing after frame k) or a frame that decodes differently after a seek falls back to decoding from the
  start, so frame k is always the k-th frame of a full decode;
- set the decoder's threads on the codec itself: 1 (the default) gives the same frames on every run.
"""

from __future__ import annotations

import math
import os
from collections.abc import Generator, Iterator
from fractions import Fraction
from typing import IO, Any

import av
import numpy as np
import numpy.typing as npt
from av.video.frame import VideoFrame
from av.video.reformatter import VideoReformatter

from streamcli_sources._decode import NATIVE_LOG_ENV, declared_frames, short_clip_warning
from streamcli_sources._scan_record import Scan, checksum

VideoFile = str | os.PathLike[str] | IO[bytes]
"""A path, or a binary file-like object that can ``read`` and ``seek`` (an fsspec file, ``io.BytesIO``)."""

_TIMEOUT_S = 20.0  # FFmpeg's interrupt callback: a stalled read cannot hang a worker (as in _decode)
_SEEK_TRIES = 4  # seeks before a decode from the start (see ``PyAVVideo.seek``)


def _quiet_native_logs() -> None:
    """FFmpeg's messages stay off the terminal unless ``$STREAMCLI_NATIVE_LOG`` asks for them (``--debug``)."""
    wanted = os.environ.get(NATIVE_LOG_ENV, "") not in ("", "0")
    av.logging.set_level(av.logging.WARNING if wanted else None)


class PyAVVideo:
    """The first video stream of a file, decoded by PyAV with ``threads`` decoder threads.

    Args:
        file: a path or a binary file-like object.
        threads: decoder threads; 1 gives the same frames on every run, 0 lets FFmpeg choose.
        max_failed: consecutive packets that fail to decode before the stream is taken to end.

    Raises ``av.FFmpegError`` when FFmpeg cannot open it, ``LookupError`` when it has no video stream.
    """

    def __init__(self, file: VideoFile, threads: int = 1, max_failed: int = 5) -> None:
        _quiet_native_logs()
        self.file = file
        self.threads = threads
        self.max_failed = max_failed
        self._reformatter = VideoReformatter()
        self._open()

    def _open(self) -> None:
        file: Any = os.fspath(self.file) if isinstance(self.file, os.PathLike) else self.file
        if not isinstance(file, str):
            file.seek(0)  # from its start, also when reopened after a seek that could not be verified
        self.container = av.open(file, mode="r", timeout=_TIMEOUT_S)
        if not self.container.streams.video:
            self.container.close()
            raise LookupError("no video stream")
        self.stream = self.container.streams.video[0]
        codec = self.stream.codec_context
        codec.thread_count = self.threads  # PyAV's own default is 0 (automatic), which is not reproducible
        codec.thread_type = "SLICE" if self.threads == 1 else "AUTO"
        self._start = self.stream.start_time or 0
        self._base = self.stream.time_base or Fraction(1, 1)

    @property
    def fps(self) -> float:
        """The header's frame rate (0.0 where it gives none); ``Clock`` uses it only where times fail."""
        rate = self.stream.average_rate or self.stream.guessed_rate
        return float(rate) if rate else 0.0

    @property
    def name(self) -> str:
        """The file, as a warning names it: its path, or a file-like object's ``path`` or ``name``."""
        if isinstance(self.file, (str, os.PathLike)):
            return os.fspath(self.file)
        return str(getattr(self.file, "path", None) or getattr(self.file, "name", None) or "a clip")

    def declared(self) -> int:
        """The frames the container declares (0: it declares none), reckoned as OpenCV's ``CAP_PROP_FRAME_COUNT``."""
        s = self.stream
        seconds = float(s.duration * self._base) if s.duration else (self.container.duration or 0) / av.time_base
        return declared_frames(float(s.frames or 0), seconds, self.fps)

    def check_end(self, decoded: int) -> None:
        """Warn (``RuntimeWarning``) when a decode that ran to the end stopped at frame ``decoded``, well before
        the declared count: a truncated or damaged file."""
        short_clip_warning(self.name, decoded, self.declared())

    def ms(self, frame: VideoFrame) -> float:
        """The frame's time as OpenCV reports it: its timestamp less the stream's start, in ms; NaN if none."""
        if frame.pts is None:
            return math.nan
        # OpenCV's arithmetic (cap_ffmpeg_impl.hpp, dts_to_sec), so both backends give the same doubles.
        return float(frame.pts - self._start) * (self._base.numerator / self._base.denominator) * 1000

    def frames(self) -> Generator[VideoFrame, None, None]:
        """Decode from where the container stands until the end, or ``max_failed`` bad packets in a row."""
        failed = 0
        try:
            for packet in self.container.demux(self.stream):
                try:
                    decoded = self.stream.decode(packet)
                except av.FFmpegError:  # a damaged packet; the next one may decode
                    failed += 1
                    if failed >= self.max_failed:
                        return
                    continue
                failed = 0
                yield from decoded
        except av.FFmpegError:  # the demuxer cannot read on (a truncated file): the stream ends there
            return

    def seek(self, target: int, scan: Scan | None) -> Iterator[tuple[int, VideoFrame]]:
        """``(index, frame)`` from frame ``target`` on, or from frame 0 where no seek can be verified.

        Seeking needs a scan whose times tell frames apart (``Scan.seekable``): frame ``target`` is the frame
        with the scan's time, and its pixels must have the scan's checksum. A landing past the target (MPEG
        program streams seek inexactly) seeks again 1, 4, then 16 s earlier. Other pixels at the target mean
        the keyframe was no clean start (an open GOP): the file is then decoded from the start.

        The first frame is decoded before any seek: a decoder learns things at the start of a stream that no
        keyframe repeats (FFmpeg's H.264 decoder reads the encoder's version from its first frame and works
        around that version's known bugs), and without them every frame after a seek in cockatoo.mp4 differs
        from a full decode's.
        """
        if target > 0 and scan is not None and scan.seekable and target < scan.frames:
            want = float(scan.pos_ms[target])
            offset = round(Fraction(want) / 1000 / self._base) + self._start
            second = max(1, round(1 / self._base))
            primer = self.frames()
            next(primer, None)
            primer.close()
            for attempt in range(_SEEK_TRIES):
                if offset <= self._start:
                    break  # as far back as the start: decoding from frame 0 is the same work
                self.container.seek(offset, stream=self.stream, backward=True, any_frame=False)
                self.stream.codec_context.flush_buffers()
                frames = self.frames()
                overshot = True  # also where nothing decodes from there (a seek to the last frame of some WebM)
                for frame in frames:
                    got = self.ms(frame)
                    if got < want:  # a frame between the keyframe and the target
                        continue
                    if got == want and (bgr := self.bgr(frame)) is not None and checksum(bgr) == scan.adler[target]:
                        yield target, frame
                        yield from self._counted(frames, target + 1)
                        return
                    overshot = got > want
                    break
                frames.close()
                if not overshot:
                    break
                offset -= second * 4**attempt
            self.close()
            self._open()
        yield from self._counted(self.frames(), 0)

    def from_ms(self, ms: float) -> Iterator[VideoFrame]:
        """The frames from the keyframe at or before time ``ms`` (as ``self.ms`` reckons it) on, to the end.

        For readers that find frames by time (LeRobot's episodes, back to back in one file). The first frame is
        decoded before the seek, as in ``seek``. Where the seek lands past ``ms`` (an inexact container), the file
        is decoded from the start instead, so every frame at or after ``ms`` is among those yielded.
        """
        offset = round(Fraction(ms) / 1000 / self._base) + self._start
        if offset > self._start:
            primer = self.frames()
            next(primer, None)
            primer.close()
            self.container.seek(offset, stream=self.stream, backward=True, any_frame=False)
            self.stream.codec_context.flush_buffers()
            frames = self.frames()
            first = next(frames, None)
            if first is not None and self.ms(first) <= ms:
                yield first
                yield from frames
                return
            frames.close()
            self.close()
            self._open()
        yield from self.frames()

    def _counted(self, frames: Iterator[VideoFrame], first: int) -> Iterator[tuple[int, VideoFrame]]:
        """``enumerate(frames, first)``, then ``check_end`` once the frames run out (not when the caller stops)."""
        n = first
        for frame in frames:
            yield n, frame
            n += 1
        self.check_end(n)

    def bgr(self, frame: VideoFrame) -> npt.NDArray[np.uint8] | None:
        """The frame as BGR uint8 (H, W, 3), as OpenCV gives it; ``None`` where FFmpeg cannot convert it.

        One converter per video, reused: a new one per frame (``frame.to_ndarray``) costs up to ten times the
        conversion on small frames. Bicubic, as OpenCV asks of FFmpeg's converter, so the pixels are the same.
        """
        try:
            out = self._reformatter.reformat(frame, format="bgr24", interpolation="BICUBIC").to_ndarray()
        except (av.FFmpegError, ValueError):
            return None
        return np.ascontiguousarray(out, dtype=np.uint8)

    def rgb(self, frame: VideoFrame) -> npt.NDArray[np.uint8] | None:
        """The frame as RGB uint8 (H, W, 3), converted as ``bgr`` converts (one conversion where ``bgr`` and
        ``cv2.cvtColor`` make two); ``None`` where FFmpeg cannot convert it."""
        try:
            out = self._reformatter.reformat(frame, format="rgb24", interpolation="BICUBIC").to_ndarray()
        except (av.FFmpegError, ValueError):
            return None
        return np.ascontiguousarray(out, dtype=np.uint8)

    def close(self) -> None:
        self.container.close()

    def __enter__(self) -> PyAVVideo:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_video(file: VideoFile, threads: int = 1, max_failed: int = 5) -> PyAVVideo | None:
    """A ``PyAVVideo``, or ``None`` where FFmpeg cannot open it or it has no video stream."""
    try:
        return PyAVVideo(file, threads, max_failed)
    except (av.FFmpegError, LookupError):
        return None


def scan_file(path: str, max_failed: int) -> Scan:
    """Decode ``path`` once (one decoder thread) as ``_scan.scan_file`` does with OpenCV."""
    video = open_video(path, threads=1, max_failed=max_failed)
    if video is None:
        return Scan(np.zeros(0, np.float64), np.zeros(0, np.uint32), opened=False)
    pos: list[float] = []
    sums: list[int] = []
    cut = False
    with video:
        for frame in video.frames():
            bgr = video.bgr(frame)
            if bgr is None:
                cut = True
                break
            pos.append(video.ms(frame))
            sums.append(checksum(bgr))
        if not cut:
            video.check_end(len(pos))
    return Scan(np.asarray(pos, np.float64), np.asarray(sums, np.uint32), True, cut)
