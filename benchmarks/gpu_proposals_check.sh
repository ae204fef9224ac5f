#!/usr/bin/env bash
# GPU check of the proposals stage (issue 13: "where a GPU machine is available, run the stage on it once").
# Needs the `vision` extra on a machine with a CUDA device; run from the repository root.
#   1. the CUDA test (the stage on cuda gives the CPU run's candidates and boxes) and the stage tests;
#   2. per-image forward time and stage overhead on cuda, then on the CPU, with the tests' tiny models.
# (`bench_proposals_stage --full-size` builds the released sizes with random weights; on an H200 its noise
# masks, ~900 boxes per image at any threshold, made one image's call result 55 MB, over the call cache's
# 32 MB line limit, so it has no figures yet.)
set -uo pipefail
PY=${PYTHON:-python3}
$PY -m pytest -p no:cacheprovider -o addopts="" -q --import-mode=importlib \
    tests/tasks/proposals/test_stage_cuda.py tests/tasks/proposals/test_stage.py
$PY -m benchmarks.bench_proposals_stage --device cuda --images 8
$PY -m benchmarks.bench_proposals_stage --device cpu --images 8
