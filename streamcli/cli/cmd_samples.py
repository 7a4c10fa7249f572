"""``streamcli samples``: a folder of small inputs for every built-in source, so each ``--help`` example runs.

``streamcli samples samples`` writes ``samples/clips`` (.mp4 rendered by the camera source), ``samples/text``
(``prose/`` and ``code/``), ``samples/audio`` (.wav) and ``samples/events`` (.npy simulated over camera frames).
Every file is written under a temporary name and renamed once whole; a part already there is kept.
"""

from __future__ import annotations

import json
import math
import wave
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from streamcli.cli._aliases import Alias, deprecated
from streamcli.cli._common import StreamcliCommand, UsageFailure
from streamcli.cli._source_options import parse_options

PARTS = ("clips", "text", "audio", "events")
TEXTS = 4  # files in each of text/prose and text/code
AUDIO = 3  # .wav files
AUDIO_RATE = 16_000
EVENT_STREAMS, EVENT_STEPS = 2, 60  # recordings in events/, frames simulated for each

CameraOpts = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        "-s",
        help="A camera source option for the clips, key=value (repeatable), e.g. -s size=96x128 -s gray=true; "
        "streamcli plugins camera lists them.",
        show_default=False,
        metavar="KEY=VALUE",
    ),
]


def samples(
    out_dir: Annotated[
        Path, typer.Argument(help="The folder to fill: OUT_DIR/clips, text, audio and events.", metavar="[OUT_DIR]")
    ] = Path("samples"),
    count: Annotated[int, typer.Option(help="How many clips.", min=1)] = 6,
    steps: Annotated[int, typer.Option(help="Frames per clip.", min=1)] = 600,
    fps: Annotated[float, typer.Option(help="Frame rate of the clips, frames per second.", min=1)] = 25.0,
    option: CameraOpts = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print what was written as JSON (for scripts).")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print nothing but errors.")] = False,
) -> None:
    """Write small sample inputs into OUT_DIR: clips, text, audio and events (each kept if already there).

    clips/ holds COUNT .mp4 clips rendered by the built-in camera source (96x128 unless -s size=HxW);
    text/prose and text/code hold .txt files; audio/ holds .wav tones; events/ holds .npy event recordings
    simulated over camera frames. Every example in streamcli's --help runs in the folder above OUT_DIR=samples.
    """
    from streamcli.plugins import load_factory

    options = parse_options(load_factory("camera"), option or [], "camera")
    options.setdefault("size", (96, 128))
    if "count" in options:
        raise UsageFailure("-s count=... is --count N here (how many clips)")
    steps = int(options.pop("steps", steps))
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageFailure(f"OUT_DIR {str(out_dir)!r} is a file, not a folder; name a folder, e.g. samples")
    blocker = next((p for p in out_dir.parents if p.exists() and not p.is_dir()), None)
    if blocker is not None:
        raise UsageFailure(f"OUT_DIR {str(out_dir)!r} cannot be created: {str(blocker)!r} is a file, not a folder")
    console = Console(stderr=True, quiet=quiet or as_json, highlight=False)
    writers: dict[str, Callable[[Path], tuple[int, str]]] = {
        "clips": lambda d: _clips(d, count, steps, fps, options),
        "text": _texts,
        "audio": _audio,
        "events": lambda d: _events(d, options),
    }
    report: dict[str, Any] = {"out_dir": str(out_dir)}
    for part in PARTS:
        folder = out_dir / part
        if folder.exists() and not folder.is_dir():
            raise UsageFailure(f"{str(folder)!r} is a file, not a folder; move it away or pick another OUT_DIR")
        folder.mkdir(parents=True, exist_ok=True)
        written, what = writers[part](folder)
        report[part] = {"path": str(folder), "written": written, "files": _count_files(folder)}
        console.print(f"{folder}: {what}" if written else f"{folder}: already there ({what})")
    if as_json:
        typer.echo(json.dumps(report, indent=1))


def _count_files(folder: Path) -> int:
    return sum(1 for p in folder.rglob("*") if p.is_file() and not p.name.startswith("."))


def _clips(folder: Path, count: int, steps: int, fps: float, options: dict[str, Any]) -> tuple[int, str]:
    import cv2
    import numpy as np

    from streamcli.plugins import load_source

    what = f"{count} clips of {steps} frames at {fps:g} fps"
    if len(list(folder.glob("*.mp4"))) >= count:
        return 0, what
    source = load_source("camera", count, steps=steps, **options)
    _, h, w = next(f.shape for f in source.fields() if f.name == "frame")
    gray = bool(options.get("gray", False))
    written = 0
    for item in source.items():
        path = folder / f"camera-{item:02d}.mp4"
        if path.exists():
            continue
        tmp = path.with_name(f".{path.stem}.tmp.mp4")  # a killed run never leaves a half clip under the real name
        writer = cv2.VideoWriter(str(tmp), cv2.VideoWriter.fourcc(*"mp4v"), fps, (w, h))
        if not writer.isOpened():
            raise UsageFailure(f"OpenCV cannot write {str(path)!r} (no mp4v encoder in this build)")
        for step in source.open(item):
            frame = np.asarray(step["frame"])  # uint8 [C, H, W] RGB
            hwc = np.repeat(frame, 3, axis=0) if gray else frame
            writer.write(np.ascontiguousarray(hwc.transpose(1, 2, 0)[:, :, ::-1]))
        writer.release()
        tmp.replace(path)
        written += 1
    return written, f"{what} ({h}x{w})"


_PROSE = (
    "The river ran slow under the bridge, and the lamps along the quay came on one by one.",
    "She counted the boats, lost count, and began again from the red one with the torn sail.",
    "Nobody in the village remembered who had planted the orchard, only that it had always been there.",
    "By noon the fog had lifted, and the hills stood out so clearly that they seemed close enough to touch.",
    "He wrote every evening, a page at a time, and never read back what he had written the day before.",
)
_CODE = (
    "def mean(xs):\n    return sum(xs) / len(xs)\n",
    "class Counter:\n    def __init__(self):\n        self.n = 0\n\n    def add(self, k=1):\n        self.n += k\n",
    "for i in range(10):\n    if i % 3 == 0:\n        print('fizz', i)\n",
    "import json\n\nwith open('config.json') as f:\n    config = json.load(f)\n",
)


def _texts(folder: Path) -> tuple[int, str]:
    what = f"{TEXTS} .txt files in prose/ and {TEXTS} in code/"
    written = 0
    for sub, lines in (("prose", _PROSE), ("code", _CODE)):
        (folder / sub).mkdir(exist_ok=True)
        for i in range(TEXTS):
            body = "\n".join(lines[(i + k) % len(lines)] for k in range(8 * (i + 1))) + "\n"
            written += _write_once(folder / sub / f"{sub}-{i:02d}.txt", body.encode())
    return written, what


def _audio(folder: Path) -> tuple[int, str]:
    import numpy as np

    what = f"{AUDIO} mono .wav tones of 1-3 s at {AUDIO_RATE} Hz"
    written = 0
    for i in range(AUDIO):
        path = folder / f"tone-{i:02d}.wav"
        if path.exists():
            continue
        t = np.arange(AUDIO_RATE * (i + 1)) / AUDIO_RATE
        pitch = 220.0 * 2 ** (i / 3)
        pcm = (0.3 * np.sin(2 * math.pi * pitch * t * (1 + 0.2 * t)) * 32767).astype("<i2")
        tmp = path.with_name(f".{path.name}.tmp")
        with wave.open(str(tmp), "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(AUDIO_RATE)
            w.writeframes(pcm.tobytes())
        tmp.replace(path)
        written += 1
    return written, what


def _events(folder: Path, options: dict[str, Any]) -> tuple[int, str]:
    from streamcli_sources.events.simulate import Simulator, frame_size, from_source, recording_path, write_recording

    from streamcli.plugins import load_source

    what = f"{EVENT_STREAMS} .npy recordings simulated over {EVENT_STEPS} camera frames each"
    source = load_source("camera", EVENT_STREAMS, steps=EVENT_STEPS, **options)
    sensor = frame_size(source)
    written = 0
    for i, item in enumerate(source.items()):
        path = recording_path(folder, i, source, item, ".npy")
        if path.exists():
            continue
        write_recording(path, from_source(source, item, Simulator(), fps=30.0), sensor)  # whole, or not there
        written += 1
    return written, what


def _write_once(path: Path, data: bytes) -> int:
    """Write ``data`` to ``path`` under a temporary name, then rename it; 0 if ``path`` is already there."""
    if path.exists():
        return 0
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    tmp.replace(path)
    return 1


def register(app: typer.Typer) -> None:
    app.command(
        cls=StreamcliCommand,
        epilog="Examples: streamcli samples samples  |  streamcli samples small --count 2 --steps 100 -s size=64x64",
    )(deprecated(Alias(("--size",), "option", "-s size=HxW", many=True, wrap=lambda v: f"size={v}"))(samples))
