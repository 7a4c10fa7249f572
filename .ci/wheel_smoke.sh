#!/usr/bin/env bash
# Install the wheel as a user would (non-editable, fresh venv, bare extras) and use it from outside the tree.
# Catches a module, data file or entry point missing from the wheel before a user does.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
python="${PYTHON:-python3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# Build from a copy of the sources: setuptools reuses a checkout's build/ folder, which can hide a missing module.
mkdir -p "$work/src/plugins"
cp "$repo"/{pyproject.toml,README.md,LICENSE} "$work/src/"
cp -r "$repo/streamcli" "$work/src/"
cp -r "$repo/plugins/streamcli_sources" "$work/src/plugins/"
find "$work/src" \( -name __pycache__ -o -name '*.egg-info' \) -prune -exec rm -rf {} +
"$python" -m pip wheel --no-deps -q -w "$work/dist" "$work/src"
wheel="$(ls "$work"/dist/streamcli-*.whl)"
"$python" -m venv "$work/venv"
pip=("$work/venv/bin/python" -m pip install -q -c "$repo/constraints.txt")
quiet() { "$@" 2> >(grep -v "is ignored: it is neither" >&2); }  # this machine's pip config names empty indexes
quiet "${pip[@]}" torch==2.13.0
quiet "${pip[@]}" "$wheel"

cd "$work"  # nothing of the checkout is importable from here
"$work/venv/bin/python" - <<'PY'
import importlib, pkgutil, sys
import streamcli, streamcli_sources
assert "site-packages" in streamcli.__file__, streamcli.__file__
names = []
for pkg in (streamcli, streamcli_sources):
    names.append(pkg.__name__)
    # __main__ runs the CLI when imported: it is checked by running the command below
    names += [m.name for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + ".") if not m.name.endswith("__main__")]
optional = {"av", "zstandard", "fsspec", "s3fs", "h5py", "faery", "ray", "textual", "pyarrow", "tokenizers", "zarr"}
# (the extras' packages: absent here)
skipped = []
for name in names:
    try:
        importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name not in optional:
            raise
        skipped.append(f"{name} (needs {exc.name})")
if skipped:
    print("not imported without their extra:", ", ".join(skipped))
from importlib.resources import files
assert files("streamcli").joinpath("py.typed").is_file() and files("streamcli_sources").joinpath("texture.png").is_file()
print(f"imported {len(names)} modules from {streamcli.__file__.rsplit('/streamcli/', 1)[0]}")
PY
cli="$work/venv/bin/streamcli"
"$cli" --version
"$cli" plugins
"$cli" export camera "$work/out" -b 2 -t 8 --batches 3 -w 0
"$cli" verify "$work/out"
"$cli" replay "$work/out"
echo "wheel smoke: ok"
