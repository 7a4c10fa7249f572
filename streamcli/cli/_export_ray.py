"""``streamcli export --engine ray``: the export's job handed to Ray (``streamcli.shards.on_ray``), with the
command's progress bar fed from the tasks' reports. Apart from ``cmd_export`` because Ray is optional and its
path shares nothing with the local writer's but the header and the bar."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress

from streamcli.cli._export_plan import epochs_for
from streamcli.cli._options import LoaderOptions


def export_with_ray(
    loader: Any,
    spec: Any,
    opts: LoaderOptions,
    header: dict[str, Any],
    out_dir: str | Path,
    epochs: int | None,
    total: int,
    mode: str,
    address: str | None,
    partitions: int | None,
    progress: Progress,
    task: Any,
    console: Console,
) -> dict[str, Any]:
    from streamcli.shards.on_ray import Job, export_on_ray

    kw = {"batch_size": opts.batch_size, "time_steps": opts.time_steps, **opts.record()}
    needed = epochs if epochs is not None else 1 + max(0, epochs_for(loader, total))
    job = Job(
        source=spec.record(),
        loader=kw,
        header=header,
        out_dir=str(out_dir),
        epochs=needed,
        total=total,
        fingerprint=loader.state_dict()["fingerprint"],
    )
    loader.close()  # each task builds its own: this one's workers and shared memory would idle through the export

    def on_started(s: float) -> None:
        console.print(f"[dim]Ray ready in {s:.1f} s[/]", highlight=False)

    from streamcli.shards.format import batch_nbytes, manifest_fields

    per_batch = batch_nbytes(manifest_fields(header), opts.batch_size, opts.time_steps)  # as the local bar counts

    def report(n: int, of: int) -> None:
        progress.update(task, completed=n, mb=n * per_batch / 1e6)

    return export_on_ray(job, mode=mode, partitions=partitions, address=address, progress=report, on_started=on_started)
