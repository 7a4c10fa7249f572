"""``streamcli bench``'s advice follows its own figures (issue 46, point 5): when workers lose to the
in-process loader it says so and why; when they win, it says by how much. Results are fabricated both ways."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from typer.testing import CliRunner

from streamcli.bench import BenchResult
from streamcli.cli import app
from streamcli.cli._bench_verdict import bottleneck, workers_verdict

runner = CliRunner()


def result(workers: int, steps_per_s: float, **kw: Any) -> BenchResult:
    base = BenchResult(
        name="streamcli", workers=workers, batches_per_s=steps_per_s / 64, steps_per_s=steps_per_s, mb_per_s=1.0,
        wait_p50_ms=0.4 if workers == 0 else 2.0, wait_p95_ms=3.0, busy=float("nan") if workers == 0 else 0.3,
        first_batch_s=0.1, peak_rss_mb=100.0, repeats=3, batches=100,
        busy_per_worker=() if workers == 0 else (0.3,) * workers,
    )  # fmt: skip
    return dataclasses.replace(base, **kw)


CHEAP = [result(0, 60_000.0), result(1, 29_000.0), result(2, 31_000.0)]  # workers 2x slower: cheap steps
COSTLY = [result(0, 900.0), result(1, 1_000.0), result(2, 1_700.0)]  # decoding: workers help


def test_when_workers_lose_the_verdict_says_so_and_why() -> None:
    line = workers_verdict(CHEAP)
    assert line is not None
    assert line.startswith("workers lose"), line
    assert "2 workers" in line and "1.9x slower" in line  # 60,000 / 31,000, the best of the workers
    assert "cheaper than the hand-off" in line and "-w 0" in line
    best = bottleneck(max(CHEAP, key=lambda r: r.steps_per_s), CHEAP)
    assert "workers help" not in best and "cores are free" not in best, best


def test_when_workers_win_the_verdict_gives_the_speed_up_over_in_process() -> None:
    line = workers_verdict(COSTLY)
    assert line is not None
    assert line.startswith("workers help"), line
    assert "2 workers" in line and "1.9x in-process" in line  # 1,700 / 900
    assert "lose" not in line and "cheaper than the hand-off" not in line


def test_no_comparison_without_both_sides_and_the_in_process_line_claims_nothing_unmeasured() -> None:
    assert workers_verdict([result(0, 500.0)]) is None
    assert workers_verdict([result(2, 500.0)]) is None
    alone = bottleneck(result(0, 500.0))
    assert "workers help" not in alone and "-w 2" in alone  # how to find out, not a claim


@pytest.mark.parametrize(("results", "word"), [(CHEAP, "workers lose"), (COSTLY, "workers help")])
def test_the_command_prints_the_verdict_of_its_own_table(
    results: list[BenchResult], word: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import streamcli.bench

    monkeypatch.setattr(streamcli.bench, "run_benchmark", lambda *a, **k: results)
    args = ["bench", "camera", "-s", "count=2", "-s", "size=8x8", "-s", "steps=4", "-b", "2", "-t", "2"]
    out = runner.invoke(app, [*args, "-w", "0", "-w", "1", "-w", "2", "--quick", "-q"], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    assert f"verdict: {word}" in out.output, out.output
    as_json = runner.invoke(app, [*args, "-w", "0", "-w", "1", "-w", "2", "--quick", "--json"])
    assert as_json.exit_code == 0, as_json.output
    assert json.loads(as_json.stdout)["workers_verdict"].startswith(word)
