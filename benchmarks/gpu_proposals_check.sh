#!/usr/bin/env bash
# GPU check of the proposals stage (issue 13: "where a GPU machine is available, run the stage on it once").
# Needs the `vision` extra on a machine with a CUDA device; run from the repository root: the CUDA test
# (the stage on cuda gives the CPU run's candidates and boxes) and the stage tests. (The per-image timing
# script bench_proposals_stage.py was removed with issue 32; it is in git history.)
set -uo pipefail
PY=${PYTHON:-python3}
$PY -m pytest -p no:cacheprovider -o addopts="" -q --import-mode=importlib \
    tests/tasks/proposals/test_stage_cuda.py tests/tasks/proposals/test_stage.py
