"""The virtual camera: deterministic streams, exact resume, and a homography that really explains the motion."""

from __future__ import annotations

import itertools
import pickle
from pathlib import Path

import cv2
import numpy as np
import pytest
from streamcli_sources.camera import CameraSource

from streamcli import load_source


def test_fields_shapes_and_lengths() -> None:
    src = CameraSource(3, steps=5, size=(24, 40))
    assert src.items() == [0, 1, 2] and src.length(1) == 5
    steps = list(src.open(1))
    assert len(steps) == 5
    for f in src.fields():
        for s in steps:
            assert s[f.name].shape == f.shape and s[f.name].dtype == f.np_dtype
    np.testing.assert_array_equal(steps[0]["homography"], np.eye(3))
    gray = CameraSource(1, steps=2, size=16, gray=True)
    assert next(gray.open(0))["frame"].shape == (1, 16, 16)


def test_streams_are_deterministic_distinct_and_resume_exactly() -> None:
    src = CameraSource(2, steps=40, size=(32, 32))
    a = list(src.open(0))
    again = list(pickle.loads(pickle.dumps(src)).open(0))  # as a worker would
    for x, y in zip(a, again, strict=True):
        np.testing.assert_array_equal(x["frame"], y["frame"])
        np.testing.assert_array_equal(x["homography"], y["homography"])
    assert not np.array_equal(a[10]["frame"], next(src.open(1, start=10))["frame"])
    for k in (1, 17, 39):
        resumed = list(src.open(0, start=k))
        assert len(resumed) == 40 - k
        for x, y in zip(resumed, a[k:], strict=True):
            np.testing.assert_array_equal(x["frame"], y["frame"])
            np.testing.assert_array_equal(x["homography"], y["homography"])
    assert list(src.open(0, start=40)) == []
    other_seed = CameraSource(2, steps=40, size=(32, 32), seed=1)
    assert not np.array_equal(next(other_seed.open(0))["frame"], a[0]["frame"])


def test_homography_maps_the_previous_frame_onto_this_one() -> None:
    src = CameraSource(1, steps=30, size=(96, 96))
    steps = list(src.open(0))
    for prev, cur in itertools.pairwise(steps):
        p = prev["frame"].transpose(1, 2, 0)
        c = cur["frame"].transpose(1, 2, 0).astype(np.int16)
        warped = cv2.warpPerspective(p, cur["homography"], (96, 96))
        inside = cv2.warpPerspective(np.full_like(p, 255), cur["homography"], (96, 96)) == 255
        explained = np.abs(warped.astype(np.int16) - c)[inside].mean()
        unexplained = np.abs(p.astype(np.int16) - c).mean()
        assert explained < 0.6 * unexplained and explained < 3.0


def test_the_camera_moves_and_speed_zero_stands_still() -> None:
    moving = list(CameraSource(1, steps=3, size=32).open(0))
    assert not np.allclose(moving[2]["homography"], np.eye(3))
    still = list(CameraSource(1, steps=3, size=32, speed=0.0).open(0))
    np.testing.assert_allclose(still[2]["homography"], np.eye(3), atol=1e-12)
    np.testing.assert_array_equal(still[0]["frame"], still[2]["frame"])


def test_a_users_image(tmp_path: Path) -> None:
    img = np.zeros((64, 64, 3), np.uint8)
    img[:, :32] = (255, 0, 0)  # blue in BGR
    path = tmp_path / "plane.png"
    cv2.imwrite(str(path), img)
    src = CameraSource(1, steps=1, size=8, image=str(path), view=0.05, speed=0.0)
    frame = next(src.open(0))["frame"]
    assert frame[2].max() == 255 and frame[:2].max() == 0  # RGB order: blue lands in channel 2 only
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"not an image")
    with pytest.raises(ValueError, match="cannot decode"):
        next(CameraSource(1, image=str(bad)).open(0))


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"size": (4, 0)}, r"size=\(4, 0\)"),
        ({"steps": 0}, "steps=0 must be at least 1"),
        ({"view": 2.0}, r"view=2.0 must be in \(0, 1\]"),
        ({"speed": -1.0}, "speed=-1.0 must be >= 0"),
        ({"image": "/nonexistent.png"}, "is not a file"),
    ],
)
def test_bad_options(options: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        CameraSource(2, **options)  # type: ignore[arg-type]


def test_listed_and_loaded_through_discovery() -> None:
    src = load_source("camera", 2, steps=3, size=(16, 16))
    assert type(src).__name__ == "CameraSource" and len(list(src.open(1))) == 3


@pytest.mark.slow
def test_loader_batches_are_the_same_with_and_without_workers() -> None:
    from streamcli import StreamLoader

    src = CameraSource(5, steps=12, size=(16, 16))
    out = []
    for workers in (0, 2):
        with StreamLoader(src, batch_size=2, time_steps=5, num_workers=workers) as loader:
            n = len(loader)
            out.append([(b["frame"].numpy().copy(), b["homography"].numpy().copy()) for b in loader])
            assert len(out[-1]) == n
    assert len(out[0]) == len(out[1]) > 0
    for (f0, h0), (f1, h1) in zip(*out, strict=True):
        np.testing.assert_array_equal(f0, f1)
        np.testing.assert_array_equal(h0, h1)
