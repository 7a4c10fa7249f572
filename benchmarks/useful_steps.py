"""The share of delivered steps that are real data (not padding), with and without ``segment``.

    python benchmarks/useful_steps.py      # a few seconds (the video counts come from the scan cache)

Each figure is real steps / (batches x B x T) over one epoch, from the streams' exact lengths and the loader's
own ``len()`` (the same rule the loader runs; a test checks that ``len()`` equals the batches yielded).
"""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path

from streamcli import StreamLoader, load_source

DATA = Path(os.environ.get("STREAMCLI_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data")


def share(source: object, B: int, T: int, **kw: object) -> tuple[float, int]:
    with StreamLoader(source, B, T, **kw) as loader:  # type: ignore[arg-type]
        n = len(loader)
        real = sum(int(loader.source.length(i) or 0) for i in loader.items)
    return real / (n * B * T), n


def main() -> None:
    if not DATA.is_dir():
        sys.exit(f"real data not found at {DATA}; set STREAMCLI_DATA")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the two non-videos in odd/ are skipped
        video = load_source("video", str(DATA / "video"), scan=True)
        video.items()
    books = load_source("text", str(DATA / "text"))
    books1 = load_source("text", str(DATA / "text"), width=1)
    rows = [
        ("`export video ../shared/data/video` (B=8, T=16)", video, 8, 16, 0, 128),
        ("`text` on the 4 books (width 16), B=8, T=16", books, 8, 16, 0, 256),
        ("the README's GRU example (4 books, width 1), B=32, T=128", books1, 32, 128, 0, 4096),
    ]
    print("| what | default | with segment | segment |\n|---|---:|---:|---:|")
    for name, src, B, T, a, b in rows:
        s0, n0 = share(src, B, T, segment=a)
        s1, n1 = share(src, B, T, segment=b)
        print(f"| {name} | {s0:.1%} ({n0} batches) | {s1:.1%} ({n1} batches) | `--segment {b}` |")


if __name__ == "__main__":
    main()
