"""A worker's error reaches the consumer as the same class it has in-process (issue 34)."""

from __future__ import annotations

import pytest
from _sources import CountingSource
from _transform_fakes import WrongShapeTransform

from streamcli import SourceError, StepSpecError, StreamLoader, TransformError
from streamcli.workers.worker import error_kind, remote_error


@pytest.mark.parametrize("workers", [0, pytest.param(2, marks=pytest.mark.slow)])
def test_a_transform_error_is_caught_as_one_at_any_worker_count(workers: int, no_leaks: None) -> None:
    with StreamLoader(CountingSource([4, 4]), 2, 2, num_workers=workers, transform=WrongShapeTransform()) as loader:
        with pytest.raises(TransformError, match=r"returned field 'x' as int64\[1, 3\]"):
            next(iter(loader))


class PluginSpecError(StepSpecError):
    """A plugin's own subclass, as a spawned worker would name it (this module is importable there too)."""


class Unmakeable(TransformError):
    def __init__(self, a: int, b: int) -> None:
        super().__init__(f"{a} {b}")


def test_a_workers_error_keeps_its_class_or_falls_back_to_its_nearest_base() -> None:
    assert type(remote_error(error_kind(TransformError("t")), "t")) is TransformError
    assert type(remote_error(error_kind(PluginSpecError("p")), "p")) is PluginSpecError
    # A class this process cannot find (the plugin's module is not here): the streamcli base it derives from.
    named = [("no_such_plugin_module", "PluginSpecError"), *error_kind(StepSpecError("x"))]
    assert type(remote_error(named, "x")) is StepSpecError
    assert type(remote_error(error_kind(Unmakeable(1, 2)), "1 2")) is TransformError  # not made from a message
    assert type(remote_error(error_kind(RuntimeError("r")), "r")) is SourceError  # not streamcli's: the source's
