"""``streamcli samples``: write a few short clips from the camera source, for demos without a video folder."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from streamcli.cli._common import StreamcliCommand, UsageFailure
from streamcli.cli._source_options import convert


def samples(
    out_dir: Annotated[Path, typer.Argument(help="Folder to write the clips to.")] = Path("samples/clips"),
    count: Annotated[int, typer.Option(help="How many clips.", min=1)] = 6,
    steps: Annotated[int, typer.Option(help="Frames per clip.", min=1)] = 600,
    size: Annotated[str, typer.Option(help="Frame size HxW.")] = "96x128",
    fps: Annotated[float, typer.Option(help="Frames per second in the files.", min=1)] = 25.0,
) -> None:
    """Write COUNT short .mp4 clips rendered by the built-in camera source (skipped if already there)."""
    import cv2
    import numpy as np

    from streamcli.plugins import load_source

    try:
        h, w = convert(size, tuple[int, int])
    except ValueError as exc:
        raise UsageFailure(f"--size {size!r}: {exc}") from None
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageFailure(f"OUT_DIR {str(out_dir)!r} is a file, not a folder; name a folder, e.g. samples/clips")
    blocker = next((p for p in out_dir.parents if p.exists() and not p.is_dir()), None)
    if blocker is not None:
        raise UsageFailure(f"OUT_DIR {str(out_dir)!r} cannot be created: {str(blocker)!r} is a file, not a folder")
    out_dir.mkdir(parents=True, exist_ok=True)
    console = Console(stderr=True)
    existing = sorted(out_dir.glob("*.mp4"))
    if len(existing) >= count:
        console.print(f"{len(existing)} clips already in {out_dir}", highlight=False)
        return
    source = load_source("camera", count, steps=steps, size=(h, w))
    for item in source.items():
        path = out_dir / f"camera-{item:02d}.mp4"
        tmp = path.with_name(f".{path.stem}.tmp.mp4")  # a killed run never leaves a half clip under the real name
        writer = cv2.VideoWriter(str(tmp), cv2.VideoWriter.fourcc(*"mp4v"), fps, (w, h))
        if not writer.isOpened():
            raise UsageFailure(f"OpenCV cannot write {str(path)!r} (no mp4v encoder in this build)")
        for step in source.open(item):
            frame = np.asarray(step["frame"])  # uint8 [3, H, W] RGB
            writer.write(np.ascontiguousarray(frame.transpose(1, 2, 0)[:, :, ::-1]))
        writer.release()
        tmp.replace(path)
    console.print(f"wrote {count} clips of {steps} frames ({h}x{w}) to {out_dir}", highlight=False)


def register(app: typer.Typer) -> None:
    app.command(cls=StreamcliCommand, epilog="Example: streamcli samples samples/clips --count 4 --steps 100")(samples)
