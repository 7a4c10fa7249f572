"""The benchmark harness, importable as a package so that spawn workers can unpickle its sources by name.

- ``workloads``: the synthetic sources and the variants (A, A8, A8b, B) every loader reads;
- ``_peers``: the loaders compared, each wrapped as a ``Candidate``;
- ``torch_baseline``: ``TorchBaseline``, the hand-written torch ``DataLoader`` every loader is raced against;
- ``runner``: one measured run (through ``streamcli.bench.time_run``), repeats, the quiet-machine wait, checks;
- ``report``: tables, the targets as data and their verdicts, RESULTS.md;
- ``bench_loader``: the command line.
- ``videos``: the real clips and the plain decoding loop that ``bench_video`` and ``bench_host`` both time.
"""
