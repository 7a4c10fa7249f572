"""Events from video: the simulator's arithmetic on one pixel, and the round trip through a real file format."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from conftest import data_root
from streamcli_sources.camera import CameraSource
from streamcli_sources.events import decoded
from streamcli_sources.events.readers import open_reader
from streamcli_sources.events.simulate import Simulator, export_recordings, from_source, simulate
from streamcli_sources.video import VideoSource

from streamcli import load_source
from streamcli.source import iter_steps


def test_a_brightening_then_darkening_pixel_fires_one_event_per_threshold_at_interpolated_times() -> None:
    # log(1) = 0 and log(e) = 1 exactly, so with threshold 0.25 the crossings fall at quarters of each interval.
    dark, bright = np.ones((1, 2)), np.array([[1.0, math.e]])
    ev = simulate([(dark, 1000), (bright, 9000), (dark, 17000)], threshold=0.25, eps=0.0)
    assert ev["x"].tolist() == [1] * 8 and ev["y"].tolist() == [0] * 8
    assert ev["p"].tolist() == [1, 1, 1, 1, 0, 0, 0, 0]
    assert ev["t"].tolist() == [3000, 5000, 7000, 9000, 11000, 13000, 15000, 17000]


def test_a_change_below_the_threshold_fires_nothing_but_accumulates_in_the_reference() -> None:
    f = [np.full((2, 3), v) for v in (1.0, 1.1, 1.2, 1.3)]  # log steps ~0.095, ~0.087, ~0.080; sum ~0.262
    ev = simulate([(x, 100 * i) for i, x in enumerate(f)], threshold=0.25, eps=0.0)
    # The level 0.25 is crossed between the frames at 200 and 300 µs, where log(I) passes 0.25, by every pixel.
    crossing = 200 + math.floor(100 * (0.25 - math.log(1.2)) / (math.log(1.3) - math.log(1.2)))
    assert len(ev) == 6 and set(ev["t"].tolist()) == {crossing}
    assert (ev["p"] == 1).all()


@pytest.mark.slow
@pytest.mark.parametrize("name", ["sim.raw", "sim.aedat4"])
def test_simulated_camera_events_survive_a_real_format_bit_exact(tmp_path: Path, name: str) -> None:
    pytest.importorskip("faery")
    cam = CameraSource(2, steps=12, size=(48, 64), gray=True)
    sim = from_source(cam, 1, Simulator(0.15))
    assert len(sim) > 1000 and (np.diff(sim["t"]) >= 0).all()
    assert set(np.unique(sim["p"]).tolist()) == {0, 1}
    path = tmp_path / "recs" / name
    path.parent.mkdir()
    decoded.write_file(str(path), sim, (48, 64))
    reader = open_reader(str(path), str(tmp_path / "cache"))
    back = reader.read(0, len(reader))
    for f in "xytp":
        np.testing.assert_array_equal(getattr(back, f), sim[f].astype(np.int64))
    np.save(tmp_path / "sim.npy", sim)
    kw = {"window_us": 50_000, "cache_dir": str(tmp_path / "cache"), "representation": "voxel"}
    a, b = load_source("events", path, **kw), load_source("events", tmp_path / "sim.npy", **kw)
    steps_a = list(iter_steps(a, a.items()[0]))
    steps_b = list(iter_steps(b, b.items()[0]))
    assert len(steps_a) == len(steps_b) > 3
    assert all(np.array_equal(x["events"], y["events"]) for x, y in zip(steps_a, steps_b, strict=True))


@pytest.mark.slow
def test_a_real_video_clip_becomes_events_timed_by_its_frames() -> None:
    src = VideoSource(data_root("video") / "realshort.mp4", size=(48, 64), gray=True)
    (item,) = src.items()
    times = [round(float(s["time_ms"]) * 1000) for s in iter_steps(src, item)]
    ev = from_source(src, item, Simulator(0.1))
    assert len(ev) > 0
    assert times[0] <= ev["t"].min() and ev["t"].max() <= times[-1]
    assert ev["x"].max() < 64 and ev["y"].max() < 48


@pytest.mark.slow
@pytest.mark.parametrize("suffix", [".npy", ".raw"])
def test_a_frame_source_exports_to_a_folder_the_events_source_reads_back_as_the_same_streams(
    tmp_path: Path, suffix: str
) -> None:
    if suffix != ".npy":
        pytest.importorskip("faery")
    cam = CameraSource(3, steps=6, size=(24, 32), gray=True)
    done: list[tuple[int, int]] = []
    paths = export_recordings(cam, tmp_path / "sim", suffix=suffix, progress=lambda *d: done.append(d))
    assert [p.name for p in paths] == [f"0000{i}-camera-{i}{suffix}" for i in range(3)] and done[-1] == (3, 3)
    kw = {"representation": "raw", "capacity": 20_000, "window_us": 1_000_000, "cache_dir": str(tmp_path / "c")}
    src = load_source("events", tmp_path / "sim", **kw)
    assert src.fields()[0].shape == (20_000, 4)
    for i, item in enumerate(src.items()):
        want = from_source(cam, i)
        (step,) = iter_steps(src, item)
        n = int(step["count"])
        assert n == len(want) > 0
        cols = np.stack([want[f].astype(np.int64) for f in "xytp"], axis=1)
        np.testing.assert_array_equal(np.asarray(step["events"])[:n], cols)


def test_a_refractory_period_drops_a_pixels_events_closer_than_it_to_the_last_one_kept() -> None:
    # 8 crossings 2000 µs apart at x=1 (see the first test); a 3000 µs refractory period keeps every other one.
    dark, bright = np.ones((1, 2)), np.array([[1.0, math.e]])
    frames = [(dark, 1000), (bright, 9000), (dark, 17000)]
    ev = Simulator(0.25, eps=0.0, refractory_us=3000).run(frames)
    assert ev["t"].tolist() == [3000, 7000, 11000, 15000]
    assert ev["p"].tolist() == [1, 1, 0, 0]


def test_shot_noise_is_seeded_per_frame_pair_and_respects_the_refractory_period() -> None:
    still = [(np.full((40, 50), 0.5), k * 10_000) for k in range(6)]
    a = Simulator(noise_hz=20.0, seed=4).run(still)
    assert np.array_equal(a, Simulator(noise_hz=20.0, seed=4).run(still))
    assert not np.array_equal(a, Simulator(noise_hz=20.0, seed=5).run(still))
    assert abs(len(a) - 20.0 * 0.05 * 2000) < 5 * np.sqrt(20.0 * 0.05 * 2000)  # Poisson mean 2000
    assert (np.diff(a["t"]) >= 0).all() and a["t"].min() > 0 and a["t"].max() <= 50_000
    b = Simulator(noise_hz=2000.0, refractory_us=5000).run(still)
    for pixel in np.unique(b["y"].astype(int) * 50 + b["x"]):
        times = b["t"][b["y"].astype(int) * 50 + b["x"] == pixel]
        assert (np.diff(times) >= 5000).all()
