"""A million items with and without an index (``streamcli index``): construction time, memory added, first batch.

The source's ``length()`` costs nothing, so the figures are the loader's own start-up; a real store adds a
request or a stat per item without the index. Each case runs in a fresh subprocess (peak memory is per process):
memory added is the peak resident set (VmHWM) after constructing, less the resident set before it (torch
loaded). Without the index the source lists its items when the loader asks (in the construction time).

    python benchmarks/bench_index.py [--items 1000000] [--repeats 2] [--shortest 1]
    python benchmarks/bench_index.py --s3 10000   # LIST and HEAD requests at start-up on moto's S3 server
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from streamcli.source import BaseSource, Field


class Million(BaseSource):
    """``n`` string items of ``shortest`` to ``shortest + 99`` steps of one int32; ``length()`` is arithmetic.

    Lengths above 256 are not CPython's cached small ints: a list of them costs an object per item."""

    def __init__(self, n: int, shortest: int = 1) -> None:
        self.n, self.shortest = n, shortest
        self._items: list[str] | None = None  # listed when asked, as a store is: not at all with an index

    def index_settings(self) -> dict[str, object]:
        return {"n": self.n, "shortest": self.shortest}

    def items(self) -> list[str]:
        if self._items is None:
            self._items = [f"shard-{k // 1000:04d}/item-{k:07d}.bin" for k in range(self.n)]
        return self._items

    def fields(self) -> list[Field]:
        return [Field("x", (), "int32")]

    def length(self, item: str) -> int:
        return int(item[-11:-4]) % 100 + self.shortest

    def open(self, item: str, start: int = 0) -> Iterator[dict[str, np.ndarray]]:
        for t in range(start, self.length(item)):
            yield {"x": np.asarray(t, np.int32)}


def _status(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(key)


def case(n: int, index: str | None, shortest: int = 1) -> dict[str, float]:
    """One measurement, in this process (run through ``--case`` in a fresh one)."""
    from streamcli import StreamLoader
    from streamcli.shared.tensors import import_torch

    import_torch()
    before = _status("VmRSS")
    t0 = time.perf_counter()
    loader = StreamLoader(Million(n, shortest), 16, 8, seed=0, index=index)
    built = time.perf_counter() - t0
    peak_built = _status("VmHWM")
    with loader:
        next(iter(loader))
        first = time.perf_counter() - t0
    return {"construct_s": built, "added_mb": (peak_built - before) / 1e6, "first_batch_s": first,
            "added_first_mb": (_status("VmHWM") - before) / 1e6}  # fmt: skip


def s3_requests(n: int) -> None:
    """LIST and HEAD requests at start-up (text source + loader) on moto's S3 server, ``n`` small objects."""
    import logging
    import os
    import socket

    import fsspec
    from moto.server import ThreadedMotoServer
    from streamcli_sources.text import TextSource

    from streamcli import StreamLoader
    from streamcli import index as sindex

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1",
                      AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}")  # fmt: skip
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    lines: list[str] = []

    class Lines(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    log = logging.getLogger("werkzeug")
    log.addHandler(Lines())
    log.propagate = False
    try:
        fs = fsspec.filesystem("s3")
        fs.mkdir("bench")
        t0 = time.perf_counter()
        fs.pipe({f"bench/t{k:06d}.txt": b"abc" * (k % 7 + 1) for k in range(n)})
        print(f"s3: {n} objects put in {time.perf_counter() - t0:.1f} s")
        for label in ("without index", "with index"):
            if label == "with index":
                src = TextSource("s3://bench", width=4, index="none")
                items, lengths = sindex.build(src)
                sindex.write("s3://bench/" + sindex.INDEX_NAME, sindex.encode("text", src.index_settings(), items,
                                                                               lengths))  # fmt: skip
            log.setLevel(logging.INFO)
            lines.clear()
            t0 = time.perf_counter()
            with StreamLoader(TextSource("s3://bench", width=4), 4, 3) as loader:
                len(loader)  # every length, as an epoch's start asks them
                took = time.perf_counter() - t0
                lists = sum(1 for x in lines if "list-type=" in x or "prefix=" in x)
                heads = sum(1 for x in lines if "HEAD " in x)
            log.setLevel(logging.ERROR)
            print(f"s3 {label}: {lists} LIST, {heads} HEAD, {len(lines)} requests in all, {took:.1f} s to construct "
                  "and measure every length")  # fmt: skip
    finally:
        server.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--shortest", type=int, default=1, help="the shortest item's steps (items have 100 lengths)")
    ap.add_argument("--case", choices=["plain", "index"], help=argparse.SUPPRESS)
    ap.add_argument("--index", help=argparse.SUPPRESS)
    ap.add_argument("--s3", type=int, metavar="N", help="count start-up requests on moto's S3 with N objects")
    args = ap.parse_args()
    if args.s3:
        s3_requests(args.s3)
        return
    if args.case:
        print(json.dumps(case(args.items, args.index if args.case == "index" else None, args.shortest)))
        return
    from streamcli import index as sindex

    with tempfile.TemporaryDirectory() as tmp:
        where = str(Path(tmp) / sindex.INDEX_NAME)
        source = Million(args.items, args.shortest)
        t0 = time.perf_counter()
        items, lengths = sindex.build(source)
        data = sindex.encode("Million", source.index_settings(), items, lengths)
        sindex.write(where, data)
        wrote = time.perf_counter() - t0
        t0 = time.perf_counter()
        sindex.read(where)
        read = time.perf_counter() - t0
        print(f"{args.items} items: index {len(data) / 1e6:.1f} MB, written in {wrote:.2f} s, read in {read:.2f} s")
        del source, items, lengths, data
        for mode in ("plain", "index"):
            for _ in range(args.repeats):
                cmd = [sys.executable, __file__, "--items", str(args.items), "--shortest", str(args.shortest)]
                cmd += ["--case", mode, "--index", where]
                out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
                r = json.loads(out.strip().splitlines()[-1])
                print(f"{mode:6s}: construct {r['construct_s']:.2f} s, +{r['added_mb']:.0f} MB; first batch "
                      f"{r['first_batch_s']:.2f} s, +{r['added_first_mb']:.0f} MB at its peak")  # fmt: skip


if __name__ == "__main__":
    main()
