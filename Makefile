# The two README commands: `make sample` builds a release from the bundled sample,
# `make test` runs the test suite. Both create .venv and install the project first.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The tools the tests run in their own environments (Label Studio, datumaro, nuscenes-devkit) and NLTK's
# WordNet data, made once in $REASONVQA_TEST_CACHE (default ~/.cache/reasonvqa-tests): tests/prepare.py
TEST_CACHE_STAMP := $(VENV)/.test-cache
# pytest-xdist workers: one more than the cores, so one worker's waits (servers starting, subprocess builds, polls)
# leave its core to the others (2 cores, quiet machine, 2026-12-08: 8 min 37 s with 3 workers; 10 min 12 s with 2 at
# load ~1 more); `make test TEST_WORKERS=0` runs in one process
TEST_WORKERS ?= $(shell echo $$(( $$(nproc) + 1 )))

.PHONY: sample test test-fast lint install bench bench-release clean

$(STAMP): pyproject.toml setup.py
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e ".[test]"
	touch $(STAMP)

$(TEST_CACHE_STAMP): $(STAMP) tests/tool_cache.py tests/knowledge/wordnet_data.py
	$(BIN)/python -m tests.prepare
	touch $(TEST_CACHE_STAMP)

install: $(STAMP) $(TEST_CACHE_STAMP)

sample: $(STAMP)
	$(BIN)/reasonvqa build --sample --out out

# ruff and mypy over the product (configured in pyproject.toml; .ci/run runs this before the tests); both run, either fails it.
lint: $(STAMP)
	status=0; $(BIN)/ruff check . || status=1; $(BIN)/mypy -p reasonvqa || status=1; exit $$status

# The whole suite on every core; the 15 slowest tests are listed at the end.
test: install
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --durations=15

# The edit loop (well under a minute): the suite without its slow files (tests/conftest.py, --fast).
test-fast: install
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --fast --durations=5

# Benchmarks take minutes each; benchmarks/README.md lists them and BENCHMARKS.md holds the figures.
bench: $(STAMP)
	$(BIN)/python -m benchmarks.bench_release_floor
	$(BIN)/python -m benchmarks.bench_question_generation
	$(BIN)/python -m benchmarks.bench_sa1b_ingest
	$(BIN)/python -m benchmarks.bench_sparql_batching --sizes 100,1000,5000
	$(BIN)/python -m benchmarks.bench_sparql_batching mirror --scale 0.01
	$(BIN)/python -m benchmarks.bench_proposals nms
	$(BIN)/python -m benchmarks.bench_proposals stage
	$(BIN)/python -m benchmarks.bench_verified_sandbox
	$(BIN)/python -m benchmarks.bench_annotation_roundtrip
	$(BIN)/python -m benchmarks.bench_rehearsal --scale 0.01

# The side-by-side table alone: I/O floor, polars rewrite and project (balance + split + write).
bench-release: $(STAMP)
	$(BIN)/python -m benchmarks.bench_release_floor

clean:
	rm -rf out work
