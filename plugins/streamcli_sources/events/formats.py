"""Event files, read as four columns (``x``, ``y``, ``t``, ``p``) that can be sliced by event index.

Every reader gives the same view of a recording: ``len(reader)`` events, ``reader.read(a, b)`` the events
``[a, b)`` as numpy arrays, and the sensor size where the file records it. Timestamps are int64
microseconds; polarity is 0 or 1 (any value > 0 counts as 1, so files that store -1/1 read as 0/1).

- ``.npy``: a structured array with fields ``x``, ``y``, ``t``, ``p``, memory-mapped (one file, one recording).
- ``.h5`` / ``.hdf5``: datasets ``x``, ``y``, ``t``, ``p`` at the root or in an ``events`` group (the layout of
  DSEC and of the Gen1/1Mpx files RVT reads); a ``t_offset`` dataset or attribute is added to ``t`` (DSEC);
  ``height``/``width`` (attributes, or scalar datasets beside ``x`` as in RVT's files) or a ``sensor_size``
  attribute give the sensor size. Needs ``h5py`` (extra ``events``).
- ``.raw`` (Prophesee EVT 2.0 / EVT 3.0, the version from the file's header), ``.aedat4`` (iniVation), ``.dat``
  and ``.es``: decoded once with **faery** into columns in the cache folder (``decoded.py``), then read like
  ``.npy``. EVT and AEDAT4 streams cannot be entered in the middle without replaying their decoder state, so
  the one full decode is what makes seeking cheap afterwards.

Why faery. Candidates compared on this machine (Python 3.11, manylinux wheels from PyPI):

=============== ============ ===================================== ============== ===========================
library         license      formats (R = read, W = write)         installs       notes
=============== ============ ===================================== ============== ===========================
faery 0.7.1     LGPL-3.0     R+W: EVT2, EVT3, AEDAT4, DAT, ES, CSV yes, 8 MB      write-then-read bit-exact in
                                                                                  all five; needs only numpy;
                                                                                  no EVT 2.1 writer (panics)
evlib 0.13.2    MIT          R: EVT2, EVT3, AEDAT, HDF5, text;     yes, ~720 MB   polars LazyFrame out, p as
                             W: HDF5 and text only                 with polars,   -1/1; pulls pyarrow,
                                                                   pyarrow        pandera, hdf5plugin
aedat 2.3.0     MIT          R: AEDAT4                             yes, 0.5 MB    no writer, one format
dv-processing   Apache-2.0   R+W: AEDAT4 (no EVT)                  yes, 24 MB     iniVation's own SDK
=============== ============ ===================================== ============== ===========================

Seeking: faery decodes a file from its start (its ``time_slice`` is a filter on the decoded stream);
dv-processing can seek an AEDAT4 file by its packet table (``getEventsTimeRange``) but reads no EVT. One
decoded copy in the cache serves every vendor format alike; using AEDAT4's table through dv-processing
would save that copy for AEDAT4 only, at the cost of a second library.

faery is the only one that reads *and* writes both vendors' formats (so tests make real files with the same
library's writer), has no dependency besides numpy, and is maintained by the authors of ``aedat``
(neuromorphicsystems / aestream). It is LGPL, used unmodified as a separate installable package (the optional
extra ``events``), which keeps streamcli's MIT licence.
"""

from __future__ import annotations

import importlib.util
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from streamcli.errors import EventFileError

NPY = (".npy",)
HDF5 = (".h5", ".hdf5")
DECODED = (".raw", ".aedat4", ".dat", ".es")
SUFFIXES = NPY + HDF5 + DECODED
"""The file suffixes the events source reads (lower case)."""
REMEDY = (
    "copy it again from where it came from, or move it out of the folder (on_error='skip' / --on-error skip skips it)"
)
"""What to do about a recording that is not whole: the end of every ``EventFileError`` about one."""


@dataclass(frozen=True)
class Events:
    """A run of events as four equal-length arrays (int64 ``t`` in µs, polarity 0/1 in ``p``)."""

    x: npt.NDArray[np.int64]
    y: npt.NDArray[np.int64]
    t: npt.NDArray[np.int64]
    p: npt.NDArray[np.int64]

    def __len__(self) -> int:
        return len(self.t)


def events(x: Any, y: Any, t: Any, p: Any) -> Events:
    """``Events`` from any integer or boolean columns (polarity > 0 becomes 1)."""
    return Events(
        np.asarray(x, np.int64),
        np.asarray(y, np.int64),
        np.asarray(t, np.int64),
        (np.asarray(p) > 0).astype(np.int64),
    )


class Reader(Protocol):
    """One recording, sliceable by event index."""

    sensor_size: tuple[int, int] | None  # (height, width) when the file records it

    def __len__(self) -> int: ...

    def read(self, a: int, b: int) -> Events:
        """Events ``[a, b)``."""
        ...

    def close(self) -> None: ...


def kind(path: str | Path) -> str:
    """``npy``, ``hdf5`` or ``decoded`` (read with faery), from the suffix; ``""`` if none applies."""
    s = Path(path).suffix.lower()
    return "npy" if s in NPY else "hdf5" if s in HDF5 else "decoded" if s in DECODED else ""


def need(module: str, fmt: str) -> None:
    """Raise ``ImportError`` naming the extra to install when ``module`` is missing."""
    if importlib.util.find_spec(module) is None:
        raise ImportError(f"reading {fmt} event files needs {module}: pip install 'streamcli[events]'")


class ColumnsReader:
    """Four equal-length columns (numpy arrays or memory maps), e.g. a structured ``.npy`` or decoded columns."""

    def __init__(self, x: Any, y: Any, t: Any, p: Any, sensor_size: tuple[int, int] | None = None) -> None:
        self.x, self.y, self.t, self.p = x, y, t, p
        self.sensor_size = sensor_size

    def __len__(self) -> int:
        return len(self.t)

    def read(self, a: int, b: int) -> Events:
        return events(self.x[a:b], self.y[a:b], self.t[a:b], self.p[a:b])

    def close(self) -> None:
        return None


def open_npy(path: str) -> ColumnsReader:
    try:
        arr = np.load(path, mmap_mode="r")
    except (PermissionError, FileNotFoundError):
        raise
    except (ValueError, EOFError, OverflowError, OSError) as exc:
        raise EventFileError(f"{path}: not a whole .npy file ({_npy_problem(path, exc)}); {REMEDY}") from exc
    names = arr.dtype.names or ()
    missing = [f for f in "xytp" if f not in names]
    if arr.ndim != 1 or missing:
        raise EventFileError(
            f"{path}: an events .npy must be a 1-D structured array with fields x, y, t, p; "
            f"it has shape {arr.shape} and fields {list(names)}"
        )
    return ColumnsReader(arr["x"], arr["y"], arr["t"], arr["p"])


def _npy_problem(path: str, exc: BaseException) -> str:
    """Where a ``.npy`` stops being whole: the size its header promises against the file's, if the header reads."""
    try:
        with open(path, "rb") as f:
            version = np.lib.format.read_magic(f)
            fmt = np.lib.format
            header = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
            shape, _, dtype = header(f)
            start = f.tell()
        size = os.path.getsize(path)
        want = start + math.prod(shape) * dtype.itemsize
    except Exception:  # the header itself is damaged: numpy's own words are all there is
        return f"{type(exc).__name__}: {exc}"
    if "pickled" in str(exc):  # numpy's advice (allow_pickle=) would load what is not an events array
        return "it holds pickled objects, not an array of events"
    if size < want:
        return f"it ends at byte {size} but its header promises {want} bytes, so it is truncated"
    return f"{type(exc).__name__}: {exc}"


class Hdf5Reader:
    """Datasets ``x, y, t, p`` (root or ``events/``) read by slices; the file is opened in the process that reads."""

    def __init__(self, path: str) -> None:
        need("h5py", "HDF5")
        h5py: Any = importlib.import_module("h5py")  # optional, untyped
        if importlib.util.find_spec("hdf5plugin") is not None:
            importlib.import_module("hdf5plugin")  # registers Blosc/Zstd filters (DSEC's files need them)
        self.path = path
        try:
            self.file = h5py.File(path, "r")
        except (PermissionError, FileNotFoundError):
            raise
        except OSError as exc:  # h5py's "Unable to synchronously open file (truncated file: eof = ...)"
            size = os.path.getsize(path)
            raise EventFileError(f"{path}: not a whole HDF5 file ({size} bytes; h5py: {exc}); {REMEDY}") from exc
        f = self.file
        group: Any = f["events"] if "events" in f and all(k in f["events"] for k in "xytp") else f
        missing = [k for k in "xytp" if k not in group]
        if missing:
            self.file.close()
            raise EventFileError(f"{path}: no datasets {', '.join(missing)} at the root or under events/")
        self.x, self.y, self.t, self.p = (group[k] for k in "xytp")
        offset = f["t_offset"][()] if "t_offset" in f else f.attrs.get("t_offset", 0)
        self.t_offset = int(np.asarray(offset).reshape(-1)[0]) if np.size(offset) else 0
        places = (dict(f.attrs), dict(group.attrs), _scalars(group), _scalars(f))
        self.sensor_size = next((hw for hw in map(_hdf5_size, places) if hw is not None), None)

    def __len__(self) -> int:
        return int(self.t.shape[0])

    def read(self, a: int, b: int) -> Events:
        try:
            t = np.asarray(self.t[a:b], np.int64)
            return events(self.x[a:b], self.y[a:b], t + self.t_offset if self.t_offset else t, self.p[a:b])
        except OSError as exc:  # a damaged chunk: h5py's "Can't synchronously read data"
            raise EventFileError(f"{self.path}: events [{a}, {b}) do not read (h5py: {exc}); {REMEDY}") from exc

    def close(self) -> None:
        self.file.close()


def _scalars(group: Any) -> dict[str, Any]:
    """``height`` and ``width`` stored as scalar datasets (RVT's Gen1/1Mpx files), as a dict like ``attrs``."""
    return {k: group[k][()] for k in ("height", "width") if k in group and group[k].shape == ()}


def _hdf5_size(attrs: dict[str, Any]) -> tuple[int, int] | None:
    if "height" in attrs and "width" in attrs:
        return int(attrs["height"]), int(attrs["width"])
    if "sensor_size" in attrs:
        hw = np.asarray(attrs["sensor_size"]).reshape(-1)
        return int(hw[0]), int(hw[1])
    return None
