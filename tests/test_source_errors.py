"""Every exception a source raises reaches the user as a ``SourceError`` naming the plugin and the item."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from _sources import CountingSource

from streamcli import SourceError, StreamLoader, load_source


@pytest.mark.parametrize("workers", [0, pytest.param(2, marks=pytest.mark.slow)])
def test_a_text_file_removed_after_the_loader_was_built_is_a_source_error_naming_it(
    workers: int, books: Path, no_leaks: None
) -> None:
    with StreamLoader(load_source("text", str(books), width=4), 2, 3, num_workers=workers) as loader:
        (books / "b1.txt").unlink()
        with pytest.raises(SourceError, match=r"plugin 'text' failed measuring item 'b1.txt'") as ei:
            for _ in loader:  # not list(): that asks len() first, which raises the same error
                pass
    assert isinstance(ei.value.__cause__, FileNotFoundError)


def test_a_file_removed_after_the_loader_was_built_is_skipped_under_on_error_skip(books: Path) -> None:
    with StreamLoader(load_source("text", str(books), width=4), 2, 3, on_error="skip", shuffle=False) as loader:
        (books / "b1.txt").unlink()
        batches = list(loader)
        assert batches and loader.stats.skipped == 1


class _BadItems(CountingSource):
    def items(self) -> list[int]:
        raise PermissionError("the catalogue is unreadable")


class _BadLength(CountingSource):
    def length(self, item: int) -> int | None:
        if item == 1:
            raise ValueError("no header")
        return super().length(item)


def test_items_that_raise_are_a_source_error_with_the_original_as_cause() -> None:
    with pytest.raises(SourceError, match=r"plugin '_BadItems' failed listing its items: PermissionError") as ei:
        StreamLoader(_BadItems([3]), 1, 2)
    assert isinstance(ei.value.__cause__, PermissionError)


def test_length_that_raises_is_a_source_error_in_len_and_in_segments() -> None:
    with StreamLoader(_BadLength([3, 3]), 1, 2) as loader, pytest.raises(SourceError, match=r"measuring item '1'"):
        len(loader)
    with pytest.raises(SourceError, match=r"plugin '_BadLength' failed measuring item '1' \(stream 1\)"):
        StreamLoader(_BadLength([3, 3]), 1, 2, segment=2)


class _Exits(CountingSource):
    def open(self, item: int, start: int = 0) -> Iterator[dict[str, np.ndarray]]:
        for p in range(start, self.lengths[item]):
            if item == 1 and p == 2:
                raise SystemExit(4)
            yield {"x": np.array([item, p], np.int64)}


@pytest.mark.parametrize("workers", [0, pytest.param(1, marks=pytest.mark.slow)])
def test_sys_exit_inside_a_source_is_a_source_error_with_its_code(workers: int, no_leaks: None) -> None:
    with StreamLoader(_Exits([5, 5]), 2, 2, num_workers=workers, shuffle=False) as loader:
        with pytest.raises(SourceError, match=r"failed reading item '1' \(stream 1\) at step 2: SystemExit: 4"):
            list(loader)


def test_a_misspelt_plugin_name_suggests_the_installed_one() -> None:
    from streamcli import PluginNotFoundError

    with pytest.raises(PluginNotFoundError, match=r"no plugin named 'vidoe' \(did you mean 'video'\?\); installed"):
        load_source("vidoe", "clips/")


def test_len_of_a_source_without_lengths_names_both_ways_out() -> None:
    with StreamLoader(CountingSource([3, 4], report_length=False), 1, 2) as loader:
        with pytest.raises(TypeError, match=r"batches_per_epoch=N.*scan=True"):
            len(loader)
