# Two commands on a fresh machine: `make demo` and `make test`. Both are idempotent.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip install -c constraints.txt
STAMP  := $(VENV)/.installed
RUNTIME := $(VENV)/.runtime

.PHONY: demo test quick wheel-check lint typecheck bench install clean docs

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)

# Reinstall only when the project's metadata or the pins change. The demo needs the runtime and its video
# backends only; the test, lint and engine extras (ray, lightning, moto, mypy) come with `make test`.
$(RUNTIME): $(VENV)/bin/python pyproject.toml constraints.txt plugins/streamcli-sine/pyproject.toml
	$(PIP) --upgrade pip
	$(PIP) torch==2.13.0
	$(PIP) -e ".[pyav]"
	touch $(RUNTIME)

$(STAMP): $(RUNTIME)
	$(PIP) -e ".[test,lint,ray,events,zstd,s3,pyav,tables,lerobot,zarr,tokenize,tui]"
	$(PIP) -e plugins/streamcli-sine
	touch $(STAMP)

install: $(STAMP)

# `make demo` previews a video folder: CLIPS=path/to/videos, or clips rendered once by the camera source.
SAMPLES ?= samples
CLIPS ?=
demo: $(RUNTIME)
	@if [ -n "$(CLIPS)" ]; then dir="$(CLIPS)"; else $(VENV)/bin/streamcli samples $(SAMPLES) && dir="$(SAMPLES)/clips"; fi; \
	$(VENV)/bin/streamcli preview video "$$dir" -b 6 -t 16 -w 2
	@echo "streamcli is installed in .venv: 'source .venv/bin/activate' puts it on PATH (or run .venv/bin/streamcli)"

lint: $(STAMP)
	$(VENV)/bin/ruff check streamcli plugins tests benchmarks examples
	$(VENV)/bin/ruff format --check streamcli plugins tests benchmarks examples
	$(VENV)/bin/mypy

# The suite runs on pytest-xdist workers, one per core (TEST_WORKERS=0: in one process, in order; a number: that
# many). The tests of an xdist_group (Ray's; the docs' examples; Lightning's) run on one worker, one after another
# (tests/_groups.py makes the groups work under pytest 9.2). mypy runs beside the suite (the suite leaves the
# cores idle while its tests wait on processes), and its report follows the suite's; either failing fails the
# target.
TEST_WORKERS ?= auto
test: $(STAMP)
	$(VENV)/bin/ruff check streamcli plugins tests benchmarks examples
	$(VENV)/bin/ruff format --check streamcli plugins tests benchmarks examples
	@$(VENV)/bin/mypy > .mypy.out 2>&1 & mypy=$$!; \
	$(VENV)/bin/pytest -q -n $(TEST_WORKERS) --dist loadgroup; tests=$$?; \
	wait $$mypy; types=$$?; echo "mypy:"; cat .mypy.out; rm -f .mypy.out; \
	test $$tests -eq 0 && test $$types -eq 0

# The inner loop: the tests that start no worker process and decode no real file (under a minute). Any of them
# that starts a process or decodes a shared file fails (tests/_guard.py): the slow marker is checked here too.
quick: $(STAMP)
	$(VENV)/bin/pytest -q -m "not slow" -n $(TEST_WORKERS)

# The documentation site (mkdocs.yml, docs/) into site/; --strict: a broken link or docstring fails the build.
docs: $(STAMP)
	$(PIP) -e ".[docs]"
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

# Build the wheel, install it non-editable in a fresh venv and use it from outside the tree (CI runs this).
wheel-check: $(STAMP)
	PYTHON=$(PY) bash .ci/wheel_smoke.sh

# Full run takes a few minutes; a smoke run (a minute or two) is
# `make bench BENCH_ARGS=--quick REPLAY_ARGS="--repeats 1" COMPRESS_ARGS="--repeats 1"`,
# `BENCH_ARGS=--write` updates RESULTS.md. The video target has its own script: benchmarks/bench_video.py.
REPLAY_ARGS ?=
COMPRESS_ARGS ?=
STORAGE_ARGS ?=
VIDEO_BACKENDS_ARGS ?=
bench: $(STAMP)
	$(PIP) -e ".[bench]"
	$(PY) benchmarks/bench_loader.py $(BENCH_ARGS)
	$(PY) benchmarks/bench_replay.py $(REPLAY_ARGS)
	$(PY) benchmarks/bench_small_steps.py
	$(PY) benchmarks/bench_events.py
	$(PY) benchmarks/bench_compress.py $(COMPRESS_ARGS)
	$(PY) benchmarks/bench_storage.py $(STORAGE_ARGS)
	$(PY) benchmarks/bench_video_backends.py $(VIDEO_BACKENDS_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
