"""An interrupted export resumes by seeking: the loader's state is stored with every complete shard."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_resume import CountedSource

from streamcli import StreamLoader
from streamcli.shards import make_header
from streamcli.shards.exporting import export_loader
from streamcli.shards.records import read_partial

LENGTHS = [60, 45, 80, 33, 71, 52, 64]


class Stop(Exception):
    pass


def files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def header_for(loader: StreamLoader) -> dict:  # type: ignore[type-arg]
    return make_header(fields=loader.fields, batch_size=loader.batch_size, time_steps=loader.time_steps,
                       layout=loader.layout, source={"plugin": "counted"}, loader={"seed": 0}, shard_bytes=1,
                       compress=False)  # fmt: skip  # one batch per shard is too small: see per_shard below


def run(out: Path, *, stop_after: int | None = None, mode: str = "new", epochs: int = 2) -> None:
    with StreamLoader(CountedSource(LENGTHS), 3, 4, seed=1) as loader:
        header = header_for(loader)
        header["batches_per_shard"] = 5

        def progress(n: int, _bytes: int) -> None:
            if stop_after is not None and n >= stop_after:
                raise Stop

        try:
            export_loader(loader, out, header, epochs=epochs, mode=mode, progress=progress)
        except Stop:
            pass


@pytest.mark.parametrize("cut", [7, 23, 41])
def test_resumed_export_seeks_and_is_byte_identical(tmp_path: Path, cut: int) -> None:
    full, part = tmp_path / "full", tmp_path / "part"
    run(full)
    run(part, stop_after=cut)
    _header, records = read_partial(part)  # type: ignore[misc]
    assert records and all(r["state"]["format"] == "streamcli-loader-state" for r in records)
    kept = len(records) * 5
    CountedSource.yielded, CountedSource.starts = 0, []
    run(part, mode="resume")
    assert files(part) == files(full)
    total = sum(LENGTHS) * 2  # two epochs
    per_batch = 3 * 4
    # Only what comes after the kept shards was read again (plus one look-ahead step per row).
    assert CountedSource.yielded <= total - kept * per_batch * 0.5
    assert CountedSource.yielded < total
