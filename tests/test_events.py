"""The events source over .npy recordings: windows, representations, seeking, the index cache and resume."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from _events_fakes import H, W, histogram_ref, recording, time_surface_ref, voxel_ref, windows_by_mask, write_folder
from _invariants import collect
from _resume import check_resume
from streamcli_sources.events import EventsSource, windows
from streamcli_sources.events.formats import ColumnsReader

from streamcli import StreamLoader, load_source
from streamcli.errors import SourceError
from streamcli.source import iter_steps

WINDOW = 20_000


def steps(src: EventsSource, item: str, start: int = 0) -> list[dict[str, np.ndarray]]:
    return [{k: np.asarray(v) for k, v in s.items()} for s in iter_steps(src, item, start)]


@pytest.fixture
def folder(tmp_path: Path) -> tuple[Path, list[np.ndarray]]:
    return tmp_path / "recs", write_folder(tmp_path / "recs")


def source(folder: Path, **kw: object) -> EventsSource:
    kw.setdefault("window_us", WINDOW)
    return load_source("events", folder, cache_dir=str(folder.parent / "cache"), **kw)  # type: ignore[return-value]


def test_each_recording_is_a_stream_of_time_windows_counted_as_numpy_counts_them(folder: tuple) -> None:
    root, recs = folder
    src = source(root)
    assert [Path(i).name for i in src.items()] == ["rec0.npy", "rec1.npy", "rec2.npy"]
    for item, ev in zip(src.items(), recs, strict=True):
        want = windows_by_mask(ev, WINDOW)
        got = steps(src, item)
        assert src.length(item) == len(got) == len(want)
        assert [int(s["events"].sum()) for s in got] == [len(w) for w in want]
        assert any(len(w) == 0 for w in want), "the fixture must hold empty windows"
        t0 = int(ev["t"][0])
        assert [int(s["time_us"]) for s in got] == [t0 + k * WINDOW for k in range(len(want))]


def test_a_histogram_counts_each_polarity_in_its_own_channel(folder: tuple) -> None:
    root, recs = folder
    src = source(root)
    assert src.fields()[0].shape == (2, H, W)
    for item, ev in zip(src.items(), recs, strict=True):
        for s, win in zip(steps(src, item), windows_by_mask(ev, WINDOW), strict=True):
            np.testing.assert_array_equal(s["events"], histogram_ref(win))


def test_downsampling_pools_pixels_onto_a_coarser_grid(folder: tuple) -> None:
    root, recs = folder
    src = source(root, downsample=3)
    assert src.fields()[0].shape == (2, H // 3, -(-W // 3))
    got = steps(src, src.items()[0])
    for s, win in zip(got, windows_by_mask(recs[0], WINDOW), strict=True):
        np.testing.assert_array_equal(s["events"], histogram_ref(win, H // 3, -(-W // 3), 3))


def test_a_voxel_grid_matches_a_per_event_bilinear_loop(folder: tuple) -> None:
    root, recs = folder
    src = source(root, representation="voxel", bins=4, dtype="float64")
    ev = recs[1]
    t0 = int(ev["t"][0])
    for k, (s, win) in enumerate(zip(steps(src, src.items()[1]), windows_by_mask(ev, WINDOW), strict=True)):
        np.testing.assert_allclose(s["events"], voxel_ref(win, t0 + k * WINDOW, WINDOW, 4), atol=1e-12)


def test_a_time_surface_decays_from_each_pixels_latest_event(folder: tuple) -> None:
    root, recs = folder
    src = source(root, representation="time_surface", tau_us=7000, dtype="float64")
    ev = recs[0]
    t0 = int(ev["t"][0])
    for k, (s, win) in enumerate(zip(steps(src, src.items()[0]), windows_by_mask(ev, WINDOW), strict=True)):
        np.testing.assert_allclose(s["events"], time_surface_ref(win, t0 + (k + 1) * WINDOW, 7000.0), rtol=1e-12)


def test_raw_windows_hold_the_events_themselves_padded_to_capacity(folder: tuple) -> None:
    root, recs = folder
    src = source(root, representation="raw", capacity=300)
    ev = recs[2]
    for s, win in zip(steps(src, src.items()[2]), windows_by_mask(ev, WINDOW), strict=True):
        n = len(win)
        assert int(s["count"]) == n
        want = np.stack([win["x"], win["y"], win["t"], win["p"]], axis=1).astype(np.int64)
        np.testing.assert_array_equal(s["events"][:n], want)
        assert not s["events"][n:].any()


def test_a_raw_window_over_capacity_is_an_error_naming_the_fix_unless_truncated(folder: tuple) -> None:
    root, recs = folder
    with pytest.raises(SourceError, match=r"more than capacity=5; raise capacity"):
        steps(source(root, representation="raw", capacity=5), str(root / "rec0.npy"))
    got = steps(source(root, representation="raw", capacity=5, overflow="truncate"), str(root / "rec0.npy"))
    first = windows_by_mask(recs[0], WINDOW)[0]
    assert int(got[0]["count"]) == 5
    np.testing.assert_array_equal(got[0]["events"][:, 2], first["t"][:5])


def test_events_per_window_cuts_by_count_and_times_each_window_by_its_first_event(folder: tuple) -> None:
    root, recs = folder
    src = source(root, window_us=0, events_per_window=700, representation="voxel", bins=3, dtype="float64")
    ev = recs[0]
    got = steps(src, src.items()[0])
    assert len(got) == -(-len(ev) // 700)
    for k, s in enumerate(got):
        win = ev[k * 700 : (k + 1) * 700]
        start, span = int(win["t"][0]), int(win["t"][-1] - win["t"][0])
        assert int(s["time_us"]) == start
        np.testing.assert_allclose(s["events"].sum(), (2.0 * win["p"] - 1).sum())
        np.testing.assert_allclose(s["events"], voxel_ref(win, start, span, 3)[:, :H, :W], atol=1e-12)


@pytest.mark.parametrize("k", [0, 1, 5, 9, 17, 28, 29])
def test_opening_at_window_k_reads_only_from_its_first_event_and_equals_the_full_reads_tail(
    folder: tuple, k: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, _ = folder
    src = source(root)
    item = src.items()[2]
    full = steps(src, item)
    assert len(full) == 29
    reads: list[int] = []
    real = ColumnsReader.read
    monkeypatch.setattr(ColumnsReader, "read", lambda self, a, b: (reads.append(a), real(self, a, b))[1])
    tail = steps(src, item, k)
    assert len(tail) == len(full) - k
    for a, b in zip(full[k:], tail, strict=True):
        assert all(np.array_equal(a[f], b[f]) for f in a)
    first = sum(int(s["events"].sum()) for s in full[:k])
    assert min(reads, default=first) == first, "open(start=k) read events before window k"


def test_the_window_index_is_cached_outside_the_users_folder_and_reused(folder: tuple, monkeypatch) -> None:
    root, recs = folder
    before = sorted(p.name for p in root.iterdir())
    source(root).items()
    assert sorted(p.name for p in root.iterdir()) == before
    assert len(list((root.parent / "cache" / "events").glob("index-*.npz"))) == 3

    def no_scan(*a: object, **k: object) -> None:
        raise AssertionError("scanned although the cache holds the index")

    monkeypatch.setattr(windows, "scan", no_scan)
    assert source(root).length(str(root / "rec0.npy")) == len(windows_by_mask(recs[0], WINDOW))
    with pytest.raises(AssertionError, match="scanned although"):
        source(root, window_us=WINDOW + 1).items()  # other windows, another index


def test_the_sensor_size_is_inferred_from_the_events_and_a_too_small_one_names_the_fix(folder: tuple) -> None:
    root, _ = folder
    assert source(root).spec.height == H and source(root).spec.width == W
    assert source(root, sensor_size=(60, 70)).fields()[0].shape == (2, 60, 70)
    with pytest.raises(ValueError, match=r"outside sensor_size=\(40, 64\); pass sensor_size=\(48, 64\)"):
        source(root, sensor_size=(40, 64)).items()


def test_unsorted_timestamps_are_refused_naming_the_event(tmp_path: Path) -> None:
    ev = recording(3, 500)
    ev["t"][200] = ev["t"][10]
    np.save(tmp_path / "bad.npy", ev)
    with pytest.raises(ValueError, match="event 200 is earlier than the one before it"):
        source(tmp_path / "bad.npy").items()


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"events_per_window": 10}, "not both"),
        ({"representation": "frames"}, "must be one of histogram, voxel"),
        ({"representation": "raw"}, "needs capacity=N"),
        ({"sensor_size": (0, 5)}, "two positive ints"),
    ],
)
def test_bad_options_are_value_errors_naming_the_value(folder: tuple, options: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        source(folder[0], **options)


def test_exact_resume_at_any_window_with_segments(folder: tuple) -> None:
    root, _ = folder
    check_resume(lambda: source(root, downsample=4), 2, 3, cuts=[1, 2, 4, 7, 9], segment=7)


@pytest.mark.slow
def test_batches_are_bit_identical_with_0_and_2_workers(folder: tuple) -> None:
    root, _ = folder
    runs = []
    for workers in (0, 2):
        with StreamLoader(source(root, representation="voxel", bins=2), 2, 4, num_workers=workers, seed=3) as ld:
            runs.append(collect(ld))
    assert len(runs[0]) == len(runs[1]) > 3
    for a, b in zip(*runs, strict=True):
        assert a.keys() == b.keys()
        assert all(np.array_equal(a[k], b[k]) for k in a)


@pytest.mark.slow
def test_resume_across_worker_counts(folder: tuple) -> None:
    root, _ = folder
    check_resume(lambda: source(root, downsample=8), 2, 4, cuts=[3], workers_before=2, workers_after=0)


def test_any_run_of_windows_can_be_read_directly_as_one_block(folder: tuple) -> None:
    root, _ = folder
    src = source(root, representation="raw", capacity=300)
    item = src.items()[0]
    full = steps(src, item)
    for k0, k1 in [(0, 1), (3, 11), (len(full) - 2, len(full))]:
        block = src.windows(item, k0, k1)
        for f in ("events", "time_us", "count"):
            np.testing.assert_array_equal(block[f], np.stack([s[f] for s in full[k0:k1]]))
    with pytest.raises(IndexError, match=r"windows \[5, 99\)"):
        src.windows(item, 5, 99)


def test_an_empty_recording_is_a_stream_of_no_windows(folder: tuple) -> None:
    root, _ = folder
    np.save(root / "rec9_empty.npy", recording(0, 10)[:0])
    src = source(root)
    assert src.length(str(root / "rec9_empty.npy")) == 0
    assert steps(src, str(root / "rec9_empty.npy")) == []
    assert EventsSource.can_open(str(root)) and not EventsSource.can_open(str(root.parent / "cache"))


def test_a_cache_that_cannot_be_written_only_costs_a_rescan(folder: tuple, tmp_path: Path) -> None:
    root, recs = folder
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    src: EventsSource = load_source("events", root, window_us=WINDOW, cache_dir=str(blocker))  # type: ignore[assignment]
    got = steps(src, src.items()[1])
    assert [int(s["events"].sum()) for s in got] == [len(w) for w in windows_by_mask(recs[1], WINDOW)]
