"""One local Ray instance for the tests that use Ray but do not test its own start and stop (``ray_session``).

Starting Ray costs seconds of CPU; the tests that start their own (``--engine ray`` without ``--address``, a killed
driver, Ctrl-C) still do. The instance runs in this process (``ray.init``) from the first test that asks for it
until the next test is not in the ``ray`` xdist group (those run one after another on one xdist worker), so no
other test shares the process with it. Its processes are left out of the leak check (``conftest._children``).
The moto S3 server is started first where it is installed: Ray's workers take the environment of the process
that started Ray, and the S3 tests need its endpoint there.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator

import psutil
import pytest

_roots: list[psutil.Process] = []  # the processes ray.init started here; Ray's workers are their descendants
_address: list[str] = []


def start() -> str:
    """The running instance's GCS address (for ``--address``), starting it on first use."""
    if _address:
        return _address[0]
    import ray

    before = {p.pid for p in psutil.Process().children()}
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    _roots.extend(p for p in psutil.Process().children() if p.pid not in before)
    _address.append(ray.get_runtime_context().gcs_address)
    return _address[0]


def stop() -> None:
    """Shut the instance down and wait until its processes have gone."""
    if not _address:
        return
    import ray

    ray.shutdown()
    _, alive = psutil.wait_procs(_roots, timeout=15)
    for p in alive:  # never leave them to the next test
        p.kill()
    psutil.wait_procs(alive, timeout=5)
    _roots.clear()
    _address.clear()


def processes() -> set[int]:
    """The pids of the instance's processes (none when it is not running)."""
    pids = set()
    for root in _roots:
        try:
            pids.add(root.pid)
            pids.update(c.pid for c in root.children(recursive=True))
        except psutil.Error:  # gone meanwhile
            pass
    return pids


def in_ray_group(item: pytest.Item | None) -> bool:
    marker = None if item is None else item.get_closest_marker("xdist_group")
    return marker is not None and "ray" in (*marker.args, marker.kwargs.get("name"))


@pytest.fixture
def ray_session(request: pytest.FixtureRequest) -> Iterator[str]:
    """This process's shared Ray instance, connected; its address for a subprocess's ``--address``."""
    pytest.importorskip("ray")
    assert in_ray_group(request.node), "a test on the shared Ray must be in xdist_group('ray')"
    if importlib.util.find_spec("moto") is not None and importlib.util.find_spec("s3fs") is not None:
        request.getfixturevalue("moto_s3")
    yield start()


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """After the last test of a run of the ray group: no other test shares this process with Ray's."""
    if _address and not in_ray_group(nextitem):
        stop()
