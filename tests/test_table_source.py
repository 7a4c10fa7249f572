"""The ``table`` source over a sensor log made of real audio (``_sensor_data``): the rows of several microphones,
interleaved in time order as a logger writes them, in Parquet (small row groups) and CSV. Every microphone is one
stream, delivered once, its rows in time order."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from _resume import check_resume
from _sensor_data import CHANNELS, recordings, streams_of
from streamcli_sources._table_file import Groups
from typer.testing import CliRunner

from streamcli import StreamLoader, load_source
from streamcli.cli import app

B, T = 3, 40
# The sensor log's string column is left out with a warning, which one test checks and the others need not see.
pytestmark = pytest.mark.filterwarnings("ignore:table.*cannot be fields:UserWarning")
RATE = 4000.0  # rows a second: each row's time stamp is its index / RATE, offset per microphone


def sensor_log(recs: list[np.ndarray], shuffle: bool = True) -> pa.Table:
    """One row per (microphone, row): ``mic`` (a string key), ``t`` (seconds), ``channels`` (12 floats, a fixed
    size list), ``level-db`` (float32, the field ``level_db``), ``frame`` (int64) and ``site`` (a string, no
    field). Rows in time order across microphones (interleaved), or in a random order."""
    mic = np.concatenate([np.full(len(r), i) for i, r in enumerate(recs)])
    frame = np.concatenate([np.arange(len(r)) for r in recs])
    t = frame / RATE + mic * 0.01
    rows = np.concatenate(recs)
    order = np.random.default_rng(1).permutation(len(t)) if shuffle else np.argsort(t, kind="stable")
    return pa.table(
        {
            "mic": pa.array([f"mic-{m}" for m in mic[order]]),
            "t": t[order],
            "channels": pa.FixedSizeListArray.from_arrays(pa.array(rows[order].reshape(-1)), CHANNELS),
            "level-db": (20 * np.log10(np.abs(rows[order]).max(axis=1) + 1e-6)).astype(np.float32),
            "frame": frame[order],
            "site": pa.array(["lab"] * len(t)),
        }
    )


def check_streams(got: dict[int, dict[str, np.ndarray]], recs: list[np.ndarray], names: list[str]) -> None:
    assert sorted(got) == list(range(len(recs)))
    for k, name in enumerate(names):
        m = int(name.split("-")[1])  # the microphone the stream is
        assert got[k]["frame"].tolist() == list(range(len(recs[m])))
        if "channels" in got[k]:
            np.testing.assert_array_equal(got[k]["channels"], recs[m])
        np.testing.assert_allclose(got[k]["t"], np.arange(len(recs[m])) / RATE + m * 0.01)


@pytest.fixture
def recs() -> list[np.ndarray]:
    return recordings()


def test_each_key_is_one_stream_of_its_rows_in_order_by_order(tmp_path: Path, recs: list[np.ndarray]) -> None:
    pq.write_table(sensor_log(recs), tmp_path / "log.parquet", row_group_size=500)
    with pytest.warns(UserWarning, match=r"columns site \(string\) cannot be fields and are left out"):
        src = load_source("table", tmp_path / "log.parquet", stream_by="mic", order_by="t")
    assert sorted(src.items()) == [f"mic-{i}" for i in range(len(recs))]
    assert [src.length(i) for i in src.items()] == [len(recs[int(i.split("-")[1])]) for i in src.items()]
    assert [(f.name, f.shape, f.np_dtype.name) for f in src.fields()] == [
        ("t", (), "float64"),
        ("channels", (CHANNELS,), "float32"),
        ("level_db", (), "float32"),
        ("frame", (), "int64"),
    ]
    assert src.skipped_columns == ["site"]
    check_streams(streams_of(src, B, T), recs, list(src.items()))


def test_a_table_in_stream_order_reads_ranges_of_rows_from_the_row_groups_it_spans(
    tmp_path: Path, recs: list[np.ndarray]
) -> None:
    table = sensor_log(recs)
    table = table.take(np.lexsort((table["t"].to_numpy(), [int(m[4:]) for m in table["mic"].to_pylist()])))
    pq.write_table(table, tmp_path / "sorted.parquet", row_group_size=500)
    src = load_source("table", tmp_path / "sorted.parquet", stream_by="mic", order_by="t")
    assert src.items() == [f"mic-{i}" for i in range(len(recs))]
    Groups._cache.clear()
    Groups._bytes = 0
    last = src.items()[-1]
    blocks = list(src.open(last, start=100))
    np.testing.assert_array_equal(np.concatenate([b["channels"] for b in blocks]), recs[-1][100:])
    first_row = sum(len(r) for r in recs[:-1]) + 100
    spanned = set(range(first_row // 500, (sum(len(r) for r in recs) - 1) // 500 + 1))
    assert {key[-1] for key in Groups._cache} == spanned  # no row group the stream does not span was read
    check_streams(streams_of(src, B, T), recs, list(src.items()))


def test_csv_gives_the_streams_parquet_gives(tmp_path: Path, recs: list[np.ndarray]) -> None:
    pacsv.write_csv(sensor_log(recs).drop_columns(["channels"]), tmp_path / "log.csv")
    src = load_source("table", tmp_path / "log.csv", stream_by="mic", order_by="t", columns="t,frame,level-db")
    assert [f.name for f in src.fields()] == ["t", "frame", "level_db"]
    check_streams(streams_of(src, B, T), recs, list(src.items()))


def test_an_index_keeps_the_grouping(tmp_path: Path, recs: list[np.ndarray]) -> None:
    path = tmp_path / "log.parquet"
    pq.write_table(sensor_log(recs), path, row_group_size=500)
    args = ["index", "table", str(path), "-s", "stream_by=mic", "-s", "order_by=t", "--json"]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["items"] == len(recs)
    src = load_source("table", path, stream_by="mic", order_by="t")
    assert src.streamcli_index is not None
    check_streams(streams_of(src, B, T), recs, list(src.items()))
    with pytest.raises(Exception, match=r"stale.*order_by: 't' there, 'frame' here"):
        load_source("table", path, stream_by="mic", order_by="frame")


def test_resume_is_exact(tmp_path: Path, recs: list[np.ndarray]) -> None:
    pq.write_table(sensor_log(recs), tmp_path / "log.parquet", row_group_size=500)
    make = lambda: load_source("table", tmp_path / "log.parquet", stream_by="mic", order_by="t")  # noqa: E731
    check_resume(make, B, T, cuts=[1, 30, 70], segment=300)


@pytest.mark.slow
def test_zero_and_two_workers_give_identical_batches(tmp_path: Path, recs: list[np.ndarray]) -> None:
    pq.write_table(sensor_log(recs), tmp_path / "log.parquet", row_group_size=500)
    runs = []
    for workers in (0, 2):
        src = load_source("table", tmp_path / "log.parquet", stream_by="mic", order_by="t")
        with StreamLoader(src, B, T, num_workers=workers, seed=5) as loader:
            runs.append([{k: v.numpy().copy() for k, v in {**b.data, **b.flags()}.items()} for b in loader])
    assert len(runs[0]) == len(runs[1]) > 10
    for a, b in zip(*runs, strict=True):
        for key in a:
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)


def test_malformed_tables_are_errors_naming_the_file(tmp_path: Path, recs: list[np.ndarray]) -> None:
    path = tmp_path / "log.parquet"
    pq.write_table(sensor_log(recs[:2]), path)
    with pytest.raises(ValueError, match=r"log\.parquet has no column 'device' \(stream_by\); its columns: mic, t,"):
        load_source("table", path, stream_by="device")
    with pytest.raises(ValueError, match=r"log\.parquet: column 'site' is string, which cannot be a field"):
        load_source("table", path, stream_by="mic", columns="t,site")
    with pytest.raises(ValueError, match=r"log\.parquet has no column 'gyro'"):
        load_source("table", path, stream_by="mic", columns="gyro")
    table = sensor_log(recs[:2])
    holes = pa.array([None if i == 7 else 1.0 for i in range(len(table))], pa.float64())
    pq.write_table(table.append_column("temp", holes), tmp_path / "holes.parquet")
    src = load_source("table", tmp_path / "holes.parquet", stream_by="mic")
    with pytest.raises(ValueError, match=r"holes\.parquet \(row group 0\): column 'temp' holds 1 nulls"):
        next(src.open(src.items()[0]))
    (tmp_path / "bad.csv").write_text("mic,t\na,1\nb\n")
    with pytest.raises(ValueError, match=r"bad\.csv is not a CSV table"):
        load_source("table", tmp_path / "bad.csv", stream_by="mic")


@pytest.mark.parametrize("order_by", ["t", ""])
def test_an_index_of_an_unsorted_table_keeps_its_row_order_so_no_reader_groups_it_again(
    tmp_path: Path, recs: list[np.ndarray], order_by: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "log.parquet"
    table = sensor_log(recs)  # the rows shuffled: neither in stream order nor in time order
    pq.write_table(table, path, row_group_size=500)
    settings = ["-s", "stream_by=mic"] + (["-s", f"order_by={order_by}"] if order_by else [])
    r = CliRunner().invoke(app, ["index", "table", str(path), *settings])
    assert r.exit_code == 0, r.output
    import streamcli_sources.table as table_module

    def no_grouping(*args: object) -> np.ndarray:
        raise AssertionError("the table was grouped again: its index did not keep the row order")

    monkeypatch.setattr(table_module, "column_numpy", no_grouping)
    src = load_source("table", path, stream_by="mic", order_by=order_by)
    assert src.streamcli_index is not None and len(src.streamcli_index.arrays["order"]) == table.num_rows
    got = streams_of(src, B, T)
    mics = np.array([int(m[4:]) for m in table["mic"].to_pylist()])
    for k, name in enumerate(src.items()):
        rows = np.flatnonzero(mics == int(name[4:]))  # file order
        if order_by:
            rows = rows[np.argsort(table["t"].to_numpy()[rows], kind="stable")]
        assert got[k]["frame"].tolist() == table["frame"].to_numpy()[rows].tolist()
    if order_by:
        check_streams(got, recs, list(src.items()))


def test_an_index_written_before_it_kept_the_row_order_still_gives_the_streams_in_order(
    tmp_path: Path, recs: list[np.ndarray]
) -> None:
    from streamcli.index_format import seal_of

    path = tmp_path / "log.parquet"
    pq.write_table(sensor_log(recs), path, row_group_size=500)
    r = CliRunner().invoke(app, ["index", "table", str(path), "-s", "stream_by=mic", "-s", "order_by=t"])
    assert r.exit_code == 0, r.output
    index = Path(f"{path}.streamcli-index.npz")
    with np.load(index) as z:
        arrays = {k: z[k] for k in z.files if k not in ("meta", "x.order")}  # as an older streamcli wrote it
        meta = json.loads(z["meta"].tobytes())
    meta["seal"] = seal_of(meta, arrays)
    members: dict[str, Any] = {**arrays, "meta": np.frombuffer(json.dumps(meta).encode(), np.uint8)}
    np.savez_compressed(index, **members)
    src = load_source("table", path, stream_by="mic", order_by="t")
    assert src.streamcli_index is not None and src.streamcli_index.arrays == {}
    check_streams(streams_of(src, B, T), recs, list(src.items()))
