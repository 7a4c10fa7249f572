#!/usr/bin/env bash
# The engine's A/B (issue 49): a base tree and this one, alternated round by round, each command once per tree.
#   git archive 5523a8b | tar -x -C /tmp/base && benchmarks/investigations/ab_engine.sh /tmp/base 5 /tmp/ab
# Writes one file per command, tree and round into OUT; read the medians across rounds (RESULTS.md).
set -euo pipefail
base=$(cd "$1" && pwd); rounds=${2:-5}; out=${3:-/tmp/ab}; here=$(cd "$(dirname "$0")/../.." && pwd)
py=${PYTHON:-$here/.venv/bin/python}
mkdir -p "$out"
export PYTHONPYCACHEPREFIX=${PYTHONPYCACHEPREFIX:-$out/pyc}  # both trees compiled once, not at every start
for r in $(seq "$rounds"); do
  for t in base main; do
    if [ "$t" = base ]; then d=$base; export PYTHONPATH=$base:$base/plugins; else d=$here; unset PYTHONPATH; fi
    cd "$d"
    "$py" benchmarks/bench_tokens.py --rounds 1 --batches 200 --max-workers 0 > "$out/tok_${t}_$r.txt" 2>&1
    "$py" benchmarks/bench_loader_costs.py --rounds 1 --batches 300 > "$out/costs_${t}_$r.txt" 2>&1
    "$py" benchmarks/bench_arrays.py --rounds 1 > "$out/arr_${t}_$r.txt" 2>&1
    "$py" benchmarks/bench_wakeups.py --variant A8 --batches 400 --repeats 1 > "$out/wake_${t}_$r.txt" 2>&1
    "$py" benchmarks/investigations/block_crossings.py --rounds 1 --batches 200 > "$out/blk_${t}_$r.txt" 2>&1
  done
done
