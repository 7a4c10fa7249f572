"""One scan cache for the whole run (``video_scans``), shared by the tests that scan the same real clips.

A scan decodes every frame of every clip (seconds of CPU for the shared set, per decoder). Its cache entries are
keyed by the file's path, size, mtime and decoder and written under a temporary name, then renamed
(``streamcli_sources._scan``), so tests and pytest-xdist workers may share one folder: whichever scans a clip
first, the others read the same counts and checksums.
"""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session")
def video_scans(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The run's scan cache folder: beside the xdist workers' own temporary folders, or in this run's one."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # this run's folder, which every worker's basetemp is in
    folder = root / "video-scans"
    folder.mkdir(exist_ok=True)
    return str(folder)
