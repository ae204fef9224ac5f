# The two README commands: `make sample` builds a release from the bundled sample,
# `make test` runs the test suite. Both create .venv and install the project first.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: sample test install bench bench-release clean

$(STAMP): pyproject.toml setup.py
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e ".[test]"
	touch $(STAMP)

install: $(STAMP)

sample: $(STAMP)
	$(BIN)/reasonvqa build --sample --out out

test: $(STAMP)
	$(BIN)/python -m pytest

# Full-size benchmarks take minutes each; results go in BENCHMARKS.md.
bench: $(STAMP)
	$(BIN)/python -m benchmarks.bench_source_ingest
	$(BIN)/python -m benchmarks.bench_sparql_batching --sizes 100,1000,5000
	$(BIN)/python -m benchmarks.bench_question_generation
	$(BIN)/python -m benchmarks.bench_balance_split
	$(BIN)/python -m benchmarks.bench_release_floor
	$(BIN)/python -m benchmarks.bench_verified_sandbox

# The side-by-side table alone: I/O floor, polars rewrite and project (balance + split + write).
bench-release: $(STAMP)
	$(BIN)/python -m benchmarks.bench_release_floor

clean:
	rm -rf out work
